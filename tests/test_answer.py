"""One answer for the server and the command line (lsp_server/completion/answer.py):
``superposed-lsp
complete`` gives the drafts the server gives at the same place with the same settings.

In process, on the tiny random model (``SUPERPOSED_TEST_TINY_MODEL=1``: its drafts are not
judged for parsing), over a git repository whose codebase store holds the definition the
document calls.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.workspace import Workspace

from lsp_server import cli, models
from lsp_server.completion.answer import answer
from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.request import Request
from lsp_server.models import TINY_ENV
from lsp_server.server import SuperposedServer
from lsp_server.session import Session
from lsp_server.settings import Settings, parse_settings
from lsp_server.stores.match_indexes import MatchIndexes
from lsp_server.stores.stores import Stores
from lsp_server.workspace import Where
from ngram_db import NgramStore, index_repo
from superposed.api import Engine
from superposed.model import LoadedModel

HELPER = "def frobnicate_widgets(count, *, colour='blue', sparkle=True):\n    return count\n"
MAIN = "from pkg.widgets import frobnicate_widgets\n\n\ndef main():\n    frobnicate_widgets("
LINE, COL = 4, len("    frobnicate_widgets(")


@pytest.fixture()
def repo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_loaded: LoadedModel
) -> tuple[Path, Path]:
    """A repository (its ``main.py``) and its codebase store, built with the tiny model's
    tokenizer; the tiny model served, a fresh engine (and KV cache) per load."""
    monkeypatch.setenv(TINY_ENV, "1")
    monkeypatch.setattr(models, "load_engine", lambda settings: Engine(tiny_loaded))
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "pkg").mkdir()
    (root / "pkg" / "widgets.py").write_text(HELPER)
    (root / "main.py").write_text(MAIN)
    db = tmp_path / "codebase.sqlite"
    store = NgramStore.open(db, tiny_loaded.tokenizer)
    index_repo(root, store, progress=False)
    store.close()
    return root / "main.py", db


def _args(root: Path, db: Path, settings: dict[str, Any]) -> Any:
    # answerWithinMs 0: the server's drafts must not depend on how fast the machine decodes
    options = {"userStore": False, "debounceMs": 0, "answerWithinMs": 0, **settings}
    return cli.build_parser().parse_args(
        ["complete", str(root / "main.py"), "--line", str(LINE), "--col", str(COL), "--db", str(db)]
        + ["--settings", json.dumps(options)]
    )


def server_drafts(path: Path, args: Any) -> list[str]:
    """The drafts an inlineCompletion gets from a server with the CLI's settings, the file
    the one open document and no workspace folder (as ``complete`` sees it)."""
    return served(path, cli.cli_settings(args))


def served(path: Path, settings: Settings, step_s: float = 0.0) -> list[str]:
    """The drafts an inlineCompletion gets from a server with ``settings`` (server_drafts);
    ``step_s``: each decoding step that much slower."""
    ls = SuperposedServer()
    if step_s:
        ls.scheduler.step_hook = lambda: time.sleep(step_s)
    ls.protocol._workspace = Workspace(None)
    ls.protocol.client_capabilities = types.ClientCapabilities()
    uri = path.as_uri()
    ls.workspace.put_text_document(types.TextDocumentItem(uri, "python", 1, path.read_text()))
    ls.settings = settings
    session = served_session(path, settings)
    ls.slot.state = session
    try:
        _, suggestions = asyncio.run(ls.suggest(uri, types.Position(LINE, COL)))
    finally:
        session.stores.close()
    return [s.text for s in suggestions]


def served_session(path: Path, settings: Settings) -> Session:
    """The session a server serves ``path`` with: the tiny model, the stores indexed."""
    engine = models.load_engine(settings.model)
    stores = Stores(engine.tokenizer, settings.stores)
    session = Session(engine, stores, MatchIndexes(engine.tokenizer))
    for store in session.stores.for_path(path, []).present():  # indexed, as complete does
        session.indexes.stores.store_index(store)
    session.indexes.wait()
    return session


def cli_drafts(args: Any) -> list[str]:
    return [d["text"] for d in cli.run_complete(args)["drafts"]]  # type: ignore[attr-defined]


def test_the_command_line_answers_as_the_server(repo: tuple[Path, Path]) -> None:
    path, db = repo
    memory, plain = _args(path.parent, db, {}), _args(path.parent, db, {"memory": False})
    with_memory, without = cli_drafts(memory), cli_drafts(plain)
    assert with_memory  # the tiny model's drafts are kept, unparsed
    # The memory changes what is drafted here: a command line that left it out would not
    # answer as the server does.
    assert with_memory != without
    assert with_memory == server_drafts(path, memory)
    assert without == server_drafts(path, plain)


def test_only_a_request_someone_waits_for_is_due(repo: tuple[Path, Path]) -> None:
    """answerWithinMs cuts the server's answer to an editor's request (issue 54 item 4); the
    command line, whose drafts are all there is, answers whole with the same settings."""
    path, db = repo
    due = _args(path.parent, db, {"answerWithinMs": 1, "memory": False})
    whole = cli_drafts(due)
    assert whole == cli_drafts(_args(path.parent, db, {"memory": False}))
    cut = served(path, cli.cli_settings(due), step_s=0.05)
    assert cut and cut != whole
    assert max(map(len, cut)) < max(map(len, whole))


def test_the_deadline_counts_from_the_requests_arrival(repo: tuple[Path, Path]) -> None:
    """A request that waited for the engine thread (a warm-up's chunk ending, an older request
    stopping) has that much less time: it is due ``answerWithinMs`` after it came, not after
    its model call started (the user waits from the keystroke); and its steps end early
    enough for the work after them (the last due answer's, Session.finishing)."""
    path, db = repo
    settings = cli.cli_settings(_args(path.parent, db, {"answerWithinMs": 5000, "memory": False}))
    session = served_session(path, settings)
    text = path.read_text()
    context = CursorContext.at(text, len(text), "python")
    uri = path.as_uri()
    request = Request(uri, Where(uri, path, [], {uri: text}), context, settings, due=True)
    try:
        on_time = answer(session, request)
        finishing = session.finishing.seconds  # what the answer took after its last step
        late = answer(session, dataclasses.replace(request, arrived=time.perf_counter() - 60))
        session.finishing.seconds = 60  # an answer's last work as long as its whole wait
        held_back = answer(session, dataclasses.replace(request, arrived=time.perf_counter()))
    finally:
        session.stores.close()
    assert not on_time.cut and late.cut and held_back.cut
    assert 0 < finishing < 5
    longest = [max(len(s.text) for s in a.suggestions) for a in (late, on_time)]
    assert longest[0] < longest[1]


def test_an_older_versions_knn_file_is_never_read(repo: tuple[Path, Path]) -> None:
    """Issue 51 item 6, retired with the kNN store (issue 53): where ``<store>.knn.npz`` was
    damaged, every request with knnWeight > 0 failed, and a FIFO there hung the engine
    thread. The setting is now named and ignored, and the file never opened: a FIFO, which
    blocks whoever opens it to read, is left alone and the request answers."""
    path, db = repo
    os.mkfifo(f"{db}.knn.npz")
    options = {"userStore": False, "debounceMs": 0, "compile": "off", "codebaseDb": str(db)}
    settings, errors = parse_settings({**options, "knnWeight": 0.5, "knnNeighbours": 8})
    assert len(errors) == 2 and all("is retired" in e for e in errors), errors
    drafts: list[list[str]] = []
    worker = threading.Thread(target=lambda: drafts.append(served(path, settings)), daemon=True)
    worker.start()
    worker.join(timeout=300)  # generous: a blocked reader never returns at all
    assert drafts and drafts[0], "the request did not answer: something opened the FIFO"
