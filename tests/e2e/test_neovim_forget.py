""":SuperposedForget in a real headless Neovim: a saved file is erased from both stores, and
``:SuperposedForget!`` clears the user store (issue 12, item 6). The tiny model serves."""

from __future__ import annotations

import sqlite3
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
TIMEOUT_S = 180

SCRIPT = (
    LUA_PRELUDE
    + LUA_CAPTURE_NOTES
    + r"""vim.opt.rtp:prepend(cfg.plugin)
vim.cmd('filetype on')
local superposed = require('superposed')
superposed.setup({
  python = cfg.python,
  settings = { compile = 'off', answerWithinMs = 0,
    codebaseDb = cfg.codebase_db, userDb = cfg.user_db },
})
local function wait_note(pattern)
  return vim.wait(cfg.timeout_ms, function()
    return vim.iter(out.notes):any(function(m) return m:find(pattern) ~= nil end)
  end, 100)
end

step('wait for the model')
vim.cmd.edit(cfg.first)
if not vim.wait(cfg.timeout_ms, function() return superposed.state.kind == 'ready' end, 200) then
  return finish('the model never became ready: ' .. superposed.status())
end
step('save both files')
vim.cmd('write')
vim.cmd.edit(cfg.second)
-- the client attaches to the new buffer on the next turn of the loop: then its save is sent
local client
if not vim.wait(cfg.timeout_ms, function()
  client = vim.lsp.get_clients({ name = 'superposed', bufnr = 0 })[1]
  return client ~= nil
end, 50) then
  return finish('the server never attached to the second file')
end
vim.cmd('write')
local saved = vim.wait(cfg.timeout_ms, function()
  local r = client:request_sync('workspace/executeCommand',
    { command = 'superposed.stats', arguments = {} }, 10000)
  return vim.tbl_get(r or {}, 'result', 'counters', 'saves_indexed') == 2
end, 300)
if not saved then return finish('the saves were never learned') end

step('forget')
vim.cmd.edit(cfg.first)
vim.cmd('SuperposedForget')
if not wait_note('file%(s%) erased') then return finish('no answer to :SuperposedForget') end
out.forget_file = out.notes[#out.notes]
vim.cmd('SuperposedForget!')
if not vim.wait(cfg.timeout_ms, function()
  return out.notes[#out.notes] ~= out.forget_file and out.notes[#out.notes]:find('erased') ~= nil
end, 100) then
  return finish('no answer to :SuperposedForget!')
end
out.forget_user = out.notes[#out.notes]
finish(nil)
"""
)


def files(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return sorted(Path(p).name for (p,) in conn.execute("SELECT path FROM files"))


def test_forget_this_file_then_the_user_store(tmp_path: Path) -> None:
    workspace = make_workspace(
        tmp_path / "workspace",
        "forget",
        {"first.py": "def first():\n    return 1\n", "second.py": "def second():\n    return 2\n"},
    )
    stores = tmp_path / "stores"
    out = run_nvim(
        tmp_path,
        nvim_011(),
        SCRIPT,
        workspace=workspace,
        config={"first": str(workspace / "first.py"), "second": str(workspace / "second.py")},
        timeout_s=TIMEOUT_S,
        env={"SUPERPOSED_TEST_TINY_MODEL": "1"},
    )
    assert "2 stored file(s) erased" in out["forget_file"]  # first.py, from both stores
    assert "1 stored file(s) erased" in out["forget_user"]  # second.py, from the user store
    assert files(stores / "codebase.sqlite") == ["second.py"]
    assert files(stores / "user.sqlite") == []
