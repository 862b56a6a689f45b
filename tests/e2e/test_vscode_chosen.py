"""The draft you chose stays chosen (issue 52 item 3), in a real VS Code (code-server in
headless Chromium, driven by vscode-extension/e2e/chosen.mjs).

After ``return `` the server answers three fixed drafts, the first and third beginning with the
same word (tests/e2e/hooked_server.py ``--drafts``, the tiny model elsewhere). The user cycles
to the third (Alt+] twice) and takes its first word (Ctrl+Right): the ghost text then goes on
with the third draft. Before, it went back to the first: the server's typing cache answers what
is left of the drafts in rank order, and VS Code shows the first item of a new answer.

Nothing is installed here: `make editors` (scripts/setup-editors.sh) does that.
SUPERPOSED_UPDATE_DOCS=1 copies the screenshot (status bar and ghost text) to docs/images/.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.e2e.test_vscode_blocks import hooked_python
from tests.e2e.vscode_harness import OUTPUT, ROOT, code_server, require_tools, run_driver

pytestmark = pytest.mark.editor

TIMEOUT_S = 420
SOURCE = """class Rectangle:
    def __init__(self, width, height):
        self.width = width
        self.height = height

    def perimeter(self):
"""
TYPED = "        return "
DRAFTS = ["self.width + self.height", "None", "self.height * 2"]
SCREENSHOT = OUTPUT / "vscode-chosen-draft.png"
DOCS_SCREENSHOT = ROOT / "docs" / "images" / "vscode-status-and-ghost-text.png"


def test_the_chosen_draft_stays_chosen_after_a_word_accept(tmp_path: Path) -> None:
    require_tools()
    python = hooked_python(tmp_path, [{"after": TYPED, "drafts": DRAFTS}])
    settings = {
        "superposed.pythonPath": str(python),
        "editor.inlineSuggest.showToolbar": "always",  # "3/3" in the screenshot
    }
    with code_server(tmp_path, {"shapes.py": SOURCE}, settings) as session:
        result = run_driver(
            "chosen.mjs",
            session,
            tmp_path,
            {
                "file": "shapes.py",
                "type": TYPED,
                "cycles": 2,
                "timeoutMs": 240_000,
                "screenshot": str(SCREENSHOT),
            },
            TIMEOUT_S,
        )
    assert result["ghosts"] == DRAFTS, result
    # The word of the third draft went in, and the ghost text goes on with the third draft.
    line = result["lineAfterWord"].rstrip()
    accepted = line.removeprefix(TYPED)
    assert accepted and DRAFTS[2].startswith(accepted), line
    assert result["ghostAfterWord"] == DRAFTS[2].removeprefix(accepted), result
    if os.environ.get("SUPERPOSED_UPDATE_DOCS"):
        shutil.copy(SCREENSHOT, DOCS_SCREENSHOT)
