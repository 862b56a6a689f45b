"""End-to-end: what the server learns on save, and how it serves when stores fail (issue 12).

The server over stdio (pytest-lsp), the tiny model, stores under tmp_path. Items 4-12, 16.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from ngram_db import NgramStore
from tests.e2e.lsp_harness import (
    SAMPLE,
    K,
    command,
    end_of,
    inline,
    open_doc,
    session,
    wait_for_counter,
    wait_until_ready,
)

pytestmark = pytest.mark.slow  # every test starts the server over stdio

PEM = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nu\n-----END EC PRIVATE KEY-----\n"
PROMPT = SAMPLE + "\ndef helper():\n    "


def save(client: LanguageClient, uri: str) -> None:
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )


def store_messages(client: LanguageClient) -> list[str]:
    return [m.message for m in client.messages if "store" in m.message]


async def serves_and_answers(client: LanguageClient, workspace: Path) -> dict[str, Any]:
    """Completions come, saves are taken, stats and indexWorkspace answer: the stats."""
    for n in range(2):
        uri = open_doc(client, workspace / f"use_{n}.py", PROMPT + "x" * n)
        assert len(await inline(client, uri, end_of(PROMPT + "x" * n))) == K
        save(client, uri)
    stats = await command(client, "superposed.stats")
    indexed = await command(client, "superposed.indexWorkspace")
    assert "Traceback" not in json.dumps(stats) + json.dumps(indexed)
    assert all("error" in r for r in indexed["indexed"]), indexed
    return stats


def make_store(path: Path, tokenizer: Any) -> None:
    """A valid store for the server's tokenizer, with enough pages to damage."""
    with NgramStore.open(path, tokenizer) as store:
        store.update_file("/elsewhere/a.py", SAMPLE * 200)
        store.checkpoint()


# ----- items 4, 5, 7, 12: what a save teaches ---------------------------------------------


async def test_saves_are_filtered_as_index_repo_filters(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "shadow").write_text("root:$6$saltsalt$hash:19000:0:99999:7:::\n")
    (workspace / "link_to_shadow").symlink_to(outside / "shadow")
    (workspace / ".gitignore").write_text("local_settings.py\n")
    skipped = {
        ".env": "API_TOKEN=abc\n",
        "id_rsa": "anything\n",
        "server.pem": "anything\n",
        ".aws/credentials": "[default]\n",
        "node_modules/pkg/index.js": "module.exports = 1\n",
        "local_settings.py": "PASSWORD = 'x'\n",
        "notes.txt": "deploy key:\n" + PEM,
        "config.py": 'KEY = "AKIAIOSFODNN7EXAMPLE"\n',
        "big.py": "x = 1\n" * 4_000,  # 24 KB, over maxFileBytes
    }
    options = {"k": K, "maxNewTokens": 4, "maxFileBytes": 20_000}
    async with session(workspace, options) as client:
        for rel, text in skipped.items():
            (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
            (workspace / rel).write_text(text)
            save(client, open_doc(client, workspace / rel, text))
        save(client, open_doc(client, workspace / "link_to_shadow", "root:$6$"))
        dotted = f"file://{workspace}/../outside/shadow"
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=dotted, language_id="plaintext", version=1, text="root:$6$"
                )
            )
        )
        save(client, dotted)
        save(client, open_doc(client, outside / "shadow", "root:$6$"))  # not in any folder
        save(client, open_doc(client, workspace / "app.py", SAMPLE))
        stats = await wait_for_counter(client, "saves_skipped", len(skipped) + 3)
        stats = await wait_for_counter(client, "saves_indexed", 1)
        assert stats["counters"]["saves_skipped"] == len(skipped) + 3
        (codebase,) = stats["stores"]["codebase"].values()
        assert codebase["files"] == 1 and stats["stores"]["user"]["files"] == 1
        assert stats["settings"]["maxFileBytes"] == 20_000


# ----- item 16: saves before the model is ready; item 6: forgetting -------------------------


