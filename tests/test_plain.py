"""A CRLF or tab-indented document is read as LF and spaces and answered in its own layout
(issue 51 item 7, lsp_server/completion/plain.py): the model's prompt and the memory's documents
are the
LF, space-indented twin's, and the drafts come back in the document's line ending and
indentation."""

from __future__ import annotations

from pathlib import Path

import pytest

from lsp_server.completion.answer import answer
from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.plain import Plain, plain_request
from lsp_server.completion.request import Request
from lsp_server.models import TINY_ENV
from lsp_server.session import Session
from lsp_server.settings import Settings, StoreSettings
from lsp_server.stores.match_indexes import MatchIndexes
from lsp_server.stores.stores import Stores
from lsp_server.workspace import Where
from superposed.api import Engine

TABBED = "def parse(path):\r\n\twith open(path) as handle:\r\n\t\tfor line in handle:\r\n\t\t\t"
REST = "\r\n\treturn None\r\n"


def request_at(text: str, offset: int, others: dict[str, str] | None = None) -> Request:
    uri = "file:///ws/parse.py"
    context = CursorContext.at(text, offset, "python")
    where = Where(uri, None, [], {uri: text, **(others or {})})
    return Request("parse", where, context, Settings())


def test_a_crlf_tabbed_request_is_read_as_lf_and_spaces() -> None:
    text = TABBED + "key" + REST
    made, plain = plain_request(request_at(text, len(TABBED), {"file:///o.py": "a\r\n\tb\r\n"}))
    context = made.context
    assert context.before == (
        "def parse(path):\n    with open(path) as handle:\n        for line in handle:\n" + " " * 12
    )
    assert context.after == "key"  # no CR: the line ends there
    assert context.following == "key\n    return None\n"
    document = made.where.documents["file:///ws/parse.py"]
    assert document == context.before + context.following  # the memory's offsets hold
    assert made.where.documents["file:///o.py"] == "a\n\tb\n"  # others: LF, their own tabs
    assert plain.back("key = line.split()\n    rest") == "key = line.split()\r\n\trest"


def test_a_cursor_inside_the_tabs_reads_the_whole_indentation_as_spaces() -> None:
    text = "def f():\n\t\tx = 1\n"
    made, _ = plain_request(request_at(text, len("def f():\n\t")))
    assert made.context.before + made.context.following == "def f():\n        x = 1\n"


@pytest.mark.parametrize(
    ("text", "unit"),
    [
        ("package main\n\nfunc main() {\n\tx := 1\n\t", ""),  # Go: tabs are the usual
        ("f() {\n\tcall(a,\n\t     b)\n\t", ""),  # tabs, then spaces to align: kept
        ("def f():\n\tx = 1\n\t", "    "),
    ],
)
def test_tabs_stay_where_they_are_the_usual_indentation(text: str, unit: str) -> None:
    name = "main.go" if text.startswith("package") else "f.py"
    assert Plain.of(CursorContext(text, "", language=name)).unit == unit


def test_a_crlf_tabbed_document_gets_the_lf_space_documents_drafts(
    tiny_engine: Engine, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The same prompt for the model: the same drafts, in the document's line ending and
    indentation (issue 51: they differed at 7 of 12 cursors, and some got none)."""
    monkeypatch.setenv(TINY_ENV, "1")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    stores = Stores(tiny_engine.tokenizer, StoreSettings(user_store=False))
    session = Session(tiny_engine, stores, MatchIndexes(tiny_engine.tokenizer))
    spaces = TABBED.replace("\r\n", "\n").replace("\t", "    ")

    def ask(text: str, at: int) -> list[str]:
        return [s.text for s in answer(session, request_at(text, at)).suggestions]

    plain_text = spaces + REST.replace("\r\n", "\n").replace("\t", "    ")
    ask(plain_text, len(spaces))  # a warm cache, as for the second request
    lf = ask(plain_text, len(spaces))
    crlf = ask(TABBED + REST, len(TABBED))
    assert lf and crlf == [Plain.of(CursorContext(TABBED, "")).back(t) for t in lf]
    stores.close()
