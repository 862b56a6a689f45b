"""Drafts in their document's line ending and indentation (issue 34 item 5)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.decode import decode
from lsp_server.completion.layout import Layout
from lsp_server.settings import DecodingSettings
from tests.test_completion import _Recorder

TABS = "def parse(path):\n\twith open(path) as handle:\n\t\tfor line in handle:\n\t\t\t"
SPACES = "def parse(path):\n    with open(path) as handle:\n        for line in handle:\n"


def test_a_document_s_line_ending_and_indentation_unit() -> None:
    assert Layout.of(TABS, "", "python") == Layout("\n", "\t")
    assert Layout.of(SPACES.replace("\n", "\r\n"), "", "python") == Layout("\r\n", "    ")
    assert Layout.of("a:\n  b:\n    c: 1\n  d: 2\n", "", "yaml").unit == "  "
    # no indented line yet: the language's usual unit
    assert Layout.of("def read(path):\n", "", "python").unit == "    "
    assert Layout.of("package main\n\nfunc main() {\n", "", "file:///m/main.go").unit == "\t"
    assert Layout.of("function f() {\n", "", "typescript").unit == "  "
    # tabs to indent and spaces to align
    assert Layout.of("f() {\n\tcall(a,\n\t     b)\n}\n", "", "c").aligns


@pytest.mark.parametrize(
    ("layout", "draft", "line", "laid"),
    [
        # a copy from a CRLF document into an LF one, and back
        (
            Layout("\n", "    "),
            "for line in handle:\r\n    key",
            "",
            "for line in handle:\n    key",
        ),
        # a 4-space copy into a tab document, after the tabs the prompt gave
        (Layout("\n", "\t"), "key = 1\n\t\t    key2", "\t\t\t", "key = 1\n\t\t\tkey2"),
        # the model's mix of spaces and tabs, in a space document
        (
            Layout("\n", "    "),
            '\n    """Read."""\n    \tfor',
            "",
            '\n    """Read."""\n        for',
        ),
        # the cursor line's indentation is completed by the draft's first line
        (Layout("\n", "\t"), "    x = 1\n    y", "\t", "\tx = 1\n\ty"),
        # alignment short of a level stays; a document that aligns after tabs keeps it
        (Layout("\n", "\t"), "/**\n\t * x", "\t", "/**\n\t * x"),
        (Layout("\n", "\t", aligns=True), "a(b,\n\t    c)", "\t", "a(b,\n\t    c)"),
    ],
)
def test_a_draft_is_laid_out_as_its_document(
    layout: Layout, draft: str, line: str, laid: str
) -> None:
    assert layout.lines(draft, line) == laid


@pytest.mark.parametrize(
    ("document", "copied", "shown"),
    [
        # LF file, a copy from a CRLF file
        (
            SPACES + "            ",
            "key = line\r\n            value",
            "key = line\n            value",
        ),
        # CRLF file, LF-only copy: the block shown with CRLF line breaks
        (
            "def f():\r\n    if x:\r\n        y = 1\r\n    ",
            "for a in b:\n        c(a)\n        d(a)",
            "for a in b:\r\n        c(a)\r\n        d(a)",
        ),
        # tab file, a copy from a 4-space file
        (TABS, "key = line\n\t\t\t    value = key", "key = line\n\t\t\t\tvalue = key"),
    ],
)
def test_decoded_drafts_use_the_document_s_layout(
    tokenizer_engine: SimpleNamespace, document: str, copied: str, shown: str
) -> None:
    """Issue 34 item 5: drafts copied from another open document kept its line endings
    (an LF file got ``\\r\\n``, a CRLF file LF-only blocks) and indentation (``\\t\\t    ``)."""
    engine = _Recorder(tokenizer_engine.tokenizer, [copied])
    settings = DecodingSettings(first_prompt_tokens=0, line_mode="multi", max_lines=3)
    context = CursorContext.at(document, len(document), language="python")
    answer = decode(engine, context, settings)  # type: ignore[arg-type]
    assert [s.text for s in answer.suggestions] == [shown]
