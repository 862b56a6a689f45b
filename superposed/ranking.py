"""Ranking drafts: one ordered list of stages, each applied once; scores keep meaning order.

The engine's in-loop decision (``select``) chooses what is decoded; the
stages here order what was decoded. A ``Stage`` takes drafts best first and returns them best
first, their scores never rising down the list: a stage that moves a draft gives it the score
of its new place (``settle``: its own where that lies between its new neighbours', else the
nearer neighbour's, a tie), so a score says where a draft ranks and, where it fits there,
what evidence it has. The stages are generic over anything with a ``text`` and a ``score``
(``Ranked``: the engine's ``Draft``, lsp_server's ``Suggestion``); what only a caller knows
(whether a draft parses, what the memory's copy says, what a near duplicate is) comes in as a
predicate or a key.

A request's stages, in order:

1. ``distinct(k)``: identical texts merged, the k best by score (k counts the spares the
   caller asked for, lsp_server/completion.SPARE_DRAFTS); superposed/superposed.py;
2. ``seeds``: the memory's copies (superposed/memory.py ``seeds``) placed at
   ``memory_seed_rank`` (the last of the k shown), unless a decoded draft says the same; a
   seed's own score is its memory evidence (``memory.copy_score``), settled to its place;
   then ``reserves``: copies of the memory's other matches (``memory.reserves``) after all,
   for the slots the text stages free;

then ``text_stages``, on the drafts' cleaned-up texts (lsp_server/completion/decode.py
``rank_stages`` passes in the keys and predicates only it knows; a stage without one is off):

3. ``kept(predicate, shorter)``: drafts that parse at the cursor
   (lsp_server/completion/wellformed.py),
   a block that does not cut to its lines that do; first, so that a malformed draft never
   merges a good one away;
4. ``merged(key)``: the same text, or a near duplicate (``lsp_server.completion.cleanup.near_key``),
   is one guess: the better-scored stays, a spare takes the freed slot;
5. ``new_keys_first(key)``: a block's drafts with a first line not shown yet first;
6. ``led(predicate)``: the draft that says what a long memory match goes on with first
   (lsp_server/completion/evidence.py);
7. ``cut(k)``: the k shown.

"Change how drafts are ranked" is a change here: the stages and both lists of them
(``engine_stages``, ``text_stages``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable, Iterable, Sequence
from dataclasses import replace
from itertools import chain
from typing import Any, Protocol, TypeVar, cast

from superposed.types import DecodeConfig, Draft


class Ranked(Protocol):
    """What the stages read: a draft's text and its score (higher is better)."""

    @property
    def text(self) -> str: ...
    @property
    def score(self) -> float: ...


T = TypeVar("T")
R = TypeVar("R", bound=Ranked)
Stage = Callable[[list[T]], list[T]]  # drafts best first -> drafts best first


def apply(drafts: list[T], stages: Sequence[Stage[T]]) -> list[T]:
    """The drafts after each stage in turn."""
    for stage in stages:
        drafts = stage(drafts)
    return drafts


def with_score(item: R, score: float) -> R:
    """A copy of ``item`` (a dataclass) with another score."""
    return cast(R, replace(cast(Any, item), score=score))


def with_text(item: R, text: str) -> R:
    """A copy of ``item`` (a dataclass) with another text."""
    return cast(R, replace(cast(Any, item), text=text))


def settle(items: list[R], moved: Collection[int]) -> list[R]:
    """``items`` with the score of each one at an index in ``moved`` fitted to its place.

    A moved item keeps its own score where that is at most the (settled) score of the item
    before it and at least that of the next item not moved; else it takes the nearer bound.
    A score that is not finite (no evidence) takes the next item's, else the previous one's,
    else stays.
    The items not moved keep theirs: where they were best first, all are.
    """
    out: list[R] = []
    for i, item in enumerate(items):
        if i in moved:
            high = out[-1].score if out else math.inf
            after = (items[j].score for j in range(i + 1, len(items)) if j not in moved)
            low = next(after, -math.inf)
            own = item.score
            if not math.isfinite(own):  # no evidence: a neighbour's, where there is one
                own = next((b for b in (low, high) if math.isfinite(b)), own)
            score = min(max(own, low), high)
            if score != item.score:
                item = with_score(item, score)
        out.append(item)
    return out


# --- the engine's stages ----------------------------------------------------------------------


def best_drafts(drafts: Sequence[R], k: int) -> list[R]:
    """The k best distinct drafts by score, best first (identical texts merged)."""
    unique: dict[str, R] = {}
    for draft in sorted(drafts, key=lambda d: d.score, reverse=True):
        unique.setdefault(draft.text, draft)
    return list(unique.values())[:k]


def distinct(k: int) -> Stage[R]:
    """Identical texts merged, the k best by score first (``best_drafts``)."""
    return lambda drafts: best_drafts(drafts, k)


def seeds(seeded: list[Draft], rank: int, k: int) -> Stage[Draft]:
    """The memory's seeded drafts placed, the last at ``rank`` (``place_all``)."""
    return lambda drafts: place_all(drafts, seeded, rank, k)


def engine_stages(
    seeded: list[Draft], cfg: DecodeConfig, reserve: Sequence[Draft] = ()
) -> list[Stage[Draft]]:
    """The superposed method's stages, in order: distinct drafts cut to k, the memory's
    seeds, then its reserves."""
    return [distinct(cfg.k), seeds(seeded, cfg.memory_seed_rank, cfg.k), reserves(reserve)]


