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
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.vscode_harness import (
    Session,
    code_server,
    extension_lines,
    require_tools,
    run_driver,
    server_python,
)

pytestmark = pytest.mark.editor

TIMEOUT_S = 420
SOURCE = "def area(width, height):\n    return width * height\n"
FILES = {"geometry.py": SOURCE}
# What the driver waits for: a status that is past starting and loading.
SETTLED = r"Superposed: (?!starting|loading|indexing)"
# The crash storm of a server that cannot start (vscode-languageclient's own messages).
STORM = ("-32097", "crashed", "Client is not running", "Pending response rejected")


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
    config = {"steps": steps, "timeoutMs": 240_000, "logs": str(session.user_data / "logs")}
    return run_driver("setup.mjs", session, tmp_path, config, TIMEOUT_S)


def said(result: dict[str, Any], text: str) -> list[str]:
    """The messages shown that hold ``text``."""
    return [message for message in result["messages"] if text in message]


def storm(result: dict[str, Any]) -> list[str]:
    return [message for message in result["messages"] if any(s in message for s in STORM)]


def test_python_path_in_user_settings_survives_a_settings_change_and_restart(
    tmp_path: Path,
) -> None:
    require_tools()
    python = server_python(tmp_path, "--load-delay", "3", stderr=True)
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
                {"do": "command", "title": "Superposed: Index Workspace"},
                {"do": "toast", "pattern": "workspace indexed"},
                # The status bar item's click: the state in words and every counter
                {"do": "command", "title": "Superposed: Show Details"},
                {"do": "editorText", "tab": "Superposed details", "as": "details"},
            ],
        )
        assert "ready" in result["first"], result
        assert "ready" in result["second"], result
        assert started_with(session) == [str(python), str(python)]
        assert not storm(result)
        assert said(result, "workspace indexed (1 folder).")  # not "(1 folder(s))"
        details = result["details"]
        assert details.startswith("# Superposed: ready (tiny-random, k=3)"), details
        assert "\nready: true\n" in details and "\nsettings." in details, details
        # The server's log lines (stderr, -v) are in the Output panel at their own level: an
        # INFO line is [info], not [error] (item 10)
        lines = extension_lines(session.user_data)
        logged = [line for line in lines if re.search(r"\d,\d+ (DEBUG|INFO|WARNING) ", line)]
        assert [line for line in logged if " INFO lsp_server" in line], lines
        assert all("[info]" in line or "[warning]" in line for line in logged), logged


def test_missing_interpreter_said_once_and_fixed_by_the_setting(tmp_path: Path) -> None:
    require_tools()
    missing = tmp_path / "no-such-python"
    python = server_python(tmp_path, "--load-delay", "3")
    with code_server(tmp_path, FILES, {"superposed.pythonPath": str(missing)}) as session:
        fixed = {**json.loads((session.user_data / "User" / "settings.json").read_text())}
        fixed["superposed.pythonPath"] = str(python)
        result = drive(
            session,
            tmp_path,
            [
                {"do": "open", "file": "geometry.py"},
                {"do": "status", "pattern": SETTLED, "as": "missing"},
                {"do": "toast", "pattern": "superposed.pythonPath"},
                # The user corrects the setting (in Machine/, which a remote window reads; the
                # User file is the first test's): the server starts, no reload, no command.
                {
                    "do": "settings",
                    "path": str(session.user_data / "Machine" / "settings.json"),
                    "settings": fixed,
                },
                {"do": "status", "pattern": "Superposed: loading", "as": "reloading"},
                {"do": "status", "pattern": SETTLED, "as": "fixed"},
                # Restart Server from a running server
                {"do": "command", "title": "Superposed: Restart Server"},
                {"do": "log", "pattern": "starting: ", "count": 2},
                {"do": "status", "pattern": SETTLED, "as": "restarted"},
            ],
        )
    assert result["missing"] == "Superposed: Python not found"
    told = said(result, "does not exist")
    assert len(told) == 1, result["messages"]
    assert str(missing) in told[0] and "superposed.pythonPath" in told[0]
    assert not storm(result), result["messages"]
    assert "ready" in result["fixed"] and "ready" in result["restarted"]
    assert started_with(session) == [str(python), str(python)]


def test_interpreter_without_the_package_said_once_and_restart_from_there(
    tmp_path: Path,
) -> None:
    require_tools()
    bare = tmp_path / "bare"  # a Python without superposed-lsp
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = bare / "bin" / "python"
    with code_server(tmp_path, FILES, {"superposed.pythonPath": str(python)}) as session:
        result = drive(
            session,
            tmp_path,
            [
                {"do": "open", "file": "geometry.py"},
                {"do": "status", "pattern": SETTLED, "as": "bare"},
                # Restart Server where the server never started: the check runs again
                {"do": "command", "title": "Superposed: Restart Server"},
                {"do": "log", "pattern": "has no superposed-lsp", "count": 2},
                {"do": "status", "pattern": SETTLED, "as": "again"},
            ],
        )
    assert result["bare"] == "Superposed: superposed-lsp not installed"
    assert result["again"] == result["bare"]
    told = said(result, "has no superposed-lsp")
    assert told, result["messages"]
    assert all("make setup" in m and "superposed.pythonPath" in m for m in told), told
    assert "No module named 'lsp_server'" in told[0]
    assert not storm(result), result["messages"]
    assert started_with(session) == []  # no server process, so no crash loop


def test_loading_in_one_status_item_then_the_load_error_said_once(tmp_path: Path) -> None:
    require_tools()
    error = "the model nowhere/model cannot load: set superposed.model to a model you have"
    hooks = ("--load-progress", "40", "--load-delay", "4", "--load-error", f"'{error}'")
    python = server_python(tmp_path, *hooks)
    with code_server(tmp_path, FILES, {"superposed.pythonPath": str(python)}) as session:
        result = drive(
            session,
            tmp_path,
            [
                {"do": "open", "file": "geometry.py"},
                {"do": "status", "pattern": "Superposed: loading model 40%", "as": "loading"},
                {"do": "loadingItems", "as": "loadingItems"},
                {"do": "status", "pattern": SETTLED, "as": "failed"},
                {"do": "toast", "pattern": "cannot load"},
            ],
        )
    # The load's progress (the server's superposed/status, as $/progress says it) in one item
    assert result["loading"] == "Superposed: loading model 40%"
    assert result["loadingItems"] == ["Superposed: loading model 40%"]  # not two items
    assert result["failed"] == "Superposed: the model did not load"
    assert len(said(result, error)) == 1, result["messages"]
    assert not storm(result), result["messages"]


def test_a_server_that_keeps_stopping_is_restarted_twice_then_said_once(tmp_path: Path) -> None:
    require_tools()
    python = server_python(tmp_path, "--exit-after-load", "2")  # each run exits once loaded
    with code_server(tmp_path, FILES, {"superposed.pythonPath": str(python)}) as session:
        result = drive(
            session,
            tmp_path,
            [
                {"do": "open", "file": "geometry.py"},
                {"do": "status", "pattern": "Superposed: ready", "as": "ready"},
                {"do": "status", "pattern": "Superposed: server stopped", "as": "stopped"},
                {"do": "toast", "pattern": "The server stopped"},
            ],
        )
    assert "ready" in result["ready"]
    # The first start and two restarts, then one message; not the client's five restarts and
    # its "crashed 5 times" storm
    restarts = [line for line in extension_lines(session.user_data) if "restarting it" in line]
    assert len(restarts) == 2, restarts
    assert len(said(result, "The server stopped")) == 1, result["messages"]
    assert not storm(result), result["messages"]
