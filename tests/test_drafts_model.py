"""Issue 51 item 7 on the real model, as the command line and the demo run it: where every
decoded draft failed the parse check, a draft is shown, and a CRLF document gets the LF
document's drafts. One engine for the module (the product's runner, ``load_engine``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lsp_server import demo
from lsp_server.completion.answer import answer
from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.request import Request
from lsp_server.completion.wellformed import Cursor, malformed
from lsp_server.models import load_engine
from lsp_server.session import Session
from lsp_server.settings import ModelSettings, Settings, StoreSettings
from lsp_server.stores.match_indexes import MatchIndexes
from lsp_server.stores.stores import Stores
from lsp_server.workspace import Where
from superposed.api import Engine

pytestmark = pytest.mark.model

# ``superposed-lsp complete`` at the loop's end and in its body showed no draft: every one
# ended in ``with open(os.path.join(dirpath, file))``, without its ``:``
LOOP = (
    "import os\n\n\ndef list_python_files(root):\n    result = []\n"
    "    for dirpath, dirnames, filenames in os.walk(root):"
)
BODY = LOOP + "\n        "


@pytest.fixture(scope="module")
def engine() -> Engine:
    return load_engine(ModelSettings(compile="off"))


@pytest.fixture()
def session(engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Session:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    stores = Stores(engine.tokenizer, StoreSettings(user_store=False))
    return Session(engine, stores, MatchIndexes(engine.tokenizer))


def drafts(session: Session, text: str, offset: int) -> list[str]:
    """The drafts at ``offset`` of ``text``, the one open document, asked twice: the first
    request warms the cache (a cold one answers from the short recent window)."""
    uri = "file:///ws/files.py"
    context = CursorContext.at(text, offset, "python")
    request = Request("files", Where(uri, None, [], {uri: text}), context, Settings())
    answer(session, request)
    return [s.text for s in answer(session, request).suggestions]


def test_a_loop_body_whose_drafts_all_broke_shows_them_cut_to_lines_that_parse(
    session: Session,
) -> None:
    shown = drafts(session, BODY + "\n", len(BODY))
    assert shown
    assert malformed(shown, Cursor(BODY, "\n", "python")) == [""] * len(shown)


def test_a_crlf_opener_gets_the_lf_documents_drafts(session: Session) -> None:
    """Before, the CRLF document got none here, the LF one three."""
    lf = drafts(session, LOOP + "\n", len(LOOP))
    crlf_loop = LOOP.replace("\n", "\r\n")
    crlf = drafts(session, crlf_loop + "\r\n", len(crlf_loop))
    assert lf
    assert crlf == [t.replace("\n", "\r\n") for t in lf]


def test_the_demos_first_case_shows_the_memorys_other_matches(
    engine: Engine, tmp_path: Path
) -> None:
    """After ``return NgramStore.`` every decoded draft copied a docstring and failed the
    parse check; ``NgramStore.open(`` follows the same text three times in the package."""
    title, text = demo.CURSORS[0]
    with demo.sample_session(engine, tmp_path) as (session, _):
        shown = answer(session, demo.request(text, "superposed", 3, True)).suggestions
    assert any(s.text.startswith("open(") for s in shown), [s.text for s in shown]
    cursor = Cursor(text, "", demo.SNIPPET.name)
    assert malformed([s.text for s in shown], cursor) == [""] * len(shown)
