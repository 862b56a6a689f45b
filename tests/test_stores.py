"""The server's store layer (lsp_server.stores.stores) on real files: what a save teaches, where,
what happens when a store cannot be used, and the write queue. Issue 12, items 4-12."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lsp_server.settings import StoreSettings
from lsp_server.stores import stores as stores_module
from lsp_server.stores.stores import Stores
from lsp_server.stores.write_queue import WriteQueue
from ngram_db import ByteTokenizer, NgramStore
from ngram_db.errors import StoreBusy

BYTES = ByteTokenizer()
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n"


def make_stores(tmp_path: Path, **settings: Any) -> tuple[Stores, list[str]]:
    reported: list[str] = []
    options = {
        "codebase_db": str(tmp_path / "cache" / "codebase.sqlite"),
        "user_db": str(tmp_path / "data" / "user.sqlite"),
        **settings,
    }
    return Stores(BYTES, StoreSettings(**options), report=reported.append), reported


def stored(path: str | Path) -> list[str]:
    with NgramStore.open(path, BYTES) as store:
        return store.paths()


def test_saves_learn_only_what_index_repo_would(tmp_path: Path, ws: Path) -> None:
    stores, _ = make_stores(tmp_path)
    saves = {
        ".env": "SECRET=1\n",
        "keys/deploy": PEM,
        "node_modules/x/index.js": "module.exports = 1\n",
        "app.py": "def app():\n    return 1\n",
    }
    reasons = {}
    for rel, text in saves.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
        reasons[rel] = stores.update_file(ws / rel, text, [ws])
    assert reasons == {
        ".env": "secret",
        "keys/deploy": "secret content",
        "node_modules/x/index.js": "ignored folder",
        "app.py": None,
    }
    key = str((ws / "app.py").resolve())
    assert stored(tmp_path / "cache" / "codebase.sqlite") == [key]
    assert stored(tmp_path / "data" / "user.sqlite") == [key]


def test_a_file_that_becomes_a_secret_is_forgotten(tmp_path: Path, ws: Path) -> None:
    stores, _ = make_stores(tmp_path)
    path = ws / "notes.txt"
    assert stores.update_file(path, "just notes\n", [ws]) is None
    assert stores.update_file(path, "just notes\n" + PEM, [ws]) == "secret content"
    assert stored(tmp_path / "data" / "user.sqlite") == []


def test_paths_outside_the_workspace_are_not_learned(
    tmp_path: Path, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUPERPOSED_CACHE_DIR", str(tmp_path / "cache"))
    stores, _ = make_stores(tmp_path, codebase_db=None)  # a store per repository
    outside = tmp_path / "elsewhere"
    (outside / ".git").mkdir(parents=True)  # another repository
    (outside / "shadow").write_text("root:$6$hash:19000::::::\n")
    (ws / "link").symlink_to(outside / "shadow")
    attempts = [
        ws / ".." / "elsewhere" / "shadow",  # `..` segments
        ws / "link",  # a symbolic link that leads out
        outside / "shadow",  # a file of another repository
    ]
    for path in attempts:
        assert stores.update_file(path, "root:$6$hash\n", [ws]) == "outside the workspace"
    assert not (tmp_path / "data" / "user.sqlite").exists()
    # completing in the other repository's file reads only stores that exist
    stores.source_for(outside / "shadow", [ws], {2: 1.0})
    assert not (tmp_path / "cache" / "ngrams").exists()  # no store for the other repository


def test_one_answer_to_which_stores_apply_to_a_file(
    tmp_path: Path, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stores.for_path, which the n-gram source and the memory both ask: a workspace file's
    codebase store (made on first use) and the user store; a file of another repository
    reads that repository's store only once it exists; no user store when it is off."""
    monkeypatch.setenv("SUPERPOSED_CACHE_DIR", str(tmp_path / "cache"))
    stores, _ = make_stores(tmp_path, codebase_db=None)  # a store per repository
    here = stores.for_path(ws / "a.py", [ws])
    assert here.codebase is stores.codebase(ws, create=False) is not None
    assert here.user is stores.user() is not None
    assert here.present() == [here.codebase, here.user]
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    assert stores.for_path(other / "b.py", [ws]).codebase is None  # none made for it
    made = stores.codebase(other)  # index-repo made one
    assert stores.for_path(other / "b.py", [ws]).codebase is made is not None
    off, _ = make_stores(tmp_path, codebase_db=None, user_store=False)
    assert off.for_path(ws / "a.py", [ws]).user is None


def test_accepted_drafts_are_bounded(
    tmp_path: Path, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stores_module, "ACCEPTED_KEEP", 3)
    stores, _ = make_stores(tmp_path)
    for i in range(5):
        assert stores.learn_text(f"draft number {i}\n", ws / "a.py", [ws]) is None
    user = stores.user()
    assert user is not None
    kept = user.paths(stores_module.ACCEPTED_PREFIX)
    assert len(kept) == 3
    newest = [BYTES.encode_batch([f"draft number {i}\n"])[0].tolist() for i in (2, 3, 4)]
    assert [user.file_ids(p).tolist() for p in kept] == newest  # type: ignore[union-attr]
    assert user.is_consistent()


