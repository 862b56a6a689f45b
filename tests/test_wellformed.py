"""Drafts that parse (lsp_server/completion/wellformed.py): malformed drafts are told, and
replaced."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from lsp_server.completion.cleanup import Suggestion
from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.decode import decode
from lsp_server.completion.wellformed import Cursor, malformed, parses, scan
from lsp_server.settings import DecodingSettings, parse_settings
from superposed import ranking
from superposed.api import Completion, Engine
from superposed.types import Draft

BODY = "def read(path):\n    data = None\n    "
AFTER = "\n    return data\n"


def why(draft: str, before: str = BODY, following: str = AFTER, language: str = "python") -> str:
    return malformed([draft], Cursor(before, following, language))[0]


@pytest.mark.parametrize(
    "draft, reason",
    [
        # the corrupt drafts, beside the right one
        ('with open(path, "r",") as f:', "quote"),
        ('with open(path, "r+ encoding="utf-8") as f:', "quote"),
        ('with open(path, "r", encoding="utf-8") as f:', ""),
        ("data = load(path))", "brackets"),
        ("data = [load(path)]]", "brackets"),
        ("data = (load(path)]", "brackets"),
        ("data: list[tuple[str, str, = None,", "syntax"),
        ("data = compute(path, retries=_frob_frob", "unfinished"),
        ("data = compute(path, load(x)", "unfinished"),
        ("return data", "repeats"),  # the line that already follows the cursor
        # a line may open a bracket that later lines close, or a block
        ("data = compute(", ""),
        ("data = [1, 2,", ""),
        ("if data is None:", ""),
        ("data = path // 2  # halved (roughly", ""),
    ],
)
def test_malformed_drafts_are_told_by_what_breaks(draft: str, reason: str) -> None:
    assert why(draft) == reason


@pytest.mark.parametrize(
    "line, draft, reason",
    [
        # issue 52: the cursor's line is already begun, so the window does not parse
        # without a draft; the line the draft makes is judged
        ("if ", "not:", "syntax"),
        ("if ", "data is None:", ""),
        ("for ", "reasons def Meet En", "syntax"),
        ("for ", "line in data:", ""),
        ("data = ", "load(path)", ""),
        ("data = ", "1 2", "syntax"),  # tree-sitter blames the next line without a draft
    ],
)
def test_a_begun_line_is_judged_as_the_draft_completes_it(
    line: str, draft: str, reason: str
) -> None:
    assert why(draft, BODY + line) == reason


def test_the_syntax_rule_stays_off_where_the_window_breaks_away_from_the_cursor() -> None:
    """An error on another line than the cursor's (the document edited elsewhere): drafts
    are not blamed for it, and only the text rules apply."""
    broken_above = "def read(path):\n    data = (]\n    x = 1\n    if "
    assert why("not:", broken_above) == ""


def test_a_draft_may_close_what_the_prefix_opened() -> None:
    assert why("b)", "x = foo(a, ", "\n") == ""
    assert why("b))", "x = foo(a, ", "\n") == "brackets"
    # the rest of the line closes it already: a draft that closes it again breaks the line
    assert why("b", "x = foo(a, ", ")\n") == ""
    assert why("b)", "x = foo(a, ", ")\n") == "brackets"
    # a line start that closes a call opened on the lines above
    head = "def f():\n    return foo(\n        a,\n"
    assert why(") + 1", head, "\n") == ""
    # the window may begin inside brackets: a closer there without its opener is passed over
    assert why(") + 1", "    b)\n" + head, "\n") == ""
    assert why(") + 1]", "    b)\n" + head, "\n") == "brackets"


def test_nothing_is_judged_inside_a_string_or_in_prose() -> None:
    doc = 'def f():\n    """Read the data (the '
    assert why("first part) of it]", doc, '\n    """\n') == ""
    assert why("see (below]", "Some notes ", "\n", "notes.md") == ""


def test_a_language_without_a_grammar_gets_the_bracket_rules() -> None:
    assert why("x = f(a))", "", "\n", "file.nosuchlang") == "brackets"
    assert why("x = f(a)", "", "\n", "file.nosuchlang") == ""


def test_the_scan_skips_strings_and_comments_by_language() -> None:
    assert scan('f("(", x)').open == ()
    assert scan("f(x  # )").open == ("(",)
    assert scan("a // b)", start=("(",)).open == ("(",)  # C-like: a comment
    from lsp_server.completion.wellformed import syntax_of

    assert scan("a // b)", syntax_of("python"), ("(",)).open == ()  # Python: division
    assert scan("fn f<'a>(x: &'a str)", syntax_of("rust")).broken is False


def test_well_formed_keeps_the_good_drafts_in_order() -> None:
    drafts = [Suggestion("data = load(path))", -1.0), Suggestion("data = load(path)", -2.0)]
    drafts.append(Suggestion("data = read(path)", -3.0))
    kept = ranking.kept(parses(Cursor(BODY, AFTER, "python")))(drafts)
    assert [s.text for s in kept] == ["data = load(path)", "data = read(path)"]


def test_a_malformed_draft_is_replaced_by_the_next_candidate(
    tiny_engine: Engine, monkeypatch: Any
) -> None:
    """Through decode: the engine's first draft does not parse, so the spare after the k
    shown takes its place."""
    texts = ["data = load(path))", "data = load(path)", "data = read(path)", "data = {}"]
    drafts = [Draft(t, [], -float(i), finished=True) for i, t in enumerate(texts)]
    monkeypatch.setattr(tiny_engine, "run", lambda *a, **kw: Completion(drafts, {"total": 1.0}))
    text = BODY + AFTER
    context = CursorContext.at(text, len(BODY), "python")
    settings = replace(DecodingSettings(), k=3, line_mode="single")
    answer = decode(tiny_engine, context, settings)
    assert [s.text for s in answer.suggestions] == texts[1:]
    assert "wellformed" in answer.timing_ms


def test_well_formed_off_shows_the_drafts_as_decoded(tiny_engine: Engine, monkeypatch: Any) -> None:
    """The setting wellFormed off (a dialect the rules misjudge): the first draft, which
    does not parse, is shown where it was decoded."""
    texts = ["data = load(path))", "data = load(path)", "data = read(path)", "data = {}"]
    drafts = [Draft(t, [], -float(i), finished=True) for i, t in enumerate(texts)]
    monkeypatch.setattr(tiny_engine, "run", lambda *a, **kw: Completion(drafts, {"total": 1.0}))
    context = CursorContext.at(BODY + AFTER, len(BODY), "python")
    settings, errors = parse_settings({"superposed": {"wellFormed": False}})
    assert errors == [] and settings.decoding.well_formed is False
    answer = decode(tiny_engine, context, replace(settings.decoding, k=3, line_mode="single"))
    assert [s.text for s in answer.suggestions] == texts[:3]


def test_the_tiny_test_models_drafts_are_not_judged(tiny_engine: Engine, monkeypatch: Any) -> None:
    """Under SUPERPOSED_TEST_TINY_MODEL=1 (the editors' tests: random weights, word salad
    that would all be dropped) the drafts are shown as decoded."""
    texts = ["data = load(path))", "data = load(path)", "data = read(path)", "data = {}"]
    drafts = [Draft(t, [], -float(i), finished=True) for i, t in enumerate(texts)]
    monkeypatch.setattr(tiny_engine, "run", lambda *a, **kw: Completion(drafts, {"total": 1.0}))
    monkeypatch.setenv("SUPERPOSED_TEST_TINY_MODEL", "1")
    context = CursorContext.at(BODY + AFTER, len(BODY), "python")
    answer = decode(tiny_engine, context, replace(DecodingSettings(), k=3, line_mode="single"))
    assert [s.text for s in answer.suggestions] == texts[:3]