async def test_saves_before_the_model_is_ready_are_learned_then_forgotten(
    workspace: Path,
) -> None:
    options = {"k": K, "maxNewTokens": 4}
    async with session(workspace, options, wait_ready=False, load_delay_s=3) as client:
        first = open_doc(client, workspace / "app.py", SAMPLE)
        save(client, first)
        (workspace / "other.py").write_text("def other():\n    return 2\n")
        save(client, open_doc(client, workspace / "other.py", "def other():\n    return 2\n"))
        assert (await command(client, "superposed.stats"))["ready"] is False
        await wait_until_ready(client)
        stats = await wait_for_counter(client, "saves_indexed", 2)
        (codebase,) = stats["stores"]["codebase"].values()
        assert codebase["files"] == 2 and stats["stores"]["user"]["files"] == 2

        forgot = await command(client, "superposed.forget", {"path": str(workspace / "app.py")})
        assert sorted(forgot["removed"].values()) == [1, 1]  # user and codebase stores
        stats = await command(client, "superposed.stats")
        (codebase,) = stats["stores"]["codebase"].values()
        assert codebase["files"] == 1 and stats["stores"]["user"]["files"] == 1
        cleared = await command(client, "superposed.forget")
        assert list(cleared["removed"].values()) == [1]
        stats = await command(client, "superposed.stats")
        assert stats["stores"]["user"]["files"] == 0 and stats["stores"]["user"]["tokens"] == 0


# ----- items 8-10: stores that cannot be used ------------------------------------------------


async def test_store_folders_that_cannot_be_created(workspace: Path) -> None:
    options = {
        "k": K,
        "maxNewTokens": 4,
        "codebaseDb": "/dev/null/superposed/codebase.sqlite",
        "userDb": "/dev/null/superposed/user.sqlite",
    }
    async with session(workspace, options) as client:
        stats = await serves_and_answers(client, workspace)
        messages = store_messages(client)
        # one per problem (both stores share the folder), not one per request or save
        assert len(messages) == 1, messages
        assert "cannot create the folder /dev/null/superposed" in messages[0]
        assert "superposed.userDb" in messages[0]  # what to change
        assert "cannot create" in stats["stores"]["user"]["error"]


async def test_damaged_and_foreign_stores(workspace: Path, tmp_path: Path, tokenizer: Any) -> None:
    damaged = tmp_path / "damaged.sqlite"
    make_store(damaged, tokenizer)
    with damaged.open("r+b") as f:  # header and schema intact, the tables' pages garbage
        size = f.seek(0, os.SEEK_END)
        f.seek(3 * 4096)
        f.write(b"\xa5" * (size - 3 * 4096))
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as other:
        other.execute("CREATE TABLE bookmarks (url TEXT)")
    before = {p: p.read_bytes() for p in (damaged, foreign)}
    options = {"k": K, "maxNewTokens": 4, "codebaseDb": str(damaged), "userDb": str(foreign)}
    async with session(workspace, options) as client:
        stats = await serves_and_answers(client, workspace)
        messages = store_messages(client)
        assert len(messages) == 2, messages
        (damaged_message,) = [m for m in messages if str(damaged) in m]
        assert "damaged" in damaged_message and "--rebuild" in damaged_message
        (foreign_message,) = [m for m in messages if str(foreign) in m]
        assert "not an n-gram store" in foreign_message
        (codebase,) = stats["stores"]["codebase"].values()
        assert "damaged" in codebase["error"]
        assert "not an n-gram store" in stats["stores"]["user"]["error"]
    assert {p: p.read_bytes() for p in before} == before  # never overwritten


async def test_random_bytes_and_a_directory(workspace: Path, tmp_path: Path) -> None:
    noise = tmp_path / "noise.sqlite"
    noise.write_bytes(bytes(range(256)) * 64)
    folder = tmp_path / "folder.sqlite"
    folder.mkdir()
    options = {"k": K, "maxNewTokens": 4, "codebaseDb": str(noise), "userDb": str(folder)}
    async with session(workspace, options) as client:
        stats = await serves_and_answers(client, workspace)
        messages = store_messages(client)
        assert len(messages) == 2, messages
        assert any("directory" in m for m in messages)
        assert "directory" in stats["stores"]["user"]["error"]
    assert noise.read_bytes() == bytes(range(256)) * 64


