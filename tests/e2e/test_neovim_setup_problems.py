"""What a new user sees in Neovim when the set-up is wrong (issue 52, item 2): one message per
problem, saying what to do, and a :checkhealth that reports it without failing itself.

Before: a ``python`` that does not exist showed nothing (Neovim skips a server command that is
not executable and writes only to its log), an interpreter without the package showed only
Neovim's "Client superposed quit with exit code 1", :SuperposedStatus said "the server is not
running", and :checkhealth superposed reported the error and then failed itself ("Failed to
run healthcheck ... ENOENT"). Each case runs in a fresh headless Neovim, 0.11 and 0.12, with
``setup()`` and with ``vim.lsp.config`` alone; no model loads. The last test loads one that
fails (tests/e2e/hooked_server.py ``--load-error``): the server's message is said once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.nvim_harness import (
    LUA_CAPTURE_NOTES,
    LUA_PRELUDE,
    ROOT,
    make_workspace,
    nvim_011,
    nvim_012,
    run_nvim,
    tiny_model_env,
)

pytestmark = pytest.mark.editor

TIMEOUT_S = 120
VERSIONS = {"0.11": nvim_011, "0.12": nvim_012}

# Configures the plugin with cfg.cmd (setup() with python = when cfg.setup), opens a Python
# file, and waits for a message in :messages (what a person sees: an error raised inside the
# FileType autocommand would show there too); then :SuperposedStatus, :checkhealth superposed,
# and whether a client was ever started (none: Neovim has nothing to report on its own).
SCRIPT = (
    LUA_PRELUDE
    + r"""
vim.opt.rtp:prepend(cfg.plugin)
vim.cmd('filetype on')
local started = 0
vim.api.nvim_create_autocmd('LspAttach', { callback = function() started = started + 1 end })
if cfg.setup then
  require('superposed').setup({ python = cfg.cmd[1] })
else
  vim.lsp.config('superposed', { cmd = cfg.cmd })
  vim.lsp.enable('superposed')
end
local function messages()
  return vim.split(vim.trim(vim.fn.execute('messages')), '\n', { plain = true })
end
step('open a python file')
vim.cmd.edit(cfg.file)
if not vim.wait(cfg.timeout_ms, function()
  return vim.iter(messages()):any(function(m) return m:find('superposed: ', 1, true) end)
end, 50) then
  return finish('no message')
