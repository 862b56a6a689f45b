"""The ranking stages (superposed/ranking.py): their order, the cut, the seeds, the merge,
and scores that stay best first."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lsp_server.completion.cleanup import Suggestion
from ngram_db.suffix import SuffixIndex
from superposed import memory as mem
from superposed import ranking
from superposed.hypotheses import Finisher
from superposed.ngram import Match
from superposed.types import DecodeConfig, Draft, StopCondition
from superposed.vocab import Vocab


def decoded(*texts: str) -> list[Draft]:
    """Drafts best first, scores -1, -2, ..."""
    return [Draft(t, [i], -float(i + 1)) for i, t in enumerate(texts)]


def cut(items: list[str]) -> list[str]:
    return items[:1]


def doubled(items: list[str]) -> list[str]:
    return items + items


def test_the_stages_apply_in_their_order() -> None:
    assert ranking.apply(["a", "b"], [cut, doubled]) == ["a", "a"]
    assert ranking.apply(["a", "b"], [doubled, cut]) == ["a"]


def test_distinct_merges_identical_texts_and_cuts_to_k() -> None:
    drafts = [Draft("b", [2], -2.0), Draft("a", [1], -1.0), Draft("b", [3], -0.5)]
    drafts += [Draft("c", [4], -3.0)]
    best = ranking.distinct(2)(drafts)
    assert [(d.text, d.score) for d in best] == [("b", -0.5), ("a", -1.0)]


def test_seeds_come_after_the_cut() -> None:
    """A seed that says what a decoded draft beyond the k says still gets its slot: the cut
    runs first, then the seed is placed at memory_seed_rank."""
    cfg = DecodeConfig(k=3, memory_seed_rank=2)
    seed = Draft("d", [9], 0.0)
    out = ranking.apply(decoded("a", "b", "c", "d"), ranking.engine_stages([seed], cfg))
    assert [(d.text, d.source) for d in out] == [("a", "model"), ("b", "model"), ("d", "memory")]


def test_scores_stay_best_first_after_the_seeds() -> None:
    cfg = DecodeConfig(k=4, memory_seed_rank=3)
    seeds = [Draft("s1", [8], 5.0), Draft("s2", [9], -9.0)]
    out = ranking.apply(decoded("a", "b", "c", "d", "e"), ranking.engine_stages(seeds, cfg))
    assert [d.text for d in out] == ["a", "b", "s1", "s2"]
    scores = [d.score for d in out]
    assert scores == sorted(scores, reverse=True)


def test_place_puts_the_seed_at_its_rank_unless_already_there() -> None:
    drafts = [Draft("a", [1], -1.0), Draft("b", [2], -2.0), Draft("c", [3], -3.0)]
    placed = ranking.place(drafts, Draft("s", [9], -1.5), rank=1, k=3)
    assert [d.text for d in placed] == ["a", "s", "b"]
    assert placed[1].score == -1.5  # its own evidence: it fits between "a" and "b"
    assert ranking.place(drafts, Draft("b", [2, 2], 0.0), rank=0, k=3) == drafts
    assert [d.text for d in ranking.place([], Draft("s", [9], 0.0), rank=2, k=3)] == ["s"]


def test_a_seed_keeps_its_own_score_where_it_fits_and_settles_to_its_place_where_not() -> None:
    """The rank is the memory's decision; the score is the seed's evidence, bounded by its
    neighbours: above the draft before it it ties that one, below the one it displaces it
    ties that one, with none (not finite) it takes the displaced one's."""
    drafts = [Draft("a", [1], -1.0), Draft("b", [2], -2.0), Draft("c", [3], -3.0)]
    for own, expected in [(-1.7, -1.7), (0.5, -1.0), (-9.0, -2.0), (-math.inf, -2.0)]:
        placed = ranking.place(drafts, Draft("s", [9], own), rank=1, k=4)
        assert [(d.text, d.score) for d in placed] == [
            ("a", -1.0),
            ("s", expected),
            ("b", -2.0),
            ("c", -3.0),
        ]
    last = ranking.place(drafts, Draft("s", [9], -7.0), rank=5, k=4)  # after all: its own
    assert [(d.text, d.score) for d in last][-1] == ("s", -7.0)


def test_merged_keeps_the_better_scored_of_a_key_in_its_place() -> None:
    same = ranking.merged(lambda text: text.rstrip(":"))
    drafts = [Suggestion("if x:", -1.0), Suggestion("y = 1", -2.0), Suggestion("if x", -3.0)]
    assert [s.text for s in same(drafts)] == ["if x:", "y = 1"]
    worse_first = [Suggestion("if x", -3.0), Suggestion("y = 1", -4.0), Suggestion("if x:", -1.0)]
    assert [s.text for s in same(worse_first)] == ["y = 1", "if x:"]
    tie = [Suggestion("if x", -1.0), Suggestion("if x:", -1.0)]
    assert same(tie) == tie[:1]  # the earlier on a tie


