"""End-to-end: the server under issue 21's faults, over stdio with the tiny model.

Saves made while the model loads reach the stores before a quick quit (item 6), and a
settings change right after a save neither switches a store off nor loses the save (item 2).
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from lsprotocol import types

from tests.e2e.lsp_harness import (
    SAMPLE,
    K,
    command,
    open_doc,
    session,
    shut_down,
    wait_for_counter,
)
from tests.e2e.test_lsp_stores import save, store_messages

pytestmark = pytest.mark.slow  # every test starts the server over stdio


def stored_paths(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return sorted(p for (p,) in db.execute("SELECT path FROM files"))


async def test_a_save_while_the_model_loads_is_kept_when_the_editor_quits_at_once(
    workspace: Path, tmp_path: Path
) -> None:
    codebase_db = tmp_path / "cb.sqlite"
    options = {"k": K, "codebaseDb": str(codebase_db), "userStore": False}
    # The model takes 30 s to load; the editor saves and quits long before that (the harness
    # kills a server still running 5 s after exit).
    async with session(workspace, options, wait_ready=False, load_delay_s=30) as client:
        (workspace / "app.py").write_text(SAMPLE)
        save(client, open_doc(client, workspace / "app.py", SAMPLE))
        stats = await command(client, "superposed.stats")
        assert stats["ready"] is False
        await shut_down(client)  # an editor kills the server soon after this answer
        assert stored_paths(codebase_db) == [str((workspace / "app.py").resolve())]


async def test_a_settings_change_right_after_a_save_keeps_the_store_and_the_save(
    workspace: Path, tmp_path: Path
) -> None:
    codebase_db, user_db = tmp_path / "cb.sqlite", tmp_path / "user.sqlite"
    options = {"k": K, "codebaseDb": str(codebase_db), "userDb": str(user_db)}
    async with session(workspace, options) as client:
        for n in range(5):  # each save followed at once by a weight change, as in the report
            text = f"def f{n}():\n    return {n}\n"
            (workspace / f"m{n}.py").write_text(text)
            save(client, open_doc(client, workspace / f"m{n}.py", text))
            weight = {"superposed": {**options, "userWeight": (30 + n) / 100}}
            client.workspace_did_change_configuration(
                types.DidChangeConfigurationParams(settings=weight)
            )
            await asyncio.sleep(0.05 * n)
        stats = await wait_for_counter(client, "saves_indexed", 5)
        assert stats["settings"]["userWeight"] == 0.34
        assert store_messages(client) == []  # no "not a usable n-gram store", no rebuild advice
    expected = sorted(str((workspace / f"m{n}.py").resolve()) for n in range(5))
    assert stored_paths(codebase_db) == expected and stored_paths(user_db) == expected
