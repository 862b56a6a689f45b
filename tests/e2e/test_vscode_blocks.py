"""Multi-line drafts (blocks) and Superposed: Show Drafts in a real VS Code (code-server in
headless Chromium, driven by vscode-extension/e2e/blocks.mjs).

The server is tests/e2e/hooked_server.py with fixed drafts (``--drafts``), run in place of the
interpreter the extension starts (``superposed.pythonPath``), with the tiny model: what is
tested is how VS Code shows and accepts a block, not what a model drafts. After the ``def``
line of a function whose twin is above it, the block is shown as ghost text and accepted one
line at a time (Ctrl+Alt+Right, Superposed: Accept Next Line of the Draft), each part reported
to the server's accept command as an inline accept is; after another ``def`` line, a block is
accepted whole (Tab); after a third, Ctrl+Alt+Enter (Superposed: Show Drafts) lists the k
drafts with their scores and the second one picked goes in.

Nothing is installed here: `make editors` (scripts/setup-editors.sh) does that.
SUPERPOSED_UPDATE_DOCS=1 copies the drafts view's screenshot to docs/images/ for the README.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.e2e.vscode_harness import (
    OUTPUT,
    ROOT,
    code_server,
    extension_lines,
    require_tools,
    run_driver,
    server_python,
)

pytestmark = pytest.mark.editor

TIMEOUT_S = 420
SOURCE = '''def area_of_rectangle(width, height):
    """The area of a width by height rectangle."""
    checked_width = max(width, 0)
    return checked_width * height


def perimeter_of_rectangle(width, height):'''
# The twin of area_of_rectangle's body, and two other drafts.
BLOCK = (
    '\n    """The perimeter of a width by height rectangle."""'
    "\n    checked_width = max(width, 0)"
    "\n    return 2 * (checked_width + height)"
)
BLOCK_DRAFTS = [BLOCK, "\n    return 2 * (width + height)", "\n    pass"]
TYPE_FOR_WHOLE = "\n\n\ndef area_of_square(side):"
WHOLE_DRAFTS = [
    '\n    """The area of a side by side square."""\n    return area_of_rectangle(side, side)',
    "\n    return side * side",
    "\n    return side ** 2",
]
TYPE_FOR_PICK = "\n\n\ndef volume_of_cube(side):"
PICK_DRAFTS = [
    "\n    return side ** 3",
    "\n    area = side * side\n    return area * side",
    "\n    return side * side * side",
]
PICK_SCREENSHOT = OUTPUT / "vscode-drafts.png"
DOCS_PICK_SCREENSHOT = ROOT / "docs" / "images" / "vscode-drafts.png"


def hooked_python(tmp_path: Path, drafts: list[dict[str, object]]) -> Path:
    """An executable the extension runs as its interpreter: the hooked server with ``drafts``
    and the tiny model (vscode_harness.server_python)."""
    rules = tmp_path / "drafts.json"
    rules.write_text(json.dumps(drafts))
    return server_python(tmp_path, "--drafts", f"'{rules}'")


def logged(user_data: Path, what: str) -> list[str]:
    """The JSON strings the extension logged after ``what: `` (parts accepted, drafts picked)."""
    pattern = re.compile(rf"{what}: (\".*\")$")
    return [
        json.loads(m.group(1)) for line in extension_lines(user_data) if (m := pattern.search(line))
    ]


def test_block_accepted_whole_and_line_by_line_and_drafts_picked(tmp_path: Path) -> None:
    require_tools()
    python = hooked_python(
        tmp_path,
        [
            {"after": "def perimeter_of_rectangle(width, height):", "drafts": BLOCK_DRAFTS},
            {"after": "def area_of_square(side):", "drafts": WHOLE_DRAFTS},
            {"after": "def volume_of_cube(side):", "drafts": PICK_DRAFTS},
        ],
    )
    with code_server(
        tmp_path, {"geometry.py": SOURCE}, {"superposed.pythonPath": str(python)}
    ) as session:
        path = session.workspace / "geometry.py"
        result = run_driver(
            "blocks.mjs",
            session,
            tmp_path,
            {
                "file": "geometry.py",
                "filePath": str(path),
                "block": BLOCK,
                "typeForWhole": TYPE_FOR_WHOLE,
                "typeForPick": TYPE_FOR_PICK,
                "timeoutMs": 240_000,
                "screenshot": str(OUTPUT / "vscode-block.png"),
                "pickScreenshot": str(PICK_SCREENSHOT),
            },
            TIMEOUT_S,
        )
        # The ghost text showed the whole block, every line of it.
        assert result["ghostBlock"] == BLOCK
        # Accept Next Line took it one line at a time: each ghost text was the rest of the
        # block, one line shorter, until all of it was in the file. The first key took the
        # line break after the `def` line and the block's first line with it, not the line
        # break alone (issue 52 item 10).
        ghosts = result["ghostsByLine"]
        assert ghosts[0] == BLOCK
        lines = BLOCK.split("\n")[1:]  # the block starts with a line break
        assert ghosts[1] == "\n".join(lines[1:]), ghosts
        assert len(ghosts) == len(lines) + 1, ghosts
        for before, after in zip(ghosts, ghosts[1:-1], strict=False):
            assert BLOCK.endswith(after) and len(after) < len(before)
        assert result["afterLines"] == SOURCE + BLOCK
        # Each line went to the server's accept command as it went in (the user store learns
        # partial accepts); the parts make up the block.
        parts = logged(session.user_data, "accepted part")
        assert "".join(parts) == BLOCK, parts
        assert parts[0] == f"\n{lines[0]}\n", parts
        assert len(parts) == len(lines)
        # After the next def line, Tab took its block whole.
        assert result["ghostWhole"] == WHOLE_DRAFTS[0]
        assert result["afterWhole"] == SOURCE + BLOCK + TYPE_FOR_WHOLE + WHOLE_DRAFTS[0]

        # Show Drafts listed the k drafts, first line as the label, with their rank and score;
        # the second one picked went in at the cursor, and its accept was sent.
        rows = result["pickRows"]
        assert [row["label"] for row in rows] == [
            "return side ** 3",
            "area = side * side",
            "return side * side * side",
        ]
        assert "superposed draft 2 (score" in rows[1]["description"]
        assert "2 lines" in rows[1]["description"]
        whole = TYPE_FOR_WHOLE + WHOLE_DRAFTS[0]
        assert result["afterPick"] == SOURCE + BLOCK + whole + TYPE_FOR_PICK + PICK_DRAFTS[1]
        assert logged(session.user_data, "picked draft") == [PICK_DRAFTS[1]]
        assert not any("accept failed" in line for line in extension_lines(session.user_data))
    if os.environ.get("SUPERPOSED_UPDATE_DOCS"):
        shutil.copy(PICK_SCREENSHOT, DOCS_PICK_SCREENSHOT)
