"""Drafts that build on the item selected in VS Code's suggest widget (issue 24 item 4), in a
real VS Code (code-server in headless Chromium, driven by vscode-extension/e2e/suggest.mjs).

The file defines ``value_total`` and ends with ``result = val``. Ctrl+Space opens the suggest
widget on VS Code's own word-based suggestion, ``value_total`` (the extension lists no drafts
in the widget); VS Code then asks for inline completions with ``selectedCompletionInfo`` (the
item's text and the range it replaces), the server drafts after the item, and VS Code shows
the draft as ghost text beside the open widget. The server is tests/e2e/hooked_server.py with
fixed drafts after ``value_total`` (``--drafts``) and the tiny model: what is tested is the
round trip through VS Code, not what a model drafts.

Nothing is installed here: `make editors` (scripts/setup-editors.sh) does that.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.test_vscode_blocks import hooked_python
from tests.e2e.vscode_harness import OUTPUT, code_server, extension_lines, require_tools, run_driver

pytestmark = pytest.mark.editor

TIMEOUT_S = 420
SOURCE = "value_total = 1\n\n"
TYPED = "result = val"
ITEM = "value_total"
DRAFTS = [" * 2", " + 1", " - 1"]


def counter(user_data: Path, name: str) -> int | None:
    """The last value of the server's counter ``name`` in the stats the extension logged
    (Superposed: Show Stats logs them one per line, ``counters.NAME: VALUE``)."""
    pattern = re.compile(rf"^\s*counters\.{name}: (\d+)$")
    values = [int(m.group(1)) for line in extension_lines(user_data) if (m := pattern.search(line))]
    return values[-1] if values else None


def test_ghost_text_with_the_suggest_widget_open_continues_the_selected_item(
    tmp_path: Path,
) -> None:
    require_tools()
    python = hooked_python(tmp_path, [{"after": ITEM, "drafts": DRAFTS}])
    with code_server(
        tmp_path, {"totals.py": SOURCE}, {"superposed.pythonPath": str(python)}
    ) as session:
        path = session.workspace / "totals.py"
        result = run_driver(
            "suggest.mjs",
            session,
            tmp_path,
            {
                "file": "totals.py",
                "filePath": str(path),
                "typed": TYPED,
                "timeoutMs": 240_000,
                "screenshot": str(OUTPUT / "vscode-suggest.png"),
            },
            TIMEOUT_S,
        )
        # The widget was open on VS Code's word suggestion ...
        assert result["widget"]["selected"] == ITEM, result["widget"]
        # ... and the ghost text beside it continued the selected item: what was typed of the
        # name, then the ghost text, is the item followed by the first draft.
        typed_part = TYPED.rsplit(" ", 1)[-1]
        assert typed_part + result["ghostWithWidget"] == ITEM + DRAFTS[0], result
        # The server got the selected item (selectedCompletionInfo) and drafted after it.
        assert counter(session.user_data, "after_selected_item") >= 1
        drafts_logged = [line for line in extension_lines(session.user_data) if "drafts at" in line]
        assert any(f'"{ITEM}{DRAFTS[0]}"' in line for line in drafts_logged), drafts_logged
        # Tab, as VS Code binds it: the first accepted the widget's item, and the draft after it
        # stayed as ghost text; the second accepted the draft, and the server's accept
        # command ran (the stats were logged after it).
        typed_before = SOURCE + TYPED.removesuffix(typed_part)
        assert result["afterTab"] == typed_before + ITEM
        assert result.get("widgetAfterTab") is None  # the widget closed
        assert result["ghostAfterTab"] == DRAFTS[0]
        assert result["afterSecondTab"] == typed_before + ITEM + DRAFTS[0]
        assert counter(session.user_data, "accepted") == 1
        # The accept said where the draft went in: the server decoded the next one at once
        # (triggerOnAccept, issue 24 item 1), before the editor asked.
        assert counter(session.user_data, "drafted_ahead") == 1
