"""A store file replaced under the server, and the writes still queued at shutdown (issue 34,
item 3): ``index-repo --rebuild`` deletes the store and writes a new one; the server kept
writing to the deleted file (saves counted as indexed, missing from the store on disk)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from pygls.workspace import Workspace

from lsp_server.runtime import learning as learning_module
from lsp_server.runtime.learning import Learning
from lsp_server.session import SessionSlot
from lsp_server.settings import StoreSettings
from lsp_server.stores.stores import Stores
from lsp_server.stores.write_queue import WriteQueue
from ngram_db import ByteTokenizer, NgramStore, index_repo
from ngram_db.errors import StoreBusy
from ngram_db.records import content_hash

BYTES = ByteTokenizer()


def make_stores(tmp_path: Path) -> tuple[Stores, Path, Path]:
    codebase, user = tmp_path / "cache" / "codebase.sqlite", tmp_path / "data" / "user.sqlite"
    settings = StoreSettings(codebase_db=str(codebase), user_db=str(user))
    return Stores(BYTES, settings, report=lambda message: None), codebase, user


def rebuild(store_path: Path, root: Path | None = None) -> None:
    """What ``index-repo ROOT --rebuild`` does to the store file (from another process)."""
    with NgramStore.open(store_path, BYTES, rebuild=True) as store:
        if root is not None:
            index_repo(root, store, progress=False)


def hashes(store_path: Path) -> dict[str, str]:
    """What the store file at ``store_path`` holds now, read as a new process would."""
    with NgramStore.open(store_path, BYTES) as store:
        return store.file_hashes()


def save(ws: Path, name: str, text: str) -> tuple[Path, str]:
    (ws / name).write_text(text)
    return ws / name, str((ws / name).resolve())


def test_saves_after_a_rebuild_reach_the_new_store_file(tmp_path: Path, ws: Path) -> None:
    stores, codebase, user = make_stores(tmp_path)
    path, key = save(ws, "a.py", "def first():\n    return 1\n")
    assert stores.update_file(path, path.read_text(), [ws]) is None
    rebuild(codebase, ws)
    rebuild(user)
    text = "def second():\n    return 2\n"
    path.write_text(text)
    assert stores.update_file(path, text, [ws]) is None  # counted as indexed
    assert hashes(codebase)[key] == content_hash(text)  # before the fix: the old text's hash
    assert hashes(user)[key] == content_hash(text)  # before the fix: not there at all


def test_reads_after_a_rebuild_see_the_new_store_file(tmp_path: Path, ws: Path) -> None:
    stores, codebase, _ = make_stores(tmp_path)
    path, key = save(ws, "a.py", "def first():\n    return 1\n")
    stores.update_file(path, path.read_text(), [ws])
    save(ws, "b.py", "def other():\n    return 3\n")
    rebuild(codebase, ws)
    here = stores.for_path(path, [ws]).codebase
    assert here is not None and len(here.file_hashes()) == 2  # a.py and b.py
    assert stores.stats([ws])["codebase"][str(ws)]["files"] == 2


@pytest.mark.slow
def test_index_repo_rebuild_from_the_shell_then_a_save(
    tmp_path: Path, ws: Path, tokenizer: Any
) -> None:
    """The issue's reproduction with the real command: the save lands in the new file and
    no deleted store file stays open."""
    db = tmp_path / "cache" / "codebase.sqlite"
    stores = Stores(tokenizer, StoreSettings(codebase_db=str(db), user_store=False))
    path, key = save(ws, "a.py", "def first():\n    return 1\n")
    assert stores.update_file(path, path.read_text(), [ws]) is None
    run = subprocess.run(
        [sys.executable, "-m", "ngram_db.cli", str(ws), "--db", str(db), "--rebuild"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    text = "def second():\n    return 2\n"
    path.write_text(text)
    assert stores.update_file(path, text, [ws]) is None
    with NgramStore.open(db, tokenizer) as fresh:
        assert fresh.file_hashes()[key] == content_hash(text)
    open_files = []
    for fd in Path("/proc/self/fd").iterdir():  # Linux
        with contextlib.suppress(OSError):  # closed meanwhile
            open_files.append(os.readlink(fd))
    assert not [f for f in open_files if str(db) in f and "(deleted)" in f]
    stores.close()


def test_a_write_that_commits_while_the_file_is_replaced_runs_again(
    tmp_path: Path, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rebuild lands between the check before a write and its commit: the queue runs the
    write again, on the new file."""
    stores, codebase, _ = make_stores(tmp_path)
    original = NgramStore.update_file
    calls: list[str] = []

    def update_then_rebuilt(self: NgramStore, path: Any, text: str) -> bool:
        written = original(self, path, text)
        if self.path == codebase and not calls:  # the first write, committed to the old file
            calls.append(str(path))
            rebuild(codebase)
        return written

    monkeypatch.setattr(NgramStore, "update_file", update_then_rebuilt)
    path, key = save(ws, "a.py", "def first():\n    return 1\n")
    queue = WriteQueue(retry_s=0.01)
    future = queue.submit(f"save:{path}", lambda: stores.update_file(path, path.read_text(), [ws]))
    assert future.result(timeout=10) is None and calls == [key]
    assert key in hashes(codebase)  # before the fix: written to the deleted file only


