"""What a new user meets while setting up, in a real VS Code (code-server in headless Chromium,
driven by vscode-extension/e2e/setup.mjs): issue 52 items 1, 2 and 7.

- ``superposed.pythonPath`` in User settings only (README step 3), then a settings change as
  the Settings UI writes it and Superposed: Restart Server: the server comes back with the
  same interpreter (it used to start ``python3`` and crash-loop).
- An interpreter that does not exist, then one without the package: one message each, naming
  ``superposed.pythonPath`` (and ``make setup``), no crash storm; correcting the setting
  restarts the server, and Restart Server works from the failed state.
- A model that loads slowly, then fails: one status item says loading, then what is wrong.

The interpreter is a script that runs this checkout's server with the tiny model (and the test
hooks of tests/e2e/hooked_server.py), as ``superposed.pythonPath`` would run an installed one.
Nothing is installed here: `make editors` (scripts/setup-editors.sh) does that.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.nvim_harness import tiny_model_env
from tests.e2e.vscode_harness import (
    ROOT,
    Session,
    code_server,
    extension_lines,
    require_tools,
    run_driver,
)

pytestmark = pytest.mark.editor

TIMEOUT_S = 420
SOURCE = "def area(width, height):\n    return width * height\n"
FILES = {"geometry.py": SOURCE}
# What the driver waits for: a status that is past starting and loading.
SETTLED = r"Superposed: (?!starting|loading|indexing)"
# The crash storm of a server that cannot start (vscode-languageclient's own messages).
STORM = ("-32097", "crashed", "Client is not running", "Pending response rejected")


def server_python(tmp_path: Path, *hooks: str) -> Path:
    """An executable the extension runs as its interpreter: ``-m lsp_server.cli ARGS`` runs
    tests/e2e/hooked_server.py with ``hooks`` and the tiny model; anything else (the
    extension's check of the interpreter) runs this Python."""
    env = " ".join(f"{key}='{value}'" for key, value in tiny_model_env(tmp_path).items())
    script = tmp_path / "python-hooked"
    script.write_text(
        "#!/bin/sh\n"
        f"export {env}\n"
        f'[ "$1" = "-m" ] || exec \'{sys.executable}\' "$@"\n'
        "shift 2\n"
        f"exec '{sys.executable}' '{ROOT / 'tests' / 'e2e' / 'hooked_server.py'}'"
        f" {' '.join(hooks)} -- \"$@\" -v --log-file '{tmp_path / 'server.log'}'\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def user_settings(session: Session, tmp_path: Path, **settings: Any) -> dict[str, Any]:
    """A step that rewrites the User settings file with the session's settings and ``settings``
    (as the Settings UI does when a box is ticked)."""
    path = session.user_data / "User" / "settings.json"
    current = json.loads(path.read_text())
    return {"do": "settings", "path": str(path), "settings": {**current, **settings}}


def started_with(session: Session) -> list[str]:
    """The interpreter of each server start, from the extension's log."""
    return [
        line.split("starting: ", 1)[1].split(" -m ")[0]
        for line in extension_lines(session.user_data)
        if "starting: " in line
    ]


def drive(session: Session, tmp_path: Path, steps: list[dict[str, Any]]) -> dict[str, Any]:
    return run_driver(
        "setup.mjs", session, tmp_path, {"steps": steps, "timeoutMs": 240_000}, TIMEOUT_S
    )


def test_python_path_in_user_settings_survives_a_settings_change_and_restart(
    tmp_path: Path,
) -> None:
    require_tools()
    python = server_python(tmp_path, "--load-delay", "3")
    settings = {"superposed.pythonPath": str(python)}
    with code_server(tmp_path, FILES, settings, scopes=("User",)) as session:
        result = drive(
            session,
            tmp_path,
            [
                {"do": "open", "file": "geometry.py"},
                {"do": "status", "pattern": SETTLED, "as": "first"},
                user_settings(session, tmp_path, **{"superposed.maxNewTokens": 24}),
                {"do": "command", "title": "Superposed: Restart Server"},
                {"do": "status", "pattern": "Superposed: loading", "as": "reloading"},
                {"do": "status", "pattern": SETTLED, "as": "second"},
            ],
        )
        assert "ready" in result["first"], result
        assert "ready" in result["second"], result
        assert started_with(session) == [str(python), str(python)]
        assert not [m for m in result["messages"] if any(s in m for s in STORM)]