end
out.first = messages()
step('status')
vim.cmd('SuperposedStatus')
if not vim.wait(cfg.timeout_ms, function() return #messages() > #out.first end, 50) then
  return finish('no answer to :SuperposedStatus')
end
out.status = messages()[#messages()]
step('health')
vim.cmd('checkhealth superposed')
out.health = vim.api.nvim_buf_get_lines(0, 0, -1, false)
out.clients = #vim.lsp.get_clients({ name = 'superposed', _uninitialized = true })
out.started = started
finish(nil)
"""
)


def bare_python(tmp_path: Path) -> str:
    """An interpreter without superposed-lsp: a fresh virtual environment (no pip)."""
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python")


def run_case(
    tmp_path: Path, version: str, python: str, setup: bool, cwd: Path | None = None
) -> dict[str, Any]:
    """Neovim started in ``cwd`` (default: the workspace) opens a file of the workspace."""
    workspace = make_workspace(tmp_path / "workspace", "demo", {"demo.py": "import os\n"})
    env = {"PYTHONPATH": ""}  # the interpreter finds only what it has
    return run_nvim(
        tmp_path,
        VERSIONS[version](),
        SCRIPT,
        workspace=cwd or workspace,
        config={
            "file": str(workspace / "demo.py"),
            "cmd": [python, "-m", "lsp_server.cli"],
            "setup": setup,
        },
        timeout_s=TIMEOUT_S,
        env=env,
    )


def assert_said_once_with_what_to_do(out: dict[str, Any], words: str) -> str:
    """The one message: it names the problem (``words``), `make setup` and the option."""
    assert len(out["first"]) == 1, out["first"]  # nothing else: no error, no stack trace
    message = out["first"][0]
    assert words in message, message
    assert "make setup" in message and "python = " in message, message
    assert out["clients"] == 0 and out["started"] == 0  # nothing started, nothing else to say
    # :SuperposedStatus says the same, not "the server is not running".
    assert out["status"] == message
    # :checkhealth superposed reports it as an error and runs to its end.
    health = "\n".join(out["health"])
    assert "Failed to run healthcheck" not in health, health
    assert "ERROR" in health and words in health, health
    return message


@pytest.mark.parametrize("setup", [True, False], ids=["setup", "lsp-config"])
@pytest.mark.parametrize("version", VERSIONS)
def test_an_interpreter_that_does_not_exist_is_said_with_what_to_do(
    tmp_path: Path, version: str, setup: bool
) -> None:
    python = str(tmp_path / "no-such-venv" / "bin" / "python")
    out = run_case(tmp_path, version, python, setup)
    message = assert_said_once_with_what_to_do(out, f"the interpreter {python} does not exist")
    assert message.startswith("superposed: ")


@pytest.mark.parametrize("setup", [True, False], ids=["setup", "lsp-config"])
@pytest.mark.parametrize("version", VERSIONS)
def test_an_interpreter_without_the_package_is_said_with_what_to_do(
    tmp_path: Path, version: str, setup: bool
) -> None:
    python = bare_python(tmp_path)
    out = run_case(tmp_path, version, python, setup)
    assert_said_once_with_what_to_do(out, f"{python} has no superposed-lsp (it is not installed")
    # Neovim's own "quit with exit code 1" never came: the server was not started.
    assert not [line for line in out["first"] if "quit with exit code" in line]


@pytest.mark.parametrize("version", VERSIONS)
def test_an_interpreter_without_the_package_is_said_in_a_checkout_too(
    tmp_path: Path, version: str
) -> None:
    # Neovim started in a superposed-lsp checkout: the interpreter finds the package's source
    # there (the current folder is on its path), not its dependencies; the server would stop
    # at once ("quit with exit code 1"), as /usr/bin/python3 did when the README was tried.
    python = bare_python(tmp_path)
    out = run_case(tmp_path, version, python, True, cwd=ROOT)
    assert_said_once_with_what_to_do(out, f"{python} has no superposed-lsp (it is not installed")


# A model that does not load: the server says why (window/showMessage) and reports the error
# in superposed/status; the plugin shows it once, and keeps it for :SuperposedStatus and
# :checkhealth.
LOAD_ERROR = "the model cache is damaged: delete it and restart (test)"
LOAD_ERROR_SCRIPT = (
    LUA_PRELUDE
    + LUA_CAPTURE_NOTES
    + r"""
vim.opt.rtp:prepend(cfg.plugin)
vim.cmd('filetype on')
local superposed = require('superposed')
superposed.setup({
  cmd = { cfg.python, cfg.hooked, '--load-error', cfg.load_error, '--', '-v', '--log-file',
    cfg.result .. '.log' },
  settings = { compile = 'off', answerWithinMs = 0,
    codebaseDb = cfg.codebase_db, userDb = cfg.user_db },
})
vim.cmd.edit(cfg.file)
step('wait for the error')
if not vim.wait(cfg.timeout_ms, function() return superposed.state.kind == 'error' end, 100) then
  return finish('the status never said error: ' .. superposed.status())
end
-- The server's showMessage went out before its status: both have been handled by now.
out.said = vim.deepcopy(out.notes)
step('status')
vim.cmd('SuperposedStatus')
if not vim.wait(cfg.timeout_ms, function() return #out.notes > #out.said end, 100) then
  return finish('no answer to :SuperposedStatus')
end
out.status = out.notes[#out.notes]
step('health')
vim.cmd('checkhealth superposed')
out.health = vim.api.nvim_buf_get_lines(0, 0, -1, false)
finish(nil)
"""
)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_model_that_does_not_load_is_said_once(tmp_path: Path, version: str) -> None:
    workspace = make_workspace(tmp_path / "workspace", "demo", {"demo.py": "import os\n"})
    out = run_nvim(
        tmp_path,
        VERSIONS[version](),
        LOAD_ERROR_SCRIPT,
        workspace=workspace,
        config={
            "file": str(workspace / "demo.py"),
            "hooked": str(ROOT / "tests" / "e2e" / "hooked_server.py"),
            "load_error": LOAD_ERROR,
        },
        timeout_s=TIMEOUT_S,
        env={**tiny_model_env(tmp_path), "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
    )
    said = [note for note in out["said"] if LOAD_ERROR in note]
    assert len(said) == 1, out["said"]
    assert out["status"].split("\n")[0] == f"superposed: {LOAD_ERROR}"
    health = "\n".join(out["health"])
    assert "Failed to run healthcheck" not in health, health
    assert f"superposed: {LOAD_ERROR}" in health, health
