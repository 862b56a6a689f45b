"""End-to-end: forgetting from the shell reaches a running server (issue 21, item 3).

The server over stdio (tiny random model, stores under tmp_path); ``index-repo`` as a real
process beside it, on the same codebase store. The tiny model never writes the distinctive
line by itself: a draft that is that line comes from the store's suffix index.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ngram_db.suffix_store import base_path
from tests.e2e.index_harness import run
from tests.e2e.lsp_harness import command, end_of, inline, open_doc, server_env, session

pytestmark = pytest.mark.slow  # starts the server and index-repo as processes

HEAD = "def frobnicate(widget):\n    return"
LINE = " widget.transmogrify(spline_count=42, reticulate=True)"
OPTIONS = {"k": 3, "maxNewTokens": 24, "userStore": False, "memory": True}


async def test_a_file_forgotten_from_the_shell_is_not_drafted_at_the_next_request(
    workspace: Path,
) -> None:
    saved = workspace / "saved.py"
    saved.write_text("import os\n\n\n" + HEAD + LINE + "\n\n\nprint(os.sep)\n")
    env = server_env(workspace.parent)
    indexed = await asyncio.to_thread(run, workspace, env=env)  # writes the suffix index too
    assert indexed.returncode == 0, indexed.stderr
    prompt = "x = 1\n\n\n" + HEAD
    async with session(workspace, OPTIONS) as client:
        assert LINE in await inline(
            client, open_doc(client, workspace / "b.py", prompt), end_of(prompt)
        )
        stats = await command(client, "superposed.stats")
        (store,) = [entry["path"] for entry in stats["stores"]["codebase"].values()]
        assert base_path(store).is_file()

        forgot = await asyncio.to_thread(run, saved, "--forget", "--db", store, env=env)
        assert forgot.returncode == 0 and "forgot 1 file" in forgot.stdout, forgot.stderr
        assert not base_path(store).exists()  # its suffix index held the file: deleted
        for n in range(3):  # at once, and still after the server refreshed its indexes
            uri = open_doc(client, workspace / f"c{n}.py", prompt)
            assert LINE not in await inline(client, uri, end_of(prompt))
            await asyncio.sleep(0.5)


async def ask_forget_ask(workspace: Path, forget: Any) -> None:
    """Drafts the line at a place, forgets its file (``forget(client, store, saved)``), and
    asks again at the same place: the drafts shown there must not come back typed along."""
    saved = workspace / "saved.py"
    saved.write_text("import os\n\n\n" + HEAD + LINE + "\n\n\nprint(os.sep)\n")
    env = server_env(workspace.parent)
    indexed = await asyncio.to_thread(run, workspace, env=env)
    assert indexed.returncode == 0, indexed.stderr
    prompt = "x = 1\n\n\n" + HEAD
    async with session(workspace, OPTIONS) as client:
        uri = open_doc(client, workspace / "b.py", prompt)
        assert LINE in await inline(client, uri, end_of(prompt))
        stats = await command(client, "superposed.stats")
        (store,) = [entry["path"] for entry in stats["stores"]["codebase"].values()]
        await forget(client, store, saved)
        assert LINE not in await inline(client, uri, end_of(prompt))  # the same place
        counters = (await command(client, "superposed.stats"))["counters"]
        assert counters.get("typed_along", 0) == 0 and counters["dropped_after_forget"] == 1


async def test_drafts_shown_before_a_forget_from_the_shell_are_not_shown_again(
    workspace: Path,
) -> None:
    """Issue 34, item 1: the typing-along cache answered the forgotten line (typed_along 1,
    no model call) after ``index-repo FILE --forget``."""

    async def forget(client: Any, store: str, saved: Path) -> None:
        env = server_env(workspace.parent)
        forgot = await asyncio.to_thread(run, saved, "--forget", "--db", store, env=env)
        assert forgot.returncode == 0 and "forgot 1 file" in forgot.stdout, forgot.stderr

    await ask_forget_ask(workspace, forget)


async def test_drafts_shown_before_the_editors_forget_are_not_shown_again(
    workspace: Path,
) -> None:
    async def forget(client: Any, store: str, saved: Path) -> None:
        result = await command(client, "superposed.forget", {"path": str(saved)})
        assert sum(result["removed"].values()) == 1, result

    await ask_forget_ask(workspace, forget)
