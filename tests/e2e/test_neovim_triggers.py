"""The trigger rules and the resting cursor in a real headless Neovim (0.11 and 0.12).

The plugin passes ``trigger = 'manual'`` to the server, which then answers a completion
popup opened by a trigger character with nothing and one the user asked for with the k
drafts; when the cursor rests (CursorHold) in the middle of a long file, the plugin tells the
server, which warms its cache there: the request that follows reuses it. The tiny model serves.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.nvim_harness import (
    LUA_CAPTURE_NOTES,
    LUA_OPEN_AND_WAIT_READY,
    LUA_PRELUDE,
    make_workspace,
    nvim_011,
    nvim_012,
    run_nvim,
)
from tests.e2e.test_warmup import LONG

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
  settings = { k = 3, maxNewTokens = 4, compile = 'off', answerWithinMs = 0, trigger = 'manual',
               codebaseDb = cfg.codebase_db, userDb = cfg.user_db },
})
"""
    + LUA_OPEN_AND_WAIT_READY
    + r"""
local function warmups() return (stats().counters or {}).warmups_done or 0 end
step('the warm-up at the end of the file')
if not vim.wait(cfg.timeout_ms, function() return warmups() >= 1 end, 200) then
  return finish('the document was never warmed')
end
step('the cursor rests mid-file')
vim.api.nvim_win_set_cursor(0, { cfg.line + 1, 0 })
vim.api.nvim_exec_autocmds('CursorHold', { buffer = buf })
if not vim.wait(cfg.timeout_ms, function() return warmups() >= 2 end, 200) then
  return finish('no warm-up where the cursor rests')
end
step('requests there')
local function popup(kind)
  local r = client:request_sync('textDocument/completion', {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    position = { line = cfg.line, character = 0 },
    context = { triggerKind = kind, triggerCharacter = kind == 2 and ' ' or nil },
  }, cfg.timeout_ms, buf)
  return r and r.result and #(r.result.items or {}) or -1
end
out.automatic = popup(2)
out.invoked = popup(1)
out.prompt = stats().lastPrompt
finish(nil)
"""
)


@pytest.mark.parametrize("nvim", [nvim_011, nvim_012], ids=["0.11", "0.12"])
def test_manual_trigger_and_the_resting_cursor(tmp_path: Path, nvim: Callable[[], str]) -> None:
    workspace = make_workspace(tmp_path / "workspace", "rest", {"long.py": LONG})
    line = LONG.count("\n") // 2
    out = run_nvim(
        tmp_path,
        nvim(),
        SCRIPT,
        workspace=workspace,
        config={"file": str(workspace / "long.py"), "line": line},
        timeout_s=TIMEOUT_S,
        env={"SUPERPOSED_TEST_TINY_MODEL": "1"},
    )
    assert out.get("error") is None, out
    assert out["automatic"] == 0  # trigger = 'manual': the popup a trigger character opened
    assert out["invoked"] == 3
    prompt = out["prompt"]
    assert prompt["tokens"] - prompt["reused"] < 16, prompt
