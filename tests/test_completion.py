"""Completion logic without a model: cursor context, post-processing, typing along."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lsp_server.completion import (
    CursorContext,
    Suggestion,
    TypingCache,
    first_line,
    near_key,
    postprocess,
    prompt_text,
)
from lsp_server.engine.api import Completion
from lsp_server.engine.types import Draft


def drafts(*texts: str) -> Completion:
    return Completion(drafts=[Draft(t, [], -float(i)) for i, t in enumerate(texts)])


def test_cursor_context_splits_at_the_cursor() -> None:
    text = "a = 1\nprint(x)\nb = 2"
    ctx = CursorContext.at(text, text.index("x"))
    assert ctx.before == "a = 1\nprint(" and ctx.after == "x)"
    end = CursorContext.at(text, len(text))
    assert end.before == text and end.after == ""


def test_first_line_keeps_leading_newlines() -> None:
    assert first_line("foo(1)\nbar") == "foo(1)"
    assert first_line("\n    return x\n    y") == "\n    return x"
    assert first_line("  \n\n  z\nw") == "  \n\n  z"
    assert first_line("no newline") == "no newline"


def test_postprocess_cuts_drops_and_merges_in_order() -> None:
    result = postprocess(
        drafts("path.join(a)\nmore", "   ", "path.join(a)", "", "path.exists(b)", ")"),
        after=")",
    )
    assert result == [Suggestion("path.join(a)", 0.0), Suggestion("path.exists(b)", -4.0)]


def test_near_duplicates_merge_and_the_next_distinct_draft_takes_the_slot() -> None:
    """Drafts that differ only in a trailing comment, whitespace or punctuation are one guess:
    the better-ranked stays, and the spare after the k shown moves up (issue 22)."""
    completion = drafts(
        "def redirect(self, location: str) -> Response:",
        "def redirect(self, location: str) -> Response",
        "if not is_syntax:  # do not display the trace",
        "if not is_syntax:",
        "def redirect(self, path):",
        "x = '# not a comment'",
        "x = '# not a comment',",
        "# a comment",
        "# another comment",
    )
    merged = [s.text for s in postprocess(completion, after="", merge_near=True)]
    assert merged == [
        "def redirect(self, location: str) -> Response:",
        "if not is_syntax:  # do not display the trace",
        "def redirect(self, path):",
        "x = '# not a comment'",
        "# a comment",
        "# another comment",
    ]
    assert len(postprocess(completion, after="")) == 9  # off: the drafts as decoded
    assert near_key("f(a, b),  # why") == near_key("f(a, b)") == "f(a, b)"
    assert near_key("x = '#'  ") == "x = '#'"  # a '#' inside a string is code
    assert near_key("items[0];") != near_key("items[0])")  # brackets are not punctuation
    # a comment line is not cut at its second '#', nor code at a '#' that no space precedes
    assert near_key("#class # #") != near_key("#class # # This")
    assert near_key("def# # # Foobar") != near_key("def# # # Foo.A")


def test_postprocess_multi_line_keeps_lines() -> None:
    result = postprocess(drafts("a\nb\n", "a\nb"), after="", line_mode="multi")
    assert [s.text for s in result] == ["a\nb"]


def test_draft_that_repeats_the_rest_of_the_line_is_dropped() -> None:
    result = postprocess(drafts("value)", "value, 2)", "value"), after="value)  ")
    assert [s.text for s in result] == ["value, 2)"]


def test_typing_along_serves_the_rest_of_matching_drafts() -> None:
    cache = TypingCache()
    shown = [Suggestion("path.join(a)", 0.0), Suggestion("path.exists(b)", -1.0)]
    cache.remember("u", "os.", shown)
    assert cache.along("u", CursorContext("os.", "")) == shown  # same place: same drafts
    assert cache.along("u", CursorContext("os.path.j", "")) == [Suggestion("oin(a)", 0.0)]
    # The cache follows the user: the next character continues from there.
    assert cache.along("u", CursorContext("os.path.jo", "")) == [Suggestion("in(a)", 0.0)]
    assert cache.along("u", CursorContext("os.path.jx", "")) is None  # diverged
    assert cache.along("other", CursorContext("os.path.jo", "")) is None
    cache.forget("u")
    assert cache.along("u", CursorContext("os.path.jo", "")) is None


def test_typing_to_the_end_of_a_draft_is_not_an_answer() -> None:
    cache = TypingCache()
    cache.remember("u", "x = ", [Suggestion("1", 0.0)])
    assert cache.along("u", CursorContext("x = 1", "")) is None


@pytest.fixture(scope="module")
def tokenizer_engine() -> SimpleNamespace:
    """Just what prompt_text needs from an Engine: the real tokenizer and a context size."""
    from transformers import AutoTokenizer

    from lsp_server.engine.model import default_model_dir

    return SimpleNamespace(
        tokenizer=AutoTokenizer.from_pretrained(default_model_dir()), max_context=2048
    )


def test_prompt_window_fits_and_starts_at_a_line(tokenizer_engine: SimpleNamespace) -> None:
    short = "import os\nos."
    assert prompt_text(tokenizer_engine, short, 100) == short  # type: ignore[arg-type]
    long = "".join(f"value_{i} = compute(value_{i - 1}, {i})\n" for i in range(2000)) + "x = "
    window = prompt_text(tokenizer_engine, long, 300)  # type: ignore[arg-type]
    assert long.endswith(window) and window.startswith("value_")
    assert long[len(long) - len(window) - 1] == "\n"
    assert 100 <= len(tokenizer_engine.tokenizer.encode(window)) <= 300  # a grid step + a line


def test_prompt_window_start_is_stable_while_typing(tokenizer_engine: SimpleNamespace) -> None:
    long = "".join(f"value_{i} = compute(value_{i - 1}, {i})\n" for i in range(2000))
    starts = set()
    for typed in ["", "x", "x = ", "x = compute(", "x = compute(value_1999, 2000)\n"]:
        before = long + typed
        window = prompt_text(tokenizer_engine, before, 300)  # type: ignore[arg-type]
        starts.add(len(before) - len(window))
    assert len(starts) == 1  # one start: the engine reuses the cached prompt


def test_prompt_window_cleans_surrogates(tokenizer_engine: SimpleNamespace) -> None:
    text = "s = 'bad \udcff byte'\n" * 300
    window = prompt_text(tokenizer_engine, text, 100)  # type: ignore[arg-type]
    assert "\udcff" not in window and "\ufffd" in window