async def test_a_valid_store_in_a_read_only_folder(
    workspace: Path, tmp_path: Path, tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "readonly"
    folder.mkdir()
    make_store(folder / "user.sqlite", tokenizer)
    folder.chmod(0o555)
    if os.geteuid() == 0:  # root ignores permissions: run the server as an unmapped user
        if shutil.which("unshare") is None:
            pytest.skip("root without unshare")
        wrapper = tmp_path / "python-unprivileged"
        wrapper.write_text(f'#!/bin/sh\nexec unshare -U {sys.executable} "$@"\n')
        wrapper.chmod(0o755)
        monkeypatch.setattr(sys, "executable", str(wrapper))
    options = {"k": K, "maxNewTokens": 4, "userDb": str(folder / "user.sqlite")}
    try:
        async with session(workspace, options) as client:
            for n in range(2):
                uri = open_doc(client, workspace / f"use_{n}.py", PROMPT)
                assert len(await inline(client, uri, end_of(PROMPT))) == K
                save(client, uri)
            await wait_for_counter(client, "saves_indexed", 2)  # the codebase store learns
            stats = await command(client, "superposed.stats")
            messages = store_messages(client)
    finally:
        folder.chmod(0o755)
    assert len(messages) == 1, messages
    assert "writable" in messages[0] and "not a usable n-gram store" not in messages[0]
    assert "writable" in stats["stores"]["user"]["error"]


# ----- item 11: another writer holds the lock -------------------------------------------------


async def test_saves_and_accepts_survive_a_long_lock(workspace: Path, tmp_path: Path) -> None:
    codebase_db, user_db = tmp_path / "cb.sqlite", tmp_path / "user.sqlite"
    options = {
        "k": K,
        "maxNewTokens": 4,
        "codebaseDb": str(codebase_db),
        "userDb": str(user_db),
    }
    async with session(workspace, options, SUPERPOSED_BUSY_TIMEOUT_MS="300") as client:
        save(client, open_doc(client, workspace / "app.py", SAMPLE))
        await wait_for_counter(client, "saves_indexed", 1)
        holders = [sqlite3.connect(p, isolation_level=None) for p in (codebase_db, user_db)]
        for holder in holders:
            holder.execute("BEGIN IMMEDIATE")  # another writer, for longer than the timeout
        try:
            (workspace / "later.py").write_text("def later():\n    return 3\n")
            save(client, open_doc(client, workspace / "later.py", "def later():\n    return 3\n"))
            uri = open_doc(client, workspace / "typing.py", PROMPT)
            assert len(await inline(client, uri, end_of(PROMPT))) == K  # reads do not wait
            accepted = await command(
                client, "superposed.accept", {"uri": uri, "context": "", "text": "return 42"}
            )
            assert accepted == {"learned": True, "queued": True}  # answered, not blocked
            await asyncio.sleep(2)  # several busy timeouts
            stats = await command(client, "superposed.stats")
            assert stats["counters"]["saves_indexed"] == 1  # waiting, not lost
        finally:
            for holder in holders:
                holder.rollback()
                holder.close()
        stats = await wait_for_counter(client, "saves_indexed", 2)
        (codebase,) = stats["stores"]["codebase"].values()
        assert codebase["files"] == 2
        for _ in range(50):  # the accepted draft lands after the save
            user = (await command(client, "superposed.stats"))["stores"]["user"]
            if user["files"] == 3:
                break
            await asyncio.sleep(0.1)
        assert user["files"] == 3


async def test_a_save_held_back_by_a_lock_is_written_before_exit(
    workspace: Path, tmp_path: Path
) -> None:
    codebase_db, user_db = tmp_path / "cb.sqlite", tmp_path / "user.sqlite"
    options = {"k": K, "codebaseDb": str(codebase_db), "userDb": str(user_db)}
    holders: list[sqlite3.Connection] = []
    async with session(workspace, options, SUPERPOSED_BUSY_TIMEOUT_MS="300") as client:
        save(client, open_doc(client, workspace / "app.py", SAMPLE))
        await wait_for_counter(client, "saves_indexed", 1)
        for path in (codebase_db, user_db):
            holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            holder.execute("BEGIN IMMEDIATE")
            holders.append(holder)
        (workspace / "last.py").write_text("def last():\n    return 4\n")
        save(client, open_doc(client, workspace / "last.py", "def last():\n    return 4\n"))
        await asyncio.sleep(0.5)  # the write met the lock and waits to be retried

        def release() -> None:
            for holder in holders:
                holder.rollback()
                holder.close()

        asyncio.get_running_loop().call_later(1.5, release)  # while the server shuts down
    for path in (codebase_db, user_db):
        with sqlite3.connect(path) as check:
            assert check.execute("SELECT count(*) FROM files").fetchone()[0] == 2, path