def test_forget_a_path_or_the_whole_user_store(tmp_path: Path, ws: Path) -> None:
    stores, _ = make_stores(tmp_path)
    for name in ("a.py", "b.py"):
        stores.update_file(ws / name, f"{name} = 1\n", [ws])
    assert stores.learn_text("accepted draft\n", ws / "a.py", [ws]) is None
    result = stores.forget(ws / "a.py", [ws])
    assert set(result["removed"].values()) == {1}  # from both stores
    assert stored(tmp_path / "cache" / "codebase.sqlite") == [str((ws / "b.py").resolve())]
    stores.forget(None, [ws])
    assert stored(tmp_path / "data" / "user.sqlite") == []
    assert stored(tmp_path / "cache" / "codebase.sqlite") == [str((ws / "b.py").resolve())]


def test_an_unusable_store_is_left_out_and_reported_once(tmp_path: Path, ws: Path) -> None:
    user_db = tmp_path / "data" / "user.sqlite"
    user_db.parent.mkdir(parents=True)
    user_db.write_bytes(b"\x93random bytes" * 100)
    stores, reported = make_stores(tmp_path)
    for n in range(3):
        assert stores.update_file(ws / f"f{n}.py", f"x = {n}\n", [ws]) is None
        source = stores.source_for(ws / "f0.py", [ws], {2: 0.5, 3: 0.5})
        assert source is not None  # the codebase store still serves
    assert len(reported) == 1 and "--rebuild" in reported[0] and str(user_db) in reported[0]
    assert "superposed.userDb" in reported[0]  # the editor's advice: its settings, not --db
    stats = stores.stats([ws])
    assert stats["user"]["error"] == f"n-gram store not used: {reported[0].split(': ', 1)[1]}"
    assert stats["codebase"][str(ws)]["files"] == 3
    assert user_db.read_bytes() == b"\x93random bytes" * 100  # never overwritten


def test_a_store_damaged_inside_is_left_out_at_the_first_failing_read(
    tmp_path: Path, ws: Path
) -> None:
    stores, reported = make_stores(tmp_path, user_store=False)
    stores.update_file(ws / "a.py", "def foo(x):\n    return x\n" * 2000, [ws])
    codebase = stores.codebase(ws)
    assert codebase is not None
    codebase.checkpoint()
    path = tmp_path / "cache" / "codebase.sqlite"
    with path.open("r+b") as f:
        f.seek(2 * 4096)
        f.write(b"\xa5" * 4 * 4096)
    source = stores.source_for(ws / "a.py", [ws], {n: 0.2 for n in range(2, 7)})
    assert source is not None
    result = source.probabilities([[1, 2, 3, 4, 5]], np.array([[6, 7]]))
    assert not result.supported.any()  # served without it, no exception
    assert len(reported) == 1 and "damaged" in reported[0] and "--rebuild" in reported[0]
    assert stores.source_for(ws / "a.py", [ws], {2: 1.0}) is None  # no longer used
    assert stores.index_root(ws)["error"].startswith("n-gram store not used")
    assert len(reported) == 1


def test_the_write_queue_retries_a_busy_write_until_it_lands() -> None:
    queue = WriteQueue(retry_s=0.01)
    attempts: list[int] = []

    def write() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise StoreBusy("locked")
        return "written"

    assert queue.submit("save:a", write).result(timeout=5) == "written"
    assert len(attempts) == 3
    assert queue.drain(1) and queue.pending() == 0


def test_an_accepted_draft_obeys_a_saves_rules(tmp_path: Path, ws: Path) -> None:
    """Issue 34, item 1: the file's rules where it went in, the content scan and the size
    limit on the draft itself (``never_learned``, the one rule a save obeys too)."""
    stores, _ = make_stores(tmp_path, max_file_bytes=1_000)
    (ws / ".gitignore").write_text("scratch.py\n")
    aws, token = "AKIA" + "QWERTYUIOPASDFGH", "ghp_" + "x7" * 18  # no secret in this file
    drafts = [
        (ws / "app.py", f'key = "{aws}"', "secret content"),
        (ws / "app.py", PEM, "secret content"),
        (ws / "app.py", f"token = {token!r}", "secret content"),
        (ws / ".env", "DB_HOST=db7.corp.internal", "secret"),
        (ws / "scratch.py", "host = 'db7'", "gitignored"),
        (tmp_path / "elsewhere.py", "host = 'db7'", "outside the workspace"),
        (None, "host = 'db7'", "not a file"),
        (ws / "app.py", "value = 12345\n" * 100, "too large"),
    ]
    assert [stores.learn_text(text, path, [ws]) for path, text, _ in drafts] == [
        reason for _, _, reason in drafts
    ]
    assert stored(tmp_path / "data" / "user.sqlite") == []
    assert stores.learn_text("return 42", ws / "app.py", [ws]) is None
    assert len(stored(tmp_path / "data" / "user.sqlite")) == 1
