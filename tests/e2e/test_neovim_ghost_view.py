"""Ghost text you can tell from code, kept in view, and the draft you chose kept (issue 52,
items 3 and 5), in a real headless Neovim 0.12.

Before: the drafts were drawn with ComplHint, which has only a GUI colour (in a terminal without
truecolor they looked like code); a block drafted at the window's last line was below it, with
its "(1/3)" ten lines under the cursor; and after cycling to draft 3/3 and taking a word
(<M-Right>), the ghost text went on with draft 1.

The server is tests/e2e/hooked_server.py with fixed drafts and the tiny model. The Lua plays:
a block at the window's bottom line (it scrolls into view); the same block in a window too
short for it (cut, with a marker); three drafts at ``total = ``, cycled to the third, whose
next word is taken (the first and the third start with the same word, so the server's answer
after it holds the rest of both).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from tests.e2e.nvim_harness import (
    LUA_CAPTURE_NOTES,
    LUA_OPEN_AND_WAIT_READY,
    LUA_PRELUDE,
    ROOT,
    make_workspace,
    nvim_012,
    run_nvim,
    tiny_model_env,
)

pytestmark = pytest.mark.editor

TIMEOUT_S = 240
K = 3
DEF_LINE = "    def perimeter(self):"
FILLER = "".join(f"\n    def side_{i}(self):\n        return self.width + {i}\n" for i in range(20))
SOURCE = "class Box:\n    def __init__(self, width, height):\n        self.width = width\n" + FILLER
BLOCK_LINES = [
    '        """The perimeter of the box."""',
    "        width = max(self.width, 0)",
    "        height = max(self.height, 0)",
    "        double = 2 * width",
    "        double += 2 * height",
    "        return double",
]
BLOCK = "".join("\n" + line for line in BLOCK_LINES)
TOTAL = "        total = "
TOTAL_DRAFTS = ["self.width + self.height", "None", "self.height * 2"]
SHORT_WINDOW = 4

SCRIPT = (
    LUA_PRELUDE
    + LUA_CAPTURE_NOTES
    + r"""
vim.opt.rtp:prepend(cfg.plugin)
vim.cmd('filetype on')
require('superposed').setup({
  cmd = { cfg.python, cfg.hooked, '--drafts', cfg.drafts, '--', '-v', '--log-file',
    cfg.result .. '.log' },
  settings = { k = cfg.k, compile = 'off', answerWithinMs = 0,
    codebaseDb = cfg.codebase_db, userDb = cfg.user_db },
})
"""
    + LUA_OPEN_AND_WAIT_READY
    + r"""
local win = vim.api.nvim_get_current_win()
local function mark()
  local ns = vim.api.nvim_get_namespaces()['nvim.lsp.inline_completion']
  local m = ns and vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })[1]
  return m and m[4].virt_text and m or nil
end
local function chunks(list)
  return table.concat(vim.tbl_map(function(c) return c[1] end, list))