def reserves(reserve: Sequence[Draft]) -> Stage[Draft]:
    """The memory's reserves (``memory.reserves``) after every draft, those that say what a
    draft says left out, their scores settled below the last draft's (``settle``): they take
    a slot only where the text stages leave fewer than k."""

    def stage(drafts: list[Draft]) -> list[Draft]:
        texts = {d.text for d in drafts}
        extra = [replace(r, source="memory") for r in reserve if r.text not in texts]
        return settle([*drafts, *extra], range(len(drafts), len(drafts) + len(extra)))

    return stage


def place_all(drafts: list[Draft], seeded: list[Draft], rank: int, k: int) -> list[Draft]:
    """The seeds placed in order, the last at ``rank`` (the first ones before it)."""
    for i, draft in enumerate(seeded):
        drafts = place(drafts, draft, max(0, rank - (len(seeded) - 1) + i), k)
    return drafts


def place(drafts: list[Draft], seeded: Draft | None, rank: int, k: int) -> list[Draft]:
    """``seeded`` at ``rank`` among the best-first ``drafts`` (at most k), unless one of them
    already says the same (or after all, with fewer).

    The place is the memory's decision (``memory_seed_rank``), the score is the seed's own
    evidence (``memory.copy_score``) settled to that place: between the draft before it and
    the one it displaces (``settle``), so the scores stay best first.
    """
    if seeded is None or any(d.text == seeded.text for d in drafts):
        return drafts
    at = min(rank, len(drafts))
    placed = replace(seeded, source="memory")
    return settle([*drafts[:at], placed, *drafts[at:]], {at})[:k]


# --- the stages on the cleaned-up texts (lsp_server/completion/decode.py) -----------------


def merged(key: Callable[[str], Hashable]) -> Stage[R]:
    """Drafts whose texts have the same ``key`` are one guess: the better-scored one stays
    (the earlier on a tie), where it was; the next distinct draft moves up into the slot."""

    def stage(drafts: list[R]) -> list[R]:
        best: dict[Hashable, int] = {}
        for i, draft in enumerate(drafts):
            k = key(draft.text)
            if draft.score > drafts[best.setdefault(k, i)].score:
                best[k] = i
        kept = set(best.values())
        return [d for i, d in enumerate(drafts) if i in kept]

    return stage


def new_keys_first(key: Callable[[str], Hashable]) -> Stage[R]:
    """The drafts whose ``key`` no better-ranked one has first, the others after, each group
    in its order (a block's first lines: the k slots first show k different first lines);
    the drafts moved back settle below the last one they passed."""

    def stage(drafts: list[R]) -> list[R]:
        seen: set[Hashable] = set()
        new: list[R] = []
        again: list[R] = []
        for draft in drafts:
            k = key(draft.text)
            (again if k in seen else new).append(draft)
            seen.add(k)
        return settle(new + again, range(len(new), len(drafts)))

    return stage


def kept(
    keep: Callable[[str], bool], shorter: Callable[[str], Iterable[str]] | None = None
) -> Stage[R]:
    """The drafts whose text ``keep`` accepts, in their order. One it refuses gives way to
    the first of its ``shorter`` texts that it accepts (a block cut to the lines before the
    one that breaks it), with its score and place; else it goes, and the next candidate
    moves up into its slot (a spare, or one of the memory's reserves)."""

    def stage(drafts: list[R]) -> list[R]:
        out: list[R] = []
        for draft in drafts:
            forms = chain([draft.text], shorter(draft.text) if shorter else ())
            text = next((t for t in forms if keep(t)), None)
            if text is not None:
                out.append(draft if text == draft.text else with_text(draft, text))
        return out

    return stage


def led(says: Callable[[str], bool]) -> Stage[R]:
    """The first draft whose text ``says`` holds for moved first, with the score of the one
    it passed (the best: ``settle``)."""

    def stage(drafts: list[R]) -> list[R]:
        i = next((i for i, d in enumerate(drafts) if says(d.text)), None)
        if not i:  # none, or first already
            return drafts
        return settle([drafts[i], *drafts[:i], *drafts[i + 1 :]], {0})

    return stage


def cut(k: int) -> Stage[T]:
    """The first k."""
    return lambda drafts: drafts[:k]


# --- the stages on the cleaned-up texts ------------------------------------------------------


def text_stages(
    k: int,
    same: Callable[[str], Hashable],
    *,
    block_key: Callable[[str], Hashable] | None = None,
    parses: Callable[[str], bool] | None = None,
    says: Callable[[str], bool] | None = None,
    shorter: Callable[[str], Iterable[str]] | None = None,
) -> list[Stage[R]]:
    """Stages 3-7 in order, on the drafts' cleaned-up texts: those that ``parses`` keeps (or
    the first of their ``shorter`` texts it keeps); ``merged(same)``; a block's new first
    lines first (``block_key``); the one that ``says`` what the memory goes on with first;
    the k shown. A stage whose key or predicate is None is off."""
    stages: list[Stage[R]] = []
    if parses is not None:
        stages.append(kept(parses, shorter))
    stages.append(merged(same))
    if block_key is not None:
        stages.append(new_keys_first(block_key))
    if says is not None:
        stages.append(led(says))
    stages.append(cut(k))
    return stages
