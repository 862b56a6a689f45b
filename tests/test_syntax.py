"""lineMode auto's decision at the cursor (lsp_server/completion/syntax.py): none, a line or a
block."""

from __future__ import annotations

import pytest

from lsp_server.completion.syntax import WINDOW_CHARS, decide, grammar_name

PY = [
    # after a block opener, at the end of its line or on the blank line after it
    ("def f(x):", "\n", "block"),
    ("def f(x):\n    ", "", "block"),
    ("class A:\n    def f(self):\n        ", "\n", "block"),
    ("    if x:", "\n    return y\n", "block"),
    # a blank line at the end of a block, or between two statements
    ("def f(x):\n    a = 1\n    ", "\n\ndef g():\n    pass\n", "block"),
    ("def f(x):\n    a = 1\n    ", "\n    return a\n", "block"),
    # inside an unfinished expression: open ( or [
    ("x = foo(a,\n        ", "\ny = 2\n", "line"),
    ("x = foo(a,\n        ", "", "line"),
    ("x = [1,\n  2,\n  ", "]\n", "line"),
    ("if (a and\n        ", "):\n    pass\n", "line"),
    # a ':' inside brackets opens nothing
    ("x = y[1:", "\n", "line"),
    # mid-line: text right of the cursor
    ("x = foo(", ")\n", "line"),
    ("x = ", " + 1\n", "line"),
    # the end of a line that opens no block
    ("x = 1", "\n", "line"),
    ("x = 1  # note", "\n", "line"),
    # inside a string or a comment: a line of prose
    ('def f(x):\n    """doc\n    ', '\n    """\n', "line"),
    ("# a comment that goes on", "\n", "line"),
    # splitting a word
    ("fo", "o = 1\n", "none"),
    ("x = self.val", "ue\n", "none"),
]


@pytest.mark.parametrize(("before", "following", "expected"), PY)
def test_python_decisions(before: str, following: str, expected: str) -> None:
    assert decide(before, following, "python") == expected


@pytest.mark.parametrize(
    ("before", "following", "language", "expected"),
    [
        ("function f() {", "\n", "javascript", "block"),
        ("function f() {\n  ", "\n}\n", "javascript", "block"),
        ("foo(function() {", "\n", "javascript", "block"),  # a callback's body
        ("const x = f(a,\n  ", "", "typescript", "line"),
        ("if (x) {\n  ", "\n}\n", "c", "block"),
        ("fn main() {\n    ", "\n}\n", "rust", "block"),
        ("let v = vec![1,\n    ", "", "rust", "line"),
        ("func f() {", "\n", "go", "block"),
    ],
)
def test_other_languages(before: str, following: str, language: str, expected: str) -> None:
    assert decide(before, following, language) == expected


@pytest.mark.parametrize(
    ("before", "expected"),
    [
        ("def f(x):", "block"),
        ("def f(x):\n    ", "block"),
        ("x = foo(a,\n    ", "line"),
        ("x = foo(a)\n", "block"),
        ("x = 1", "line"),
        ("s = 'a(", "line"),  # an open quote: inside a string
        ("x = 1  # (", "line"),
        ("y = f(1)  # (\n", "block"),  # the bracket in a comment does not count
    ],
)
def test_without_a_grammar_the_text_decides(before: str, expected: str) -> None:
    assert decide(before, "", "") == expected
    assert decide(before, "", "no-such-language") == expected


def test_language_ids_file_names_and_uris_name_grammars() -> None:
    assert grammar_name("python") == "python"
    assert grammar_name("typescriptreact") == "tsx"
    assert grammar_name("shellscript") == "bash"
    assert grammar_name("file:///home/u/src/main.rs") == "rust"
    assert grammar_name("notes/x.py") == "python"
    assert grammar_name("") is None
    assert grammar_name("file:///x/unknown.zzz") is None


def test_a_huge_file_is_parsed_from_a_window_at_a_top_level_line() -> None:
    """Only the last WINDOW_CHARS before the cursor are parsed, starting at a line at column
    0: an open bracket far above (outside the window) does not count, one inside does."""
    filler = "def g():\n    return 1\n\n" * (2 * WINDOW_CHARS // 20)
    assert decide("x = f(\n" + filler + "def f(x):\n    ", "", "python") == "block"
    assert decide(filler + "x = f(a,\n    ", "", "python") == "line"


@pytest.mark.parametrize("language", ["python", "javascript", "", "file:///x/y.rs", "zzz"])
def test_odd_text_gets_a_decision_not_an_error(language: str) -> None:
    assert decide("", "", language) == "block"  # an empty file: anything may come
    assert decide("x = '\ud800", "", language) in ("line", "block")  # a lone surrogate
    assert decide("def f():\r\n    ", "\r\n", language) == "block"  # CRLF line ends
    assert decide("\x00\x01(", "", language) == "line"


def test_the_window_never_starts_inside_a_docstring() -> None:
    """A docstring's lines at column 0 are no place to start a parse: from there its closing
    quotes would open a string over the cursor (the replay's flask files)."""
    doc = "text at column zero\n" * (WINDOW_CHARS // 20 + 100)
    before = 'def h():\n    """Doc.\n' + doc + '    """\n    x = 1\n    '
    assert len(before) > WINDOW_CHARS
    assert decide(before, '\n\n\ndef k():\n    """Other."""\n', "python") == "block"
