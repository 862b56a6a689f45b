"""An answer cut at the server's deadline grows to the whole drafts without a keystroke
(issue 54 item 4), in a real VS Code (code-server in headless Chromium, driven by
vscode-extension/e2e/deadline.mjs).

The tiny model's steps are slowed (tests/e2e/hooked_server.py ``--step-delay``) and
``answerWithinMs`` is 1: the first answer holds a few tokens a draft; the server then decodes
them whole and says so (``superposed/draftsWhole``), and the extension asks again where the
cursor still stands.

Nothing is installed here: `make editors` (scripts/setup-editors.sh) does that.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.vscode_harness import (
    code_server,
    extension_lines,
    require_tools,
    run_driver,
    server_python,
)

pytestmark = pytest.mark.editor

TIMEOUT_S = 420
SOURCE = "def area(side):\n    return side * side\n\n\ndef perimeter(side):\n"
TYPED = "    return "


def test_a_cut_answer_grows_to_the_whole_drafts_without_a_keystroke(tmp_path: Path) -> None:
    require_tools()
    python = server_python(tmp_path, "--step-delay", "0.3")  # the rest: seconds
    settings = {
        "superposed.pythonPath": str(python),
        "superposed.answerWithinMs": 1,
        "superposed.maxNewTokens": 12,
        "superposed.memory": False,
        "superposed.wellFormed": False,
    }
    with code_server(tmp_path, {"shapes.py": SOURCE}, settings) as session:
        result = run_driver(
            "deadline.mjs",
            session,
            tmp_path,
            {"file": "shapes.py", "type": TYPED, "timeoutMs": 240_000},
            TIMEOUT_S,
        )
        lines = extension_lines(session.user_data)
    assert result["cut"] and result["whole"] != result["cut"], result
    assert len(result["whole"]) > len(result["cut"]), result
    # the cut drafts were shown, then the whole (every ghost text rendered since Alt+\)
    shown = result["ghostTexts"]
    assert result["cut"] in shown and result["whole"] in shown, result
    assert shown.index(result["cut"]) < shown.index(result["whole"]), result
    # one request decoded (cut), the second answered from the whole drafts, at the same place
    asked = [line for line in lines if "drafts at shapes.py:6:" in line]
    assert len(asked) >= 2, lines
    assert any("drafts whole at shapes.py:6:" in line for line in lines), lines