def test_the_reordering_stages_keep_the_scores_best_first() -> None:
    """Each stage that moves a draft settles its score to its new place."""
    drafts = [Suggestion(t, -float(i)) for i, t in enumerate(["a\nx", "a\ny", "b", "c"])]
    stages = [
        ranking.new_keys_first(lambda text: text.split("\n")[0]),  # "a\ny" goes back
        ranking.led(lambda text: text == "c"),  # "c" goes first
    ]
    for stage in stages:
        out = stage(drafts)
        assert out != drafts
        scores = [s.score for s in out]
        assert scores == sorted(scores, reverse=True), out
    assert [s.text for s in stages[0](drafts)] == ["a\nx", "b", "c", "a\ny"]
    assert [(s.text, s.score) for s in stages[1](drafts)][:2] == [("c", 0.0), ("a\nx", 0.0)]


def test_text_stages_run_in_order_and_a_stage_without_its_predicate_is_off() -> None:
    """The parse filter runs before the memory's lead, so the lead cannot bring back a draft
    that does not parse; the merge runs first and the cut last."""
    drafts = [Suggestion(t, -float(i)) for i, t in enumerate(["x = 1", "x = 1 ", "y(", "y()"])]
    same = str.strip

    def texts(**on: object) -> list[str]:
        stages = ranking.text_stages(2, same, **on)  # type: ignore[arg-type]
        return [s.text for s in ranking.apply(drafts, stages)]

    assert texts() == ["x = 1", "y("]  # merged, then cut to 2
    assert texts(says=lambda text: text.startswith("y")) == ["y(", "x = 1"]
    parses = lambda text: not text.endswith("(")  # noqa: E731
    assert texts(parses=parses, says=lambda text: text == "y(") == ["x = 1", "y()"]
    assert texts(parses=parses, says=lambda text: text.startswith("y")) == ["y()", "x = 1"]


@given(
    scores=st.lists(st.floats(-50, 0), min_size=1, max_size=8),
    moved=st.sets(st.integers(0, 7)),
    own=st.lists(st.floats(-60, 10) | st.just(-math.inf), min_size=8, max_size=8),
)
def test_settle_keeps_any_best_first_list_best_first(
    scores: list[float], moved: set[int], own: list[float]
) -> None:
    """Items best first, some replaced by moved ones with any score: settled, all are best
    first again, and a moved one whose own score fits its place keeps it."""
    items = [Suggestion(str(i), s) for i, s in enumerate(sorted(scores, reverse=True))]
    moved = {i for i in moved if i < len(items)}
    items = [Suggestion(f"m{i}", own[i]) if i in moved else it for i, it in enumerate(items)]
    out = ranking.settle(items, moved)
    got = [s.score for s in out]
    assert got == sorted(got, reverse=True)
    assert [s.text for s in out] == [s.text for s in items]
    for i in moved:
        before = out[i - 1].score if i else math.inf
        after = [items[j].score for j in range(i + 1, len(items)) if j not in moved]
        if math.isfinite(own[i]) and (not after or after[0] <= own[i]) and own[i] <= before:
            assert out[i].score == own[i]


def test_a_seeds_own_score_is_the_memorys_log_probability_of_its_copy() -> None:
    """lambda at each copied token's match length (8, then 9), times the occurrences' share
    of the first token: 3 of 4 follow with token 5, 1 of 4 with token 6."""
    cfg = DecodeConfig()  # memory_max 0.9, memory_half 8
    match = Match(8, {5: 3, 6: 1}, [5, 7], others=[[6, 7]])
    lams = math.log(0.9 * 8 / 16) + math.log(0.9 * 9 / 17)
    assert mem.copy_score(match, [5, 7], 2, cfg) == pytest.approx(math.log(0.75) + lams)
    assert mem.copy_score(match, [6, 7], 2, cfg) == pytest.approx(math.log(0.25) + lams)
    longer = Match(20, {5: 3, 6: 1}, [5, 7])
    assert mem.copy_score(longer, [5, 7], 2, cfg) > mem.copy_score(match, [5, 7], 2, cfg)
    assert mem.copy_score(Match(8, {5: 1}, [5], weight=0.0), [5], 1, cfg) == -math.inf


def test_the_memorys_seeds_carry_their_own_scores(vocab: Vocab, tokenizer: Any) -> None:
    """Not the 0.0 a copy's hypothesis adds up: each seed's copy_score, so of two copies as
    long the one more occurrences go on with scores higher."""
    prompt = "def frob(widget):\n    return"
    lines = [" widget.reticulate(7)", " gadget.reticulate(7)", " widget.reticulate(7)"]
    memory = SuffixIndex([tokenizer.encode(prompt + line + "\n") for line in lines])
    match = memory.match(tokenizer.encode(prompt), follow=64, others=4)
    assert match is not None
    cfg = DecodeConfig(memory_seeds=2)
    finisher = Finisher(vocab, b"", StopCondition(single_line=True))
    seeded = mem.seeds(match, cfg, vocab, finisher)
    assert [d.text for d in seeded] == lines[:2]
    assert len(seeded[0].token_ids) == len(seeded[1].token_ids)
    for draft, continuation in zip(seeded, [match.continuation, *match.others], strict=False):
        own = mem.copy_score(match, continuation, len(draft.token_ids), cfg)
        assert draft.score == own and math.isfinite(own)
    assert seeded[0].score - seeded[1].score == pytest.approx(math.log(2))  # 2 of 3, 1 of 3
