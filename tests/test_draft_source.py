"""Where each draft came from (model or memory) reaches the editors' drafts view: the
engine marks memory seeds, completion keeps the mark and adds the stores' share."""

from __future__ import annotations

from lsp_server.completion.cleanup import Suggestion, postprocess
from lsp_server.completion.cursor import CursorContext
from lsp_server.runtime.ahead import TypingCache
from superposed.api import Completion
from superposed.ranking import place
from superposed.types import Draft


def test_a_memory_seed_placed_among_the_drafts_says_memory() -> None:
    decoded = [Draft("x = 1", [1], -1.0), Draft("x = 2", [2], -2.0)]
    placed = place(decoded, Draft("x = compute()", [3], 0.0), rank=1, k=3)
    assert [(d.text, d.source) for d in placed] == [
        ("x = 1", "model"),
        ("x = compute()", "memory"),
        ("x = 2", "model"),
    ]


def test_suggestions_keep_the_source_through_postprocessing_and_typing_along() -> None:
    completion = Completion(
        drafts=[Draft("x = 1", [1], -1.0), Draft("x = compute()", [3], -1.5, source="memory")]
    )
    shown = postprocess(completion, after="")
    assert [s.source for s in shown] == ["model", "memory"]
    cache = TypingCache()
    cache.remember("doc", "", shown)
    assert cache.along("doc", CursorContext("x = c", "")) == [
        Suggestion("ompute()", -1.5, "memory")
    ]