end
-- What the ghost text shows: its line at the cursor, its virtual lines, their highlights.
local function ghost()
  local m = mark()
  if not m then return nil end
  local groups = {}
  for _, c in ipairs(m[4].virt_text) do groups[#groups + 1] = c[2] end
  for _, line in ipairs(m[4].virt_lines or {}) do
    for _, c in ipairs(line) do groups[#groups + 1] = c[2] end
  end
  return { row = m[2], text = chunks(m[4].virt_text),
    lines = vim.tbl_map(chunks, m[4].virt_lines or {}), groups = groups }
end
-- Where the ghost's block ends on screen: the rows from the window's top line to the cursor's,
-- and the virtual lines below it, against the window's height.
local function view(shown)
  local top = vim.fn.line('w0')
  local rows = vim.api.nvim_win_text_height(win, { start_row = top - 1, end_row = shown.row }).all
  return { top = top, rows = rows, below = #shown.lines, height = vim.api.nvim_win_get_height(win) }
end
local function at_end_of(row) vim.api.nvim_win_set_cursor(win, { row, 0 }) feed('A') end

local last = vim.api.nvim_buf_line_count(buf)
local phase = 'bottom'
step('a block at the window bottom')
vim.api.nvim_win_set_cursor(win, { last, 0 })
vim.fn.winrestview({ topline = last - vim.api.nvim_win_get_height(win) + 1, lnum = last })
out.bottom_before = { top = vim.fn.line('w0'), bottom = vim.fn.line('w$'), last = last }
at_end_of(last)
local timer
timer = every(100, function()
  local shown = ghost()
  if phase == 'bottom' and shown and #shown.lines > 0 then
    out.bottom = shown
    out.bottom_view = view(shown)
    phase = 'short'
    step('the block in a short window')
    feed('<Esc>', 'n')
    vim.schedule(function()
      vim.cmd('resize ' .. cfg.short)
      at_end_of(last)
    end)
  elseif phase == 'short' and shown and #shown.lines > 0
      and vim.api.nvim_get_mode().mode == 'i' then
    out.short = shown
    out.short_view = view(shown)
    phase = 'first'
    step('three drafts')
    feed('<Esc>', 'n')
    vim.schedule(function()
      vim.cmd('resize')
      vim.api.nvim_buf_set_lines(buf, -1, -1, false, { '', '    def total(self):', cfg.total })
      at_end_of(vim.api.nvim_buf_line_count(buf))
    end)
  elseif phase == 'first' and shown and shown.text:find('%(1/3%)') then
    out.first = shown.text
    phase = 'third'
    step('cycle to the third')
    feed('<M-]><M-]>')
  elseif phase == 'third' and shown and shown.text:find('%(3/3%)') then
    out.third = shown.text
    out.line_before = vim.api.nvim_get_current_line()
    phase = 'word'
    step('take its next word')
    feed('<M-Right>')
  elseif phase == 'word' and vim.api.nvim_get_current_line() ~= out.line_before and shown
      and shown.text:find('%(%d/%d%)') then
    timer:stop()
    out.line_after = vim.api.nvim_get_current_line()
    out.after_word = shown.text
    finish(nil)
  end
end)
"""
)


@pytest.fixture(scope="module")
def view_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp_path = tmp_path_factory.mktemp("ghost-view")
    workspace = make_workspace(tmp_path / "workspace", "boxes", {"boxes.py": SOURCE + DEF_LINE})
    drafts = tmp_path / "drafts.json"
    drafts.write_text(
        json.dumps(
            [
                {"after": DEF_LINE, "drafts": [BLOCK, "\n        pass", "\n        return 0"]},
                {"after": TOTAL, "drafts": TOTAL_DRAFTS},
            ]
        )
    )
    return run_nvim(
        tmp_path,
        nvim_012(),
        SCRIPT,
        workspace=workspace,
        config={
            "file": str(workspace / "boxes.py"),
            "hooked": str(ROOT / "tests" / "e2e" / "hooked_server.py"),
            "drafts": str(drafts),
            "python": sys.executable,
            "k": K,
            "short": SHORT_WINDOW,
            "total": TOTAL,
        },
        timeout_s=TIMEOUT_S,
        env=tiny_model_env(tmp_path),
    )


def test_ghost_text_has_a_highlight_of_its_own(view_run: dict[str, Any]) -> None:
    groups = set(view_run["bottom"]["groups"])
    assert groups == {"SuperposedGhost", "SuperposedGhostHint"}, groups


def test_a_block_at_the_window_bottom_scrolls_into_view(view_run: dict[str, Any]) -> None:
    before = view_run["bottom_before"]
    assert before["bottom"] == before["last"]  # the def line was the window's last line
    bottom, seen = view_run["bottom"], view_run["bottom_view"]
    assert bottom["lines"] == BLOCK_LINES
    # the "(1/3)" is on the cursor's line, not ten lines below it
    assert bottom["text"] == f" (1/{K})"
    # the window scrolled: the cursor's line and all the block's lines are in it
    assert seen["top"] > before["top"]
    assert seen["rows"] + seen["below"] <= seen["height"], seen


def test_a_block_taller_than_the_window_is_cut_with_a_marker(view_run: dict[str, Any]) -> None:
    short, seen = view_run["short"], view_run["short_view"]
    assert seen["height"] == SHORT_WINDOW
    assert seen["rows"] + seen["below"] == SHORT_WINDOW, seen  # as far as it fits
    shown = short["lines"]
    assert shown[:-1] == BLOCK_LINES[: len(shown) - 1]
    assert shown[-1] == f"… {len(BLOCK_LINES) - len(shown) + 1} more lines"


def test_the_chosen_draft_stays_chosen_after_a_partial_accept(view_run: dict[str, Any]) -> None:
    out = view_run
    assert out["first"] == f"{TOTAL_DRAFTS[0]} (1/{K})"
    assert out["third"] == f"{TOTAL_DRAFTS[2]} (3/{K})"
    assert out["line_after"] == TOTAL + "self"
    # the rest of the third draft, the one on screen (the first's rest before the fix); the
    # second does not start with "self", so two drafts are left
    assert out["after_word"] == ".height * 2 (2/2)"
