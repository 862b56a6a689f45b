"""Multi-line drafts (blocks) and :SuperposedDrafts in a real Neovim: 0.12's ghost text and
0.11's popup, with the plugin's own keys.

The server is tests/e2e/hooked_server.py with fixed drafts (``--drafts``) and the tiny model:
what is tested is how Neovim shows and accepts a block, not what a model drafts. The file holds
a class whose ``area`` method is the twin of the ``perimeter`` method being written; the cursor
sits at the end of the ``def perimeter(self):`` line, inside the class, so a block that went in
re-indented by the cursor line's indentation (as a snippet would) would show.

- 0.12: the ghost text is the block (its first line as virtual text with "(1/3)" beside it,
  the others as virtual lines); <M-C-Right> accepts it one line at a time, each line learned by
  the server; with the file as it was again, <M-CR> accepts it whole; <M-d> (:SuperposedDrafts)
  lists the k drafts through vim.ui.select (replaced here by a picker that takes the second)
  and the pick goes in. The server waits ``debounceMs`` (400 ms) before it answers a request, so
  the ghost text's own request, which Neovim sends 200 ms after the cursor moved, comes while
  the picker's is in flight: the server answers only a document's newest request, and before
  the plugin held the ghost text's requests back meanwhile, the picker got no drafts ("no
  drafts here"; issue 51 item 8, seen under load with the default debounce of 0).
- 0.11: the popup's entry shows the block's first line as its label and the whole block as its
  info; <M-CR> inserts the whole block, its indentation as drafted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.nvim_harness import (
    LUA_CAPTURE_NOTES,
    LUA_OPEN_AND_WAIT_READY,
    LUA_PRELUDE,
    ROOT,
    make_workspace,
    nvim_011,
    nvim_012,
    run_nvim,
    tiny_model_env,
)

pytestmark = pytest.mark.editor

TIMEOUT_S = 240
K = 3
DEBOUNCE_MS = 400  # longer than Neovim 0.12's 200 ms before an automatic ghost-text request
SOURCE = '''class Rectangle:
    def __init__(self, width, height):
        self.width = width
        self.height = height

    def area(self):
        """The area of the rectangle."""
        width = max(self.width, 0)
        return width * self.height

    def perimeter(self):'''
BLOCK = (
    '\n        """The perimeter of the rectangle."""'
    "\n        width = max(self.width, 0)"
    "\n        return 2 * (width + self.height)"
)
BLOCK_DRAFTS = [BLOCK, "\n        return 2 * (self.width + self.height)", "\n        pass"]
PICK_LINE = "    def diagonal(self):"
PICK_DRAFTS = [
    "\n        return (self.width ** 2 + self.height ** 2) ** 0.5",
    "\n        import math\n        return math.hypot(self.width, self.height)",
    "\n        return None",
]

# The plugin configured with the hooked server; ``ghost()`` reads the ghost text's extmark.
LUA_SETUP = r"""
out.version = tostring(vim.version())
vim.opt.rtp:prepend(cfg.plugin)
vim.cmd('filetype on')
require('superposed').setup({
  cmd = { cfg.python, cfg.hooked, '--drafts', cfg.drafts, '--', '-v', '--log-file',
    cfg.result .. '.log' },
  settings = { k = cfg.k, compile = 'off', answerWithinMs = 0, debounceMs = cfg.debounce_ms,
    codebaseDb = cfg.codebase_db, userDb = cfg.user_db },
})
"""

SCRIPT_012 = (
    LUA_PRELUDE
    + LUA_CAPTURE_NOTES
    + LUA_SETUP
    + LUA_OPEN_AND_WAIT_READY
    + r"""
local function lines() return vim.api.nvim_buf_get_lines(buf, 0, -1, false) end
local function text() return table.concat(lines(), '\n') end
local function chunks(list)
  return table.concat(vim.tbl_map(function(chunk) return chunk[1] end, list))
end
-- The ghost text: the extmark's virtual text and its virtual lines, one string per line.
local function ghost()
  local ns = vim.api.nvim_get_namespaces()['nvim.lsp.inline_completion']
  local mark = ns and vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })[1]
  if not mark or not mark[4].virt_text then return nil end
  local shown = { chunks(mark[4].virt_text) }
  for _, line in ipairs(mark[4].virt_lines or {}) do shown[#shown + 1] = chunks(line) end
  return shown
end
local function accepted() return (stats().counters or {}).accepted or 0 end

local phase, before, seen = 'block', nil, nil
out.parts = {}
step('the block as ghost text')
local timer
timer = every(100, function()
  local shown = ghost()
  if phase == 'block' and shown then
    out.ghost_block = shown
    phase = 'lines'
    step('accept line by line')
    before, seen = text(), accepted()
  elseif phase == 'lines' and text() ~= before and accepted() > seen then
    out.parts[#out.parts + 1] = text():sub(#before + 1)
    before, seen = text(), accepted()
    if #out.parts == cfg.block_lines then
      out.after_lines = text()
      phase = 'restore'
    end
  elseif phase == 'lines' and shown and text() == before then
    feed('<M-C-Right>')
  elseif phase == 'restore' then
    phase = 'ghost again'
    step('the file as it was, the block again')
    feed('<Esc>', 'n')
    vim.schedule(function()
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(cfg.source, '\n'))
      out.restored = text()
      vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(buf), 0 })
      feed('A')
    end)
  elseif phase == 'ghost again' and shown then
    phase = 'whole'
    step('accept whole')
    before, seen = text(), accepted()
    feed('<M-CR>')
  elseif phase == 'whole' and text() ~= before and accepted() > seen then
    out.after_whole = text()
    phase = 'pick'
  elseif phase == 'pick' then
    phase = 'picked'
    step('drafts (<M-d>)')
    vim.api.nvim_buf_set_lines(buf, -1, -1, false, { '', cfg.pick_line })
    vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(buf), #cfg.pick_line })
    before, seen = text(), accepted()
    vim.ui.select = function(items, opts, on_choice)
      out.pick_items = vim.tbl_map(opts.format_item, items)
      out.pick_kind = opts.kind
      on_choice(items[2], 2)
    end
    feed('<M-d>')
  elseif phase == 'picked' and vim.tbl_contains(out.notes, 'superposed: no drafts here') then
    timer:stop()
    finish('the picker got no drafts')
  elseif phase == 'picked' and text() ~= before and accepted() > seen then
    timer:stop()
    out.after_pick = text()
    out.cursor = vim.api.nvim_win_get_cursor(0)
    finish(nil)
  end
