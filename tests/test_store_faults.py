"""Faults the stores meet in use (issue 21): a settings change under a write, a full disk, a
path through a loop of links, two processes creating one store, and the protocol's own
(a null text, a change to an unopened document, shutdown with requests in flight)."""

from __future__ import annotations

import sqlite3
import threading
import time
from concurrent.futures import Future
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.workspace import Workspace

from lsp_server.protocol import SuperposedProtocol
from lsp_server.server import SuperposedServer
from lsp_server.stores import stores as stores_module
from lsp_server.stores.stores import Stores
from lsp_server.stores.write_queue import WriteQueue
from ngram_db import NgramStore
from ngram_db import store as store_module
from ngram_db.errors import StoreClosed, StoreFull
from tests.test_stores import BYTES, make_stores, stored

CODE = "def app(x):\n    return x + 1\n"


def codebase_db(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "codebase.sqlite"


# ----- item 2: a settings change never closes a store under a write -------------------------


def test_a_weight_change_leaves_the_open_stores_alone(tmp_path: Path, ws: Path) -> None:
    stores, reported = make_stores(tmp_path)
    assert stores.update_file(ws / "a.py", CODE, [ws]) is None
    codebase, user = stores.codebase(ws), stores.user()
    assert codebase is not None and user is not None
    stores.configure(replace(stores._settings, user_weight=0.4, max_file_bytes=5000))
    assert stores.codebase(ws) is codebase and stores.user() is user
    assert codebase.update_file(str(ws / "b.py"), CODE + "# b\n")  # still open: it writes
    assert reported == []


def test_a_new_store_path_reopens_only_that_store(tmp_path: Path, ws: Path) -> None:
    stores, reported = make_stores(tmp_path)
    assert stores.update_file(ws / "a.py", CODE, [ws]) is None
    codebase, user = stores.codebase(ws), stores.user()
    other = tmp_path / "other" / "codebase.sqlite"
    stores.configure(replace(stores._settings, codebase_db=str(other)))
    assert stores.user() is user
    assert stores.codebase(ws) is not codebase and codebase is not None and codebase.closed
    assert stores.update_file(ws / "a.py", CODE, [ws]) is None
    assert stored(other) == [str((ws / "a.py").resolve())]
    assert reported == []


def test_a_store_closed_under_a_queued_write_is_reopened_not_called_damaged(
    tmp_path: Path, ws: Path
) -> None:
    stores, reported = make_stores(tmp_path, user_store=False)
    queue = WriteQueue(retry_s=0.01)
    assert stores.update_file(ws / "a.py", CODE, [ws]) is None
    codebase = stores.codebase(ws)
    assert codebase is not None
    codebase.close()  # as a settings change on another thread would, between two writes
    with pytest.raises(StoreClosed):
        codebase.file_hashes()
    write = partial(stores.update_file, ws / "b.py", CODE + "# b\n", [ws])
    assert queue.submit("save:b", write).result(timeout=10) is None
    assert stored(codebase_db(tmp_path)) == sorted(
        str((ws / n).resolve()) for n in ("a.py", "b.py")
    )
    assert reported == []  # nothing was called damaged, no rebuild advised
    assert stores.source_for(ws / "a.py", [ws], {2: 1.0}) is not None  # and it still serves


def test_an_index_run_whose_store_is_reopened_resumes(
    tmp_path: Path, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(5):
        (ws / f"m{n}.py").write_text(f"def f{n}():\n    return {n}\n")
    stores, reported = make_stores(tmp_path, user_store=False)
    real = stores_module.index_repo
    calls: list[int] = []

    def interrupted(root: Path, store: NgramStore, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:  # the settings named another store while this one was written
            store.update_file(str((ws / "m0.py").resolve()), (ws / "m0.py").read_text())
            stores.configure(replace(stores._settings, codebase_db=str(tmp_path / "new.sqlite")))
            raise StoreClosed("closed during the run")
        return real(root, store, **kwargs)

    monkeypatch.setattr(stores_module, "index_repo", interrupted)
    summary = stores.index_root(ws)
    assert "error" not in summary and summary["indexed"] == 5 and len(calls) == 2
    assert len(stored(tmp_path / "new.sqlite")) == 5
    assert reported == []


# ----- item 4: a full disk: retried with backoff, recovered, counted only once written ------


def set_page_limit(store: NgramStore | None, pages: int | None) -> None:
    """Make the store's file unable to grow past its size now (a full disk), or lift it."""
    assert store is not None
    with store._lock:
        now = store.conn.execute("PRAGMA page_count").fetchone()[0]
        store.conn.execute(f"PRAGMA max_page_count = {now if pages is None else pages}")


def test_a_full_disk_keeps_the_save_queued_and_writes_it_once_there_is_room(
    tmp_path: Path, ws: Path
) -> None:
    stores, reported = make_stores(tmp_path)
    queue = WriteQueue(retry_s=0.01, max_retry_s=0.05)
    assert stores.update_file(ws / "a.py", CODE, [ws]) is None
    for store in (stores.codebase(ws), stores.user()):
        set_page_limit(store, None)
    big = "".join(f"def f{n}(x):\n    return x * {n}\n" for n in range(3000))
    future: Future[Any] = queue.submit(
        "save:b", partial(stores.update_file, ws / "b.py", big, [ws])
    )
    deadline = time.monotonic() + 10
    while queue.retries < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert queue.retries >= 3 and not future.done()  # not counted as learned: not written
    (message,) = set(reported)  # the same message each time: the server says it once
    assert "disk is full" in message and "free some space" in message
    for store in (stores.codebase(ws), stores.user()):
        set_page_limit(store, 1_000_000)  # space freed: no restart, no settings change
    assert future.result(timeout=10) is None
    b = str((ws / "b.py").resolve())
    assert b in stored(codebase_db(tmp_path)) and b in stored(tmp_path / "data" / "user.sqlite")
    assert stores.update_file(ws / "c.py", CODE + "# c\n", [ws]) is None  # the stores serve on
    with NgramStore.open(codebase_db(tmp_path), BYTES) as check:
        assert check.is_consistent()


def test_the_full_disk_backoff_doubles_up_to_its_limit() -> None:
    queue = WriteQueue(retry_s=1.0, max_retry_s=5.0)
    full = StoreFull("full")
    assert [queue._delay(full) for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert queue._delay(StoreClosed("closed")) == 0.0


# ----- item 7: a path through a loop of symbolic links --------------------------------------


def test_a_path_through_a_symlink_loop_gets_one_message_and_serves(
    tmp_path: Path, ws: Path
) -> None:
    (ws / "loop").symlink_to(ws / "loop")
    looped = ws / "loop" / "x.py"
    stores, reported = make_stores(tmp_path)
    assert stores.update_file(ws / "a.py", CODE, [ws]) is None
    assert stores.update_file(looped, CODE, [ws]) == "symlink loop"
    assert len(reported) == 1 and "loop of symbolic links" in reported[0]
    assert stores.source_for(looped, [ws], {2: 1.0}) is not None  # the workspace's first store
    assert stores.for_path(looped, [ws]).present() == [stores.user()]  # no codebase named
    assert stores.forget(looped, [ws])["removed"]  # nothing to erase, and no exception


# ----- item 7: two processes creating one store ------------------------------------------


def test_a_store_being_created_by_another_process_is_never_called_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "shared.sqlite"
    real_connect = store_module._connect
    others: list[NgramStore] = []
    raced = threading.Event()

    def connect_while_another_opens(target: str, query_only: bool = False) -> sqlite3.Connection:
        if not raced.is_set():  # the other process opens the store just as this one creates it
            raced.set()
            others.append(NgramStore.open(path, BYTES))
        return real_connect(target, query_only)

    monkeypatch.setattr(store_module, "_connect", connect_while_another_opens)
    mine = NgramStore.open(path, BYTES)
    assert others[0].notices == [] and mine.notices == []
    others[0].update_file("a.py", CODE)
    assert mine.paths() == ["a.py"]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".new")]  # no leftovers
    for store in (mine, *others):
        store.close()


def test_a_store_left_empty_by_a_crash_is_still_said(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    path.touch()
    with NgramStore.open(path, BYTES) as store:
        assert len(store.notices) == 1 and "was empty (0 bytes)" in store.notices[0]


# ----- item 7: what the protocol reads ------------------------------------------------------


@pytest.fixture(scope="module")
def protocol() -> SuperposedProtocol:
    server = SuperposedServer()
    assert isinstance(server.protocol, SuperposedProtocol)
    server.protocol._workspace = Workspace(None)  # as initialize makes it
    return server.protocol


def did_change(uri: str, text: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "textDocument/didChange",
        "params": {
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{"text": text}],
        },
    }


def test_a_change_whose_text_is_null_is_dropped_not_inserted_as_none(
    protocol: SuperposedProtocol,
) -> None:
    dropped = protocol.structure_message(did_change("file:///x.py", None))
    assert not isinstance(dropped, types.DidChangeTextDocumentNotification)
    kept = protocol.structure_message(did_change("file:///x.py", "y = 2\n"))
    assert isinstance(kept, types.DidChangeTextDocumentNotification)
    assert kept.params.content_changes[0].text == "y = 2\n"


def test_a_change_to_a_document_never_opened_is_ignored(protocol: SuperposedProtocol) -> None:
    params = types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri="file:///never.py", version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text="x")],
    )
    assert list(protocol.lsp_text_document__did_change(params)) == []  # no KeyError
    assert "file:///never.py" not in protocol.workspace.text_documents


def test_shutdown_cancels_requests_that_complete_as_they_are_cancelled(
    protocol: SuperposedProtocol,
) -> None:
    for msg_id in ("a", "b", "c"):
        future: Future[Any] = Future()  # a thread handler's: cancel runs its callbacks at once
        future.add_done_callback(lambda _, m=msg_id: protocol._request_futures.pop(m, None))
        protocol._request_futures[msg_id] = future
    list(protocol.lsp_shutdown())  # pygls iterated over the dict as the callbacks emptied it
    assert protocol._request_futures == {} and protocol._shutdown


def test_closed_stores_refuse_to_reopen(tmp_path: Path, ws: Path) -> None:
    stores: Stores
    stores, _ = make_stores(tmp_path)
    assert stores.update_file(ws / "a.py", CODE, [ws]) is None
    stores.close()
    with pytest.raises(StoreClosed):  # the write queue runs it again on the new stores
        stores.update_file(ws / "a.py", CODE + "# 2\n", [ws])
    stats = stores.stats([ws])  # superposed.stats during a model reload answers, no error
    assert "being reopened" in stats["user"]["error"]
