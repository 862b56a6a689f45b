"""Ranking drafts: an ordered list of stages, applied once, after the decoding loop.

The engine's in-loop decisions (``select``, ``diversity.Slots``) choose what is decoded; the
stages here order what was decoded, best first. The engine's stages (``engine_stages``):

1. ``distinct``: identical texts merged (the best-scored kept), best first by score, cut to
   k (k counts the spares the caller asked for, lsp_server/completion.SPARE_DRAFTS);
2. ``seeds``: drafts copied from the memory placed at ``memory_seed_rank`` (the last of the
   k shown), unless a decoded draft already says the same.

A caller adds its own stages after these (lsp_server/completion.py: drafts that parse,
evidence leads, another first word), in the same shape: a ``Stage`` takes the drafts best
first and returns them best first. A new source of drafts or of evidence is one more stage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from superposed.hypotheses import best_drafts
from superposed.types import DecodeConfig, Draft

T = TypeVar("T")
Stage = Callable[[list[T]], list[T]]  # drafts best first -> drafts best first


def apply(drafts: list[T], stages: Sequence[Stage[T]]) -> list[T]:
    """The drafts after each stage in turn."""
    for stage in stages:
        drafts = stage(drafts)
    return drafts


def distinct(k: int) -> Stage[Draft]:
    """Identical texts merged, the k best by score first (``best_drafts``)."""
    return lambda drafts: best_drafts(drafts, k)


def seeds(seeded: list[Draft], rank: int, k: int) -> Stage[Draft]:
    """The memory's seeded drafts placed, the last at ``rank`` (``place_all``)."""
    return lambda drafts: place_all(drafts, seeded, rank, k)


def engine_stages(seeded: list[Draft], cfg: DecodeConfig) -> list[Stage[Draft]]:
    """The engine's stages, in order: distinct drafts cut to k, then the memory's seeds."""
    return [distinct(cfg.k), seeds(seeded, cfg.memory_seed_rank, cfg.k)]


def place_all(drafts: list[Draft], seeded: list[Draft], rank: int, k: int) -> list[Draft]:
    """The seeds placed in order, the last at ``rank`` (the first ones before it)."""
    for i, draft in enumerate(seeded):
        drafts = place(drafts, draft, max(0, rank - (len(seeded) - 1) + i), k)
    return drafts


def place(drafts: list[Draft], seeded: Draft | None, rank: int, k: int) -> list[Draft]:
    """``seeded`` at ``rank`` among the best-first ``drafts`` (at most k), unless one of them
    already says the same; it takes the score of the draft it displaces (or of the last one,
    placed after all), so the scores stay best first: the seed ties the draft after it."""
    if seeded is None or any(d.text == seeded.text for d in drafts):
        return drafts
    at = min(rank, len(drafts))
    score = drafts[at].score if at < len(drafts) else (drafts[-1].score if drafts else 0.0)
    placed = Draft(seeded.text, seeded.token_ids, score, seeded.finished, source="memory")
    return [*drafts[:at], placed, *drafts[at:]][:k]