end)
vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(buf), 0 })
feed('A')
"""
)

SCRIPT_011 = (
    LUA_PRELUDE
    + LUA_SETUP
    + LUA_OPEN_AND_WAIT_READY
    + r"""
local function text() return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n') end
local before = text()
local lines = vim.api.nvim_buf_line_count(buf)
step('popup')
local done = false
vim.api.nvim_create_autocmd('CompleteChanged', {
  callback = function()
    local info = vim.fn.complete_info({ 'items' })
    if done or #info.items == 0 then return end
    done = true
    out.items = vim.tbl_map(function(item)
      return { abbr = item.abbr, info = item.info, word = item.word }
    end, info.items)
    step('accept')
    -- Typed keys are read once this returns: look from a timer (vim.wait would not read them).
    vim.schedule(function() feed('<M-CR>') end)
    local timer
    timer = every(100, function()
      -- the first line goes in, then the rest of the block (CompleteDone, scheduled)
      if vim.api.nvim_buf_line_count(buf) < lines + cfg.block_lines - 1 then return end
      timer:stop()
      out.after_accept = text()
      out.cursor = vim.api.nvim_win_get_cursor(0)
      finish(nil)
    end)
  end,
})
vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(buf), 0 })
feed('A<C-Space>')
"""
)


def run_blocks(tmp_path: Path, binary: str, script: str) -> dict[str, Any]:
    """Runs ``script`` in ``binary`` beside the class, with the hooked server's fixed drafts."""
    workspace = make_workspace(tmp_path / "workspace", "shapes", {"shapes.py": SOURCE})
    drafts = tmp_path / "drafts.json"
    drafts.write_text(
        json.dumps(
            [
                {"after": "    def perimeter(self):", "drafts": BLOCK_DRAFTS},
                {"after": PICK_LINE, "drafts": PICK_DRAFTS},
            ]
        )
    )
    return run_nvim(
        tmp_path,
        binary,
        script,
        workspace=workspace,
        config={
            "file": str(workspace / "shapes.py"),
            "hooked": str(ROOT / "tests" / "e2e" / "hooked_server.py"),
            "drafts": str(drafts),
            "python": sys.executable,
            "k": K,
            "debounce_ms": DEBOUNCE_MS,
            "block_lines": len(BLOCK.split("\n")) - 1,
            "pick_line": PICK_LINE,
            "source": SOURCE,
        },
        timeout_s=TIMEOUT_S,
        env=tiny_model_env(tmp_path),
    )


def test_block_ghost_text_whole_line_by_line_and_drafts_pick_on_012(tmp_path: Path) -> None:
    out = run_blocks(tmp_path, nvim_012(), SCRIPT_012)
    assert out["version"].startswith("0.12.")
    # The ghost text: the block's first line (empty: it starts with a line break) as virtual
    # text with "(1/3)" beside it (draft 1 of 3), its other lines as virtual lines.
    lines = BLOCK.split("\n")
    assert out["ghost_block"] == [f"{lines[0]} (1/{K})", *lines[1:]]
    # <M-C-Right> took it line by line, each line reaching the server's accept command (its
    # counter went up each time); with the file as it was again, <M-CR> took it whole. The
    # indentation is as drafted.
    assert out["parts"] == ["\n" + line for line in lines[1:]]
    assert out["after_lines"] == SOURCE + BLOCK
    assert out["restored"] == SOURCE
    assert out["after_whole"] == SOURCE + BLOCK
    # <M-d> (:SuperposedDrafts): the k drafts through vim.ui.select, first line, rank and
    # score; the second picked went in at the cursor, and the server learned it.
    items = out["pick_items"]
    assert out["pick_kind"] == "superposed.drafts"
    assert len(items) == K
    assert items[1].startswith("import math    superposed draft 2 (score ")
    assert items[1].endswith(", 2 lines")
    assert items[0].startswith("return (self.width ** 2 + self.height ** 2) ** 0.5    ")
    assert out["after_pick"] == SOURCE + BLOCK + "\n\n" + PICK_LINE + PICK_DRAFTS[1]
    last = PICK_DRAFTS[1].split("\n")[-1]
    assert out["cursor"] == [len(out["after_pick"].split("\n")), len(last)]


def test_block_in_the_popup_on_011(tmp_path: Path) -> None:
    out = run_blocks(tmp_path, nvim_011(), SCRIPT_011)
    assert out["version"].startswith("0.11.")
    # The popup: the block's first line with text as the label, the whole block as the info.
    first = out["items"][0]
    assert first["abbr"] == '"""The perimeter of the rectangle."""'
    assert first["info"] == BLOCK.lstrip("\n")
    # <M-CR> (the plugin's accept) inserted the whole block, indented as drafted (a snippet
    # would have added the def line's four spaces to each line), the cursor at its end.
    assert out["after_accept"] == SOURCE + BLOCK
    last = BLOCK.split("\n")[-1]
    assert out["cursor"] == [len((SOURCE + BLOCK).split("\n")), len(last)]
