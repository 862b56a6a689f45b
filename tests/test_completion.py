"""Completion logic without a model: cursor context, post-processing, typing along."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from types import SimpleNamespace

import pytest

from lsp_server.completion.cleanup import (
    Suggestion,
    first_line,
    first_line_key,
    near_key,
    postprocess,
    whole_lines,
)
from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.decode import (
    BLOCK_FOLLOW_PER_LINE,
    BLOCK_MAX_TOKENS,
    block_budget,
    block_stop,
    decode,
    line_kind,
    shown_fixed,
)
from lsp_server.completion.layout import Layout
from lsp_server.completion.prompt_plan import prompt_text
from lsp_server.runtime.ahead import TypingCache
from lsp_server.settings import DecodingSettings
from superposed import ranking
from superposed.api import Completion
from superposed.types import Draft, StopCondition


def drafts(*texts: str) -> Completion:
    return Completion(drafts=[Draft(t, [], -float(i)) for i, t in enumerate(texts)])


def merged(suggestions: list[Suggestion], key: Callable[[str], Hashable] = str) -> list[Suggestion]:
    """The suggestions through the ranking's merge stage (lsp_server/completion.rank_stages')."""
    return ranking.merged(key)(suggestions)


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
    assert [s.text for s in result] == ["path.join(a)", "path.join(a)", "path.exists(b)"]
    assert merged(result) == [Suggestion("path.join(a)", 0.0), Suggestion("path.exists(b)", -4.0)]


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
    shown = [s.text for s in merged(postprocess(completion, after=""), near_key)]
    assert shown == [
        "def redirect(self, location: str) -> Response:",
        "if not is_syntax:  # do not display the trace",
        "def redirect(self, path):",
        "x = '# not a comment'",
        "# a comment",
        "# another comment",
    ]
    assert len(merged(postprocess(completion, after=""))) == 9  # off: the drafts as decoded
    assert near_key("f(a, b),  # why") == near_key("f(a, b)") == "f(a, b)"
    assert near_key("x = '#'  ") == "x = '#'"  # a '#' inside a string is code
    assert near_key("items[0];") != near_key("items[0])")  # brackets are not punctuation
    # a comment line is not cut at its second '#', nor code at a '#' that no space precedes
    assert near_key("#class # #") != near_key("#class # # This")
    assert near_key("def# # # Foobar") != near_key("def# # # Foo.A")


def test_postprocess_multi_line_keeps_lines() -> None:
    result = merged(postprocess(drafts("a\nb\n", "a\nb"), after="", line_mode="multi"))
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


# --- blocks (issue 23) ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stop", "text", "kept"),
    [
        # the indentation returns below the block's: the next sibling is not drafted
        (
            StopCondition(floor=4),
            "value = 1\n    return value\ndef g():",
            "value = 1\n    return value",
        ),
        (StopCondition(floor=5), "\n        x = 1\n\n    else:", "\n        x = 1\n"),
        # a line of closing brackets at the opener's level ends the block after it
        (StopCondition(floor=1), "\n  x();\n}\nfoo", "\n  x();\n}"),
        # the draft would type the text after the cursor again
        (StopCondition(repeat="return value"), "value = 1\nreturn value\nmore", "value = 1"),
        (StopCondition(repeat="return value"), "return value\n", ""),
        # two blank lines
        (StopCondition(blank_lines=2), "a = 1\n\n\nb = 2", "a = 1"),
        (StopCondition(blank_lines=2), "a = 1\n\nb = 2\n", None),  # one is fine
        # maxLines lines with content
        (StopCondition(max_lines=2), "a\n\nb\nc", "a\n\nb"),
        (StopCondition(max_lines=2), "\n    a\n    b\n", "\n    a\n    b"),
        # undecided until the line is whole, or its indentation is seen
        (StopCondition(repeat="return value"), "x = 1\nreturn val", None),
        (StopCondition(floor=4), "x = 1\n    ", None),
    ],
)
def test_block_end_rules(stop: StopCondition, text: str, kept: str | None) -> None:
    assert stop.block and not stop.single_line
    assert stop.cut(text) == kept


def test_a_line_is_whole_at_the_drafts_end() -> None:
    stop = StopCondition(repeat="return value", max_lines=8)
    assert stop.cut("x = 1\nreturn value") is None  # it may go on: "return values"
    assert stop.block_end("x = 1\nreturn value", final=True) == len("x = 1")


def test_block_drafts_end_at_whole_lines_and_show_distinct_first_lines_first() -> None:
    """A draft the budget stopped goes back to its last whole line; one that ended is checked
    against the block's rules again; a draft whose first line an earlier one shows goes after
    those with a new first line."""
    completion = Completion(
        drafts=[
            Draft("a = 1\nb = 2\nc = fo", [], 0.0, finished=False),
            Draft("a = 1\nb = 3", [], -1.0, finished=True),
            Draft("z = 9\nreturn x", [], -2.0, finished=True),
            Draft("half a li", [], -3.0, finished=False),
        ]
    )
    stop = StopCondition(repeat="return x", max_lines=8)
    cleaned = postprocess(completion, after="", line_mode="multi", stop=stop)
    result = ranking.new_keys_first(first_line_key)(merged(cleaned))
    assert [s.text for s in result] == ["a = 1\nb = 2", "z = 9", "half a li", "a = 1\nb = 3"]
    scores = [s.score for s in result]
    assert scores == [0.0, -2.0, -3.0, -3.0]  # the draft moved back ties the one it followed
    single = [s.text for s in merged(postprocess(completion, after="", line_mode="single"))]
    assert single == ["a = 1", "z = 9", "half a li"]
    assert whole_lines("\n    a = 1\n    b") == "\n    a = 1"
    assert whole_lines("\n    a = 1") == "\n    a = 1"  # nothing shorter to show


def test_block_stop_reads_the_cursor_and_the_text_after_it() -> None:
    settings = DecodingSettings(max_lines=5)
    opener = CursorContext.at("def f():\n    if x:\n    return 1\n", len("def f():\n    if x:"))
    stop = block_stop(opener, settings)
    assert (stop.floor, stop.repeat, stop.max_lines) == (5, "return 1", 5)
    assert not stop.continue_line
    text = "def f():\n    a = 1\n    \n\n    return a\n"
    blank = CursorContext.at(text, text.index("    \n") + 4)
    stop = block_stop(blank, settings)
    assert (stop.floor, stop.repeat) == (4, "return a")
    assert stop.continue_line and stop.indented
    assert block_stop(CursorContext.at("x = 1\n", 6), settings).repeat == ""


def test_line_mode_chooses_line_block_or_the_syntax() -> None:
    at_opener = CursorContext.at("def f():", 8, language="python")
    mid_call = CursorContext.at("x = f(a,\n    ", 13, language="python")
    assert line_kind(at_opener, DecodingSettings(line_mode="single")) == "line"
    assert line_kind(mid_call, DecodingSettings(line_mode="multi")) == "block"
    assert line_kind(at_opener, DecodingSettings(line_mode="auto")) == "block"
    assert line_kind(mid_call, DecodingSettings(line_mode="auto")) == "line"
    assert DecodingSettings().line_mode == "auto"


class _Recorder:
    """An Engine stand-in for decode: records what it was asked, answers with ``texts``."""

    def __init__(self, tokenizer: object, texts: list[str]) -> None:
        self.tokenizer, self.max_context, self.fim_tokens, self.name = tokenizer, 2048, None, "t"
        self.texts, self.calls = texts, []  # type: ignore[var-annotated]

    def prompt(self, text: str, max_new_tokens: int, **kwargs: object) -> SimpleNamespace:
        self.prompts = getattr(self, "prompts", 0) + 1
        return SimpleNamespace(text=text, ids=[], max_new_tokens=max_new_tokens)

    def complete(self, prompt: SimpleNamespace, **kwargs: object) -> Completion:
        self.calls.append({"prompt": prompt, **kwargs})
        return Completion(drafts=[Draft(t, [], -float(i), True) for i, t in enumerate(self.texts)])


def test_decode_drafts_a_block_with_a_block_budget(tokenizer_engine: SimpleNamespace) -> None:
    text = "def get(self):\n    return 1\n\n\nasync def aget(self):\n    \n\n\ndef h():\n"
    at = text.index("aget(self):\n") + len("aget(self):\n    ")
    engine = _Recorder(
        tokenizer_engine.tokenizer, ["return 1\n\n\ndef h():", "x = 2\n    y = 3\nz = 1"]
    )
    settings = DecodingSettings(first_prompt_tokens=0, max_new_tokens=24, max_lines=8)
    context = CursorContext.at(text, at, language="python")
    answer = decode(engine, context, settings)  # type: ignore[arg-type]
    cfg, stop = engine.calls[0]["cfg"], engine.calls[0]["stop"]
    assert cfg.max_new_tokens == block_budget(settings) == BLOCK_MAX_TOKENS  # type: ignore[attr-defined]
    assert block_budget(DecodingSettings(max_new_tokens=10, max_lines=3)) == 30
    assert block_budget(DecodingSettings(max_new_tokens=24, max_lines=1)) == 24
    assert cfg.settle_k == settings.k and cfg.k > settings.k  # type: ignore[attr-defined]
    assert cfg.memory_follow >= BLOCK_FOLLOW_PER_LINE * settings.max_lines  # type: ignore[attr-defined]
    assert stop.block and stop.repeat == "def h():"  # type: ignore[attr-defined]
    assert [s.text for s in answer.suggestions] == ["return 1", "x = 2\n    y = 3"]
    single = DecodingSettings(first_prompt_tokens=0, line_mode="single")
    decode(engine, context, single)  # type: ignore[arg-type]
    assert engine.calls[1]["stop"].single_line  # type: ignore[attr-defined]
    assert engine.calls[1]["cfg"].max_new_tokens == 24  # type: ignore[attr-defined]
    assert engine.calls[1]["cfg"].settle_k is None  # type: ignore[attr-defined]


def test_a_request_builds_its_prompt_once_for_the_engine(
    tokenizer_engine: SimpleNamespace,
) -> None:
    """completion builds the prompt (leaving room for the request's own budget) and the
    engine decodes from that very prompt; the text is tokenized once, not once per step."""
    engine = _Recorder(tokenizer_engine.tokenizer, ["bar"])
    settings = DecodingSettings(first_prompt_tokens=0, line_mode="multi", max_new_tokens=24)
    answer = decode(engine, CursorContext.at("def f():\n    ", 13), settings)  # type: ignore[arg-type]
    assert engine.prompts == 1  # type: ignore[attr-defined]
    prompt = engine.calls[0]["prompt"]
    assert prompt.text.endswith("def f():\n    ")  # type: ignore[attr-defined]
    assert prompt.max_new_tokens == block_budget(settings)  # type: ignore[attr-defined]
    assert {"prompt", "total"} <= set(answer.timing_ms)  # completion times the prompt now


def test_an_automatic_request_where_nothing_belongs_gets_nothing(
    tokenizer_engine: SimpleNamespace,
) -> None:
    engine = _Recorder(tokenizer_engine.tokenizer, ["bar"])
    settings = DecodingSettings(first_prompt_tokens=0)
    text = "x = self.val\n"
    asked = CursorContext.at(text, 10, language="python")  # self.va|l: splits a word
    automatic = CursorContext.at(text, 10, language="python", automatic=True)
    assert decode(engine, automatic, settings).suggestions == []  # type: ignore[arg-type]
    assert not engine.calls  # the model was not asked
    assert decode(engine, asked, settings).suggestions  # type: ignore[arg-type]
    assert engine.calls[0]["stop"].single_line  # type: ignore[attr-defined]


def test_a_block_floor_is_deeper_only_after_an_opener() -> None:
    settings = DecodingSettings(line_mode="multi")
    after_statement = block_stop(CursorContext.at("    x = 1", 9), settings)
    assert after_statement.floor == 4 and after_statement.body == ""  # a sibling may follow
    opener = block_stop(CursorContext.at("    if x:  # why", 16), settings)
    assert opener.floor == 5 and opener.body == "        "
    two = "function f() {\n  if (x) {"
    assert block_stop(CursorContext.at(two, len(two)), settings).body == "    "
    tabs = "def f():\n\tif x:"
    assert block_stop(CursorContext.at(tabs, len(tabs)), settings).body == "\t\t"
    assert Layout.of("a\n    b\n        c\n").unit == "    " and Layout.of("x = 1\n").unit == "    "


def test_shown_fixed_waits_for_a_draft_that_says_what_the_memory_goes_on_with() -> None:
    """A line request's drafts fix what it shows once k of them are shown (issue 54 item 1),
    but where the memory leads (``evidence``) and none says what it goes on with: a later,
    lower-scored draft that does would be moved first."""

    def ranked(ds: list[Draft]) -> list[Suggestion]:
        return [Suggestion(d.text, d.score) for d in ds][:2]

    two = [Draft("x = 1", [], -1.0, True), Draft("y = 2", [], -2.0, True)]
    assert not shown_fixed(ranked, 2, lambda: None)(two[:1])
    assert shown_fixed(ranked, 2, lambda: None)(two)
    assert not shown_fixed(ranked, 2, lambda: "z = 3")(two)
    assert shown_fixed(ranked, 2, lambda: "x = 1")(two)
