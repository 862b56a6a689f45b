"""An answer cut at the server's deadline grows to the whole drafts without a keystroke
(issue 54 item 4), in a real headless Neovim 0.12.

The tiny model's steps are slowed (tests/e2e/hooked_server.py ``--step-delay``) and
``answerWithinMs`` is 1: the first answer holds a few tokens a draft; the server then decodes
them whole and says so (``superposed/draftsWhole``), and the plugin asks again in that buffer.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.e2e.nvim_harness import (
    LUA_OPEN_AND_WAIT_READY,
    LUA_PRELUDE,
    ROOT,
    make_workspace,
    nvim_012,
    run_nvim,
    tiny_model_env,
)

pytestmark = pytest.mark.editor

TIMEOUT_S = 240
SOURCE = "def area(side):\n    return side * side\n\n\ndef perimeter(side):\n    return "

SCRIPT = (
    LUA_PRELUDE
    + r"""
vim.opt.rtp:prepend(cfg.plugin)
vim.cmd('filetype on')
require('superposed').setup({
  cmd = { cfg.python, cfg.hooked, '--step-delay', '0.3', '--', '-v', '--log-file',
    cfg.result .. '.log' },
  settings = { k = 3, compile = 'off', answerWithinMs = 1, maxNewTokens = 12, memory = false,
    wellFormed = false, codebaseDb = cfg.codebase_db, userDb = cfg.user_db },
})
"""
    + LUA_OPEN_AND_WAIT_READY
    + r"""
local function ghost()
  local ns = vim.api.nvim_get_namespaces()['nvim.lsp.inline_completion']
  local m = ns and vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })[1]
  if not (m and m[4].virt_text) then return nil end
  local text = table.concat(vim.tbl_map(function(c) return c[1] end, m[4].virt_text))
  return (text:gsub(' %(%d+/%d+%)$', '')) -- the draft, without its "(1/3)"
end
step('the drafts: cut at the deadline')
vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(buf), 0 })
feed('A')
local timer
timer = every(100, function()
  local shown = ghost()
  if out.cut == nil and shown then
    out.cut = shown
    step('no key: the drafts whole')
  elseif out.cut ~= nil and shown and shown ~= out.cut then
    timer:stop()
    out.whole = shown
    out.counters = stats().counters
    finish(nil)
  end
end)
"""
)


def test_a_cut_answer_grows_to_the_whole_drafts_without_a_keystroke(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path / "workspace", "shapes", {"shapes.py": SOURCE})
    result = run_nvim(
        tmp_path,
        nvim_012(),
        SCRIPT,
        workspace=workspace,
        config={
            "file": str(workspace / "shapes.py"),
            "hooked": str(ROOT / "tests" / "e2e" / "hooked_server.py"),
            "python": sys.executable,
        },
        timeout_s=TIMEOUT_S,
        env=tiny_model_env(tmp_path),
    )
    assert result.get("error") is None, result
    cut, whole = result["cut"], result["whole"]
    assert cut.strip() and len(whole) > len(cut), result
    counters = result["counters"]
    # an answer cut and decoded whole; the one asked for after it came from the cache
    assert counters["decoded_whole"] >= 1 and counters["typed_along"] >= 1, counters