def test_a_broken_store_is_used_again_once_rebuilt(tmp_path: Path, ws: Path) -> None:
    """What the store-damaged message says to do works without restarting the server."""
    stores, codebase, _ = make_stores(tmp_path)
    codebase.parent.mkdir(parents=True)
    codebase.write_bytes(b"this is not a database" * 10)
    assert stores.codebase(ws) is None
    rebuild(codebase, ws)
    assert stores.codebase(ws) is not None  # before the fix: left out until settings change


def test_a_store_path_that_cannot_be_looked_at_stays_left_out(tmp_path: Path, ws: Path) -> None:
    """A path under a file (/dev/null/...): stat raises NotADirectoryError, not an answer."""
    settings = StoreSettings(codebase_db="/dev/null/superposed/codebase.sqlite", user_store=False)
    reported: list[str] = []
    stores = Stores(BYTES, settings, report=reported.append)
    assert stores.codebase(ws) is None and stores.codebase(ws) is None
    assert len(reported) == 1 and "cannot create the folder /dev/null/superposed" in reported[0]


# ----- shutdown ---------------------------------------------------------------------------------


class FakeNotifier:
    def __init__(self) -> None:
        self.messages: list[str] = []

    def once(self, message: str, *args: Any) -> None:
        self.messages.append(message)

    def call_soon(self, callback: Any, *args: Any) -> None:
        callback(*args)


def make_learning(tmp_path: Path) -> tuple[Learning, FakeNotifier, Counter[str]]:
    notifier, counters = FakeNotifier(), Counter[str]()
    server = SimpleNamespace(settings=None, workspace=Workspace(None))  # no folder
    learning = Learning(cast(Any, notifier), counters, server, SessionSlot())
    learning.stores = make_stores(tmp_path)[0]
    learning.ready.set()
    return learning, notifier, counters


def test_shutdown_waits_for_writes_while_they_are_being_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes that take longer together than the wait, each one quick: all are made."""
    monkeypatch.setattr(learning_module, "SHUTDOWN_WAIT_S", 0.3)
    learning, notifier, counters = make_learning(tmp_path)
    made: list[int] = []

    def write(i: int) -> None:
        time.sleep(0.06)
        made.append(i)

    for i in range(12):
        learning.writes.submit(f"save:{i}", functools.partial(write, i))
    asyncio.run(learning.drain())
    assert made == list(range(12))  # before the fix: about 5, the rest lost at exit
    assert counters["writes_dropped"] == 0 and notifier.messages == []


def test_shutdown_says_which_writes_it_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write held back by another process's lock for longer than shutdown waits."""
    monkeypatch.setattr(learning_module, "SHUTDOWN_WAIT_S", 0.2)
    learning, notifier, counters = make_learning(tmp_path)
    learning.writes = WriteQueue(retry_s=0.02)
    release = threading.Event()

    def locked() -> None:
        if not release.is_set():
            raise StoreBusy("another process holds the lock")

    futures = [learning.writes.submit(f"save:/ws/{name}", locked) for name in ("a.py", "b.py")]
    asyncio.run(learning.drain())
    release.set()
    assert counters["writes_dropped"] == 2  # before the fix: a log line only
    assert len(notifier.messages) == 1 and "save:/ws/a.py" in notifier.messages[0]
    assert "2 store write(s)" in notifier.messages[0]
    assert learning.stats([])["writes"]["dropped"] == 2
    assert all(f.cancelled() for f in futures)  # not counted as indexed
