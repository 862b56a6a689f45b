"""Next edits in a real VS Code (code-server in headless Chromium, driven by
vscode-extension/e2e/nextEdits.mjs).

A file calls ``get_user`` three times; the user renames it to ``fetch_user`` at its definition.
After the change ends, the server's ``superposed/nextEditsReady`` reaches the extension: the
next call gets the gutter mark and the "Tab to jump" hint; Tab moves the cursor there, where
the old name shows struck through with the new one beside it; Tab accepts (the file as saved
has the new name there); Superposed: List Next Edits lists what is still pending; Tab goes to
the next one and Esc there dismisses it, and its mark goes. An edit that only inserts (an
argument added) shows its text after the site instead. The server is the real one (with the
tiny model: next edits need none), so this also checks the protocol between them.

Nothing is installed here: `make editors` (scripts/setup-editors.sh) does that.
SUPERPOSED_UPDATE_DOCS=1 copies the screenshot of the preview to docs/images/ for the README.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

from tests.e2e.next_edits_cases import INSERT_SOURCE, SOURCE
from tests.e2e.nvim_harness import tiny_model_env
from tests.e2e.vscode_harness import (
    OUTPUT,
    ROOT,
    code_server,
    extension_lines,
    require_tools,
    run_driver,
)

pytestmark = [pytest.mark.editor, pytest.mark.slow]

TIMEOUT_S = 420
RENAMED = SOURCE.replace("def get_user", "def fetch_user")
# 1-based, as Go to Line takes it: the definition's name.
RENAME_AT = {"line": 1, "column": 5}
# 1-based lines where get_user stands after the rename: the calls.
SITES = {6, 10, 14}
SCREENSHOT = OUTPUT / "vscode-next-edits.png"
DOCS_SCREENSHOT = ROOT / "docs" / "images" / "next-edits-vscode.png"


def tiny_python(tmp_path: Path) -> Path:
    """An executable the extension runs as its interpreter: this one, with the tiny model."""
    env = " ".join(f"{key}='{value}'" for key, value in tiny_model_env(tmp_path).items())
    script = tmp_path / "python-tiny"
    script.write_text(
        f"#!/bin/sh\nexport {env}\n"
        f"exec '{sys.executable}' \"$@\" -v --log-file '{tmp_path / 'server.log'}'\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_next_edit_marked_jumped_to_accepted_listed_and_dismissed(tmp_path: Path) -> None:
    require_tools()
    settings = {
        "superposed.pythonPath": str(tiny_python(tmp_path)),
        "superposed.trigger": "manual",  # no ghost text as the rename is typed: Tab is ours
        "superposed.nextEdits": True,
        "superposed.nextEditsScope": "file",
    }
    with code_server(tmp_path, {"users.py": SOURCE}, settings) as session:
        path = session.workspace / "users.py"
        result = run_driver(
            "nextEdits.mjs",
            session,
            tmp_path,
            {
                "file": "users.py",
                "filePath": str(path),
                "renameAt": RENAME_AT,
                "oldName": "get_user",
                "newName": "fetch_user",
                "timeoutMs": 240_000,
                "screenshot": str(SCREENSHOT),
            },
            TIMEOUT_S,
        )
        log = extension_lines(session.user_data)

    # The rename went in where it was typed, and the notification came after it.
    assert any("next edits ready" in line and "fetch_user" in line for line in log), log[-20:]
    # One gutter mark, at another site of the old name, with the hint after its line.
    marks = result["beforeJump"]["marks"]
    assert len(marks) == 1 and marks[0] in SITES, result["beforeJump"]
    hints = [a for a in result["beforeJump"]["after"] if "Tab to jump" in a["text"]]
    assert [hint["line"] for hint in hints] == marks
    assert "fetch_user" in hints[0]["text"]
    assert result["beforeJump"]["struck"] == []  # no preview away from the site

    # Tab put the cursor at the start of the old name at that call.
    site = marks[0]
    line_text = SOURCE.splitlines()[site - 1]
    assert result["cursorAtSite"] == {"line": site, "column": line_text.index("get_user") + 1}
    # There, the old name struck through, the new one beside it, the hint saying Tab accepts.
    at_site = result["atSite"]
    assert at_site["struck"] == [{"line": site, "text": "get_user"}]
    assert {"line": site, "text": "fetch_user"} in at_site["after"]
    assert any(a["line"] == site and "Tab to accept" in a["text"] for a in at_site["after"])

    # Tab accepted: the saved file has the new name at both calls, the cursor after it.
    expected = RENAMED.splitlines()
    expected[site - 1] = expected[site - 1].replace("get_user", "fetch_user")
    assert result["afterAccept"].splitlines() == expected
    assert result["cursorAfterAccept"] == {
        "line": site,
        "column": line_text.index("get_user") + len("fetch_user") + 1,
    }
    assert any("next edit accepted" in line for line in log)
    assert not any("superposed.nextEditAccepted failed" in line for line in log), log[-20:]

    # After the accept, the mark went on to one of the sites left; the list showed them.
    left = SITES - {site}
    assert result["nextShown"]["marks"][0] in left, result["nextShown"]
    listed = result["listed"]
    assert listed and all("fetch_user" in row["label"] for row in listed), listed
    assert {int(row["description"].split(":")[1]) for row in listed} <= left, listed
    assert any(f"users.py:{result['nextShown']['marks'][0]}:" in r["description"] for r in listed)
    assert result["afterList"]["marks"] == result["nextShown"]["marks"]  # closing it kept it

    # Tab went to it, and Esc there dismissed it: its mark went, and stayed gone; the file
    # kept its text.
    dismissed = result["nextShown"]["marks"][0]
    assert result["cursorAtNext"]["line"] == dismissed
    assert dismissed not in result["afterDismiss"]["marks"]
    assert dismissed not in result["afterDismissLater"]["marks"]
    assert result["finalText"] == result["afterAccept"]
    assert any("next edit dismissed" in line for line in log)
    assert not any("superposed.nextEditDismissed failed" in line for line in log), log[-20:]
    if os.environ.get("SUPERPOSED_UPDATE_DOCS"):
        shutil.copy(SCREENSHOT, DOCS_SCREENSHOT)


TYPED = ", None"


def test_an_insert_shows_after_its_site_and_is_accepted(tmp_path: Path) -> None:
    """An edit that only inserts (an argument added) shows its text after the site, with
    nothing struck through, and Tab puts it in."""
    require_tools()
    settings = {
        "superposed.pythonPath": str(tiny_python(tmp_path)),
        "superposed.trigger": "manual",
        "superposed.nextEdits": True,
        "superposed.nextEditsScope": "file",
    }
    with code_server(tmp_path, {"db.py": INSERT_SOURCE}, settings) as session:
        path = session.workspace / "db.py"
        line = INSERT_SOURCE.splitlines()[1]
        result = run_driver(
            "nextEditsInsert.mjs",
            session,
            tmp_path,
            {
                "file": "db.py",
                "filePath": str(path),
                "typeAt": {"line": 2, "column": line.index(")") + 1},  # before the ")"
                "typed": TYPED,
                "timeoutMs": 240_000,
            },
            TIMEOUT_S,
        )
    assert result["beforeJump"]["marks"] == [6], result["beforeJump"]
    site = INSERT_SOURCE.splitlines()[5]
    assert result["cursorAtSite"] == {"line": 6, "column": site.index(")") + 1}
    assert result["atSite"]["struck"] == []
    assert {"line": 6, "text": TYPED} in result["atSite"]["after"]
    expected = INSERT_SOURCE.replace("get(uid)", "get(uid, None)")
    assert result["afterAccept"] == expected
