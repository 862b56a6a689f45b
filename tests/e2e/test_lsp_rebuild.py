"""End-to-end: ``index-repo --rebuild`` from the shell beside a running server (issue 34,
item 3). The rebuild deletes the store file and writes a new one; the server kept writing
to the deleted file, so a save it counted as indexed was missing from the store on disk."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types

from ngram_db import NgramStore
from ngram_db.cli import DEFAULT_MODEL, load_tokenizer
from tests.e2e.index_harness import run
from tests.e2e.lsp_harness import (
    SAMPLE,
    K,
    command,
    open_doc,
    server_env,
    session,
    wait_for_counter,
)

pytestmark = pytest.mark.slow  # starts the server and index-repo as processes


def save(client: object, uri: str) -> None:
    client.text_document_did_save(  # type: ignore[attr-defined]
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )


async def test_a_save_after_a_rebuild_from_the_shell_is_in_the_new_store(
    workspace: Path,
) -> None:
    env = server_env(workspace.parent)
    async with session(workspace, {"k": K, "maxNewTokens": 4, "userStore": False}) as client:
        save(client, open_doc(client, workspace / "app.py", SAMPLE))
        stats = await wait_for_counter(client, "saves_indexed", 1)
        (store,) = [entry["path"] for entry in stats["stores"]["codebase"].values()]
        rebuilt = await asyncio.to_thread(run, workspace, "--db", store, "--rebuild", env=env)
        assert rebuilt.returncode == 0, rebuilt.stderr
        later = workspace / "later.py"
        later.write_text("def after_the_rebuild():\n    return 7\n")
        save(client, open_doc(client, later, later.read_text()))
        stats = await wait_for_counter(client, "saves_indexed", 2)
        assert stats["writes"]["pending"] == 0
        (codebase,) = (await command(client, "superposed.stats"))["stores"]["codebase"].values()
        assert codebase["files"] == 2  # app.py (the rebuild's) and later.py (the save)
    with NgramStore.open(store, load_tokenizer(DEFAULT_MODEL)) as on_disk:
        assert str(later.resolve()) in on_disk.file_hashes()  # before the fix: missing
