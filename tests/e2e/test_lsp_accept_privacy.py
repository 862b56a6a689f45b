"""End-to-end: accepted drafts obey a save's "never learned" rules (issue 34, items 1 and 8).

The tiny model over stdio; ``superposed.accept`` with the arguments the VS Code extension and
the Neovim plugin send (``uri``, ``context``, ``text``, and ``position`` for a full accept).
The user store is read on disk after the server exits.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException
from pygls.uris import from_fs_path

from tests.e2e.lsp_harness import K, command, open_doc, session

pytestmark = pytest.mark.slow  # every test starts the server over stdio

# Built from parts, so that this file itself holds no secret a scan would find.
AWS_KEY = "AKIA" + "QWERTYUIOPASDFGH"
GITHUB_TOKEN = "ghp_" + "x7" * 18
PEM = "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n"
MAX_BYTES = 1_000  # the smallest maxFileBytes


def accept_argument(uri: str, text: str, context: str = "") -> dict[str, object]:
    """As an item's accept command carries it (lsp_server/completion/items.py, the editors send
    it)."""
    return {"uri": uri, "context": context, "text": text, "position": {"line": 0, "character": 0}}


async def test_accepts_learn_nothing_that_a_save_would_not(workspace: Path, tmp_path: Path) -> None:
    user_db = tmp_path / "user.sqlite"
    (workspace / ".gitignore").write_text("notes.py\n")
    outside = tmp_path / "elsewhere" / "tool.py"
    outside.parent.mkdir()
    app = from_fs_path(str(workspace / "app.py")) or ""
    refused = {
        "secret content": [
            (app, f'key = "{AWS_KEY}"'),
            (app, PEM),
            (app, f'token = "{GITHUB_TOKEN}"'),
        ],
        "secret": [(from_fs_path(str(workspace / ".env")) or "", "DB_HOST=db7.corp.internal")],
        "gitignored": [(from_fs_path(str(workspace / "notes.py")) or "", "host = 'db7'")],
        "outside the workspace": [(from_fs_path(str(outside)) or "", "host = 'db7'")],
        "too large": [(app, "value = 12345\n" * 200)],  # 2,800 bytes
    }
    options = {"k": K, "maxNewTokens": 4, "userDb": str(user_db), "maxFileBytes": MAX_BYTES}
    async with session(workspace, options) as client:
        for reason, pairs in refused.items():
            for uri, text in pairs:
                answer = await command(client, "superposed.accept", accept_argument(uri, text))
                assert answer == {"learned": False, "reason": reason}, (uri, text)
        learned = await command(client, "superposed.accept", accept_argument(app, "return 42"))
        assert learned == {"learned": True}
        stats = await command(client, "superposed.stats")
        assert stats["counters"]["accepts_skipped"] == 7
    with sqlite3.connect(user_db) as db:  # the server has exited: what is on disk
        rows = db.execute("SELECT path, tokens FROM files").fetchall()
    assert len(rows) == 1 and rows[0][0].startswith("accepted:")  # "return 42" only
    assert rows[0][1] < 10


@pytest.mark.parametrize(
    "position",
    [{"line": -1, "character": 0}, {"line": 0, "character": 2**62}, {"line": "0", "character": 0}],
)
async def test_an_accept_at_an_impossible_position_is_invalid_params(
    workspace: Path, position: dict[str, object]
) -> None:
    async with session(workspace, {"k": K, "maxNewTokens": 4}) as client:
        uri = open_doc(client, workspace / "app.py", "x = 1\n")
        argument = {"uri": uri, "context": "", "text": "y = 2", "position": position}
        with pytest.raises(JsonRpcException) as raised:
            await command(client, "superposed.accept", argument)
        assert raised.value.code == -32602, raised.value
        assert "position." in raised.value.message and "Traceback" not in raised.value.message
        # the server goes on: a well-formed accept still answers
        assert (await command(client, "superposed.stats"))["ready"]
