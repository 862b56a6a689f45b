"""The engine's ranking stages (superposed/ranking.py): their order, the cut, the seeds."""

from __future__ import annotations

from superposed import ranking
from superposed.types import DecodeConfig, Draft


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
    placed = ranking.place(drafts, Draft("s", [9], 0.0), rank=1, k=3)
    assert [d.text for d in placed] == ["a", "s", "b"]
    assert placed[1].score == -2.0  # the displaced draft's score: the order stays by score
    assert ranking.place(drafts, Draft("b", [2, 2], 0.0), rank=0, k=3) == drafts
    assert [d.text for d in ranking.place([], Draft("s", [9], 0.0), rank=2, k=3)] == ["s"]
