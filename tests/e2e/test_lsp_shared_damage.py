"""End-to-end: shared indexes that used to kill or freeze the server (issue 34, item 2), over
stdio with the tiny model.

An intact index under a path holding ``table`` (SIGSEGV at the first request), one whose
manifest is a FIFO (every request and shutdown hung) and one with a truncated tokenized.0
(SIGSEGV): the server answers, says what is wrong with the two damaged ones, and when the
intact one's files are truncated under it (SIGBUS), says so once and keeps answering.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from ngram_db.infini import MANIFEST, SHARDS, build_index
from superposed.embedded import DEFAULT_MODEL
from superposed.tokenizer import load_tokenizer
from tests.e2e.lsp_harness import SAMPLE, K, end_of, inline, open_doc, session, shut_down

pytestmark = pytest.mark.slow  # builds an index with infini-gram's indexer; starts the server


def _indexes(base: Path) -> tuple[Path, Path, Path]:
    """(intact under .../stable/..., FIFO manifest, truncated tokenized.0)."""
    repo = base / "org" / "org-lib"
    repo.mkdir(parents=True)
    (repo / "config.py").write_text(SAMPLE)
    intact = base / "srv" / "stable" / "org"
    build_index(intact, [repo], load_tokenizer(DEFAULT_MODEL), DEFAULT_MODEL, cpus=1, mem_gib=1)
    fifo = Path(shutil.copytree(intact, base / "fifo"))
    (fifo / MANIFEST).unlink()
    os.mkfifo(fifo / MANIFEST)
    truncated = Path(shutil.copytree(intact, base / "truncated"))
    tokenized = truncated / SHARDS / "org-lib" / "tokenized.0"
    os.truncate(tokenized, tokenized.stat().st_size // 2)
    return intact, fifo, truncated


async def _messages(client: object, *words: str, timeout: float = 20) -> list[str]:
    """The window messages holding all ``words``, once there is one (or after ``timeout``)."""
    for _ in range(int(timeout / 0.1)):
        found = [m.message for m in client.messages if all(w in m.message for w in words)]  # type: ignore[attr-defined]
        if found:
            return found
        await asyncio.sleep(0.1)
    return []


async def test_damaged_shared_indexes_are_reported_and_the_server_keeps_answering(
    workspace: Path, tmp_path: Path
) -> None:
    intact, fifo, truncated = _indexes(tmp_path / "indexes")
    options = {
        "k": K,
        "userStore": False,
        "sharedIndexes": [str(intact), str(fifo), str(truncated)],
    }
    async with session(workspace, options) as client:
        prompt = SAMPLE.split("    return")[0]
        uri = open_doc(client, workspace / "use.py", prompt)
        assert len(await asyncio.wait_for(inline(client, uri, end_of(prompt)), 60)) == K
        assert await _messages(client, str(fifo), "not a regular file")
        assert await _messages(client, "tokenized.0", "truncated")
        for name in ("tokenized.0", "table.0"):  # a sync tool rewrites the mapped shard
            os.truncate(intact / SHARDS / "org-lib" / name, 0)
        for n in range(3):
            text = prompt + "x" * (n + 1)
            uri = open_doc(client, workspace / f"use_{n}.py", text)
            assert len(await asyncio.wait_for(inline(client, uri, end_of(text)), 60)) == K
        crashed = await _messages(client, "SIGBUS")
        assert len(crashed) == 1 and str(intact) in crashed[0]
        await asyncio.wait_for(shut_down(client), 20)  # shutdown answers
