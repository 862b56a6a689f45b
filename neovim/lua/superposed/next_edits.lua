--- superposed-lsp for Neovim: next edits. After a change ends, the server sends
--- superposed/nextEditsReady with the places where the same rewrite applies next (best first);
--- each gets extmarks at its site: a sign, the old text struck through, the new text beside it
--- as virtual text (an insert: only the new text), and the best one a hint at the end of its line.
--- Keys (normal and insert mode, `next_edits.keys` in setup()): jump to the next site, accept the
--- edit at the cursor's line (a normal buffer edit, then the server's superposed.nextEditAccepted),
--- dismiss it (superposed.nextEditDismissed). :SuperposedNextEdits lists them (vim.ui.select).
---
--- An edit whose site no longer holds its old text is stale and is dropped before it is shown;
--- the extmarks move with the buffer's text, so an edit above a site does not make it stale.
local M = {}

M.ns = vim.api.nvim_create_namespace('superposed.next_edits')
M.hint_ns = vim.api.nvim_create_namespace('superposed.next_edits.hint')

M.ACCEPTED = 'superposed.nextEditAccepted'
M.DISMISSED = 'superposed.nextEditDismissed'
M.REQUEST = 'superposed/nextEdits'

--- The pending edits of the latest proposals, best first: { edit, client_id, bufnr?, mark? }
--- (bufnr and mark once the edit's file is loaded; `mark` spans its site and moves with it).
M.pending = {}

--- The ids dismissed here: a notification already on its way may propose them again.
M.dismissed = {}

--- The keys of setup({ next_edits = { keys = ... } }), filled by init.lua.
M.keys = { jump = '<M-n>', accept = '<M-y>', dismiss = '<M-e>' }

local function highlights()
vim.api.nvim_create_autocmd('ColorScheme', {
  group = vim.api.nvim_create_augroup('superposed.next_edits.hl', { clear = true }),
  callback = highlights,
  desc = 'superposed: the next-edit highlights again after a colorscheme cleared them',
})
  vim.api.nvim_set_hl(0, 'SuperposedNextEditRemoved', { default = true, strikethrough = true })
  vim.api.nvim_set_hl(0, 'SuperposedNextEditAdded', { default = true, link = 'DiffAdd' })
  vim.api.nvim_set_hl(0, 'SuperposedNextEditInsert', { default = true, link = 'Comment' })
  vim.api.nvim_set_hl(0, 'SuperposedNextEditSign', { default = true, link = 'DiagnosticSignHint' })
  vim.api.nvim_set_hl(0, 'SuperposedNextEditHint', { default = true, link = 'Comment' })
end
highlights()

local function is_edit(edit)
  local function pos(p)
    return type(p) == 'table' and type(p.line) == 'number' and type(p.character) == 'number'
      and p.line >= 0 and p.character >= 0
  end
  return type(edit) == 'table' and type(edit.id) == 'string' and type(edit.newText) == 'string'
    and type(edit.oldText) == 'string' and type(edit.textDocument) == 'table'
    and type(edit.textDocument.uri) == 'string' and type(edit.range) == 'table'
    and pos(edit.range.start) and pos(edit.range['end'])
end

--- The loaded buffer of `uri`, if any (no buffer is created for a file that is not open).
local function loaded_buffer(uri)
  local ok, fname = pcall(vim.uri_to_fname, uri)
  local bufnr = ok and vim.fn.bufnr(fname) or -1
  return bufnr > 0 and vim.api.nvim_buf_is_loaded(bufnr) and bufnr or nil
end

--- An LSP position in `bufnr` as a 0-based (row, byte column); nil past the buffer's end.
local function to_byte(bufnr, pos, encoding)
  local line = vim.api.nvim_buf_get_lines(bufnr, pos.line, pos.line + 1, false)[1]
  if line == nil then
    return nil
  end
  local ok, col = pcall(vim.str_byteindex, line, encoding, pos.character, false)
  return pos.line, ok and col or nil
end

--- The text between two (row, col) positions of `bufnr`; nil where they are not in it.
local function text_between(bufnr, sr, sc, er, ec)
  local ok, lines = pcall(vim.api.nvim_buf_get_text, bufnr, sr, sc, er, ec, {})
  return ok and table.concat(lines, '\n') or nil
end

--- The site of a placed entry now: row, col, end_row, end_col (0-based, bytes).
local function site(entry)
  local mark = vim.api.nvim_buf_get_extmark_by_id(entry.bufnr, M.ns, entry.mark, { details = true })
  if mark[1] == nil then
    return nil
  end
  local details = mark[3]
  return mark[1], mark[2], details.end_row or mark[1], details.end_col or mark[2]
end

--- Whether the entry's site still holds its old text (an entry of a file not loaded: unknown, kept).
local function is_fresh(entry)
  if not entry.bufnr then
    return true
  end
  if not vim.api.nvim_buf_is_valid(entry.bufnr) then
    return false
  end
  local sr, sc, er, ec = site(entry)
  return sr ~= nil and text_between(entry.bufnr, sr, sc, er, ec) == entry.edit.oldText
end

--- Places an entry's site mark in its buffer, where its old text is; false when it is stale.
local function place(entry)
  local bufnr = loaded_buffer(entry.edit.textDocument.uri)
  local client = vim.lsp.get_client_by_id(entry.client_id)
  if not bufnr then
    return true -- listed, placed once its file is opened
  end
  local encoding = client and client.offset_encoding or 'utf-16'
  local sr, sc = to_byte(bufnr, entry.edit.range.start, encoding)
  local er, ec = to_byte(bufnr, entry.edit.range['end'], encoding)
  if sc == nil or ec == nil or text_between(bufnr, sr, sc, er, ec) ~= entry.edit.oldText then
    return false
  end
  entry.bufnr = bufnr
  entry.mark = vim.api.nvim_buf_set_extmark(bufnr, M.ns, sr, sc, {
    end_row = er,
    end_col = ec,
    hl_group = entry.edit.oldText ~= '' and 'SuperposedNextEditRemoved' or nil,
    sign_text = '→',
    sign_hl_group = 'SuperposedNextEditSign',
    right_gravity = false,
    end_right_gravity = true,
  })
  return true
end

local function clear_marks(entry)
  if entry.bufnr and vim.api.nvim_buf_is_valid(entry.bufnr) then
    if entry.mark then
      vim.api.nvim_buf_del_extmark(entry.bufnr, M.ns, entry.mark)
    end
    if entry.text_mark then
      vim.api.nvim_buf_del_extmark(entry.bufnr, M.hint_ns, entry.text_mark)
    end
  end
  entry.mark, entry.text_mark = nil, nil
end

--- What the hint after the best site's line says.
function M.hint(edit)
  local keys = {}
  for _, key in ipairs({ { 'jump', 'jump' }, { 'accept', 'accept' }, { 'dismiss', 'dismiss' } }) do
    if M.keys[key[1]] then
      keys[#keys + 1] = ('%s %s'):format(M.keys[key[1]], key[2])
    end
  end
  return ('  %s  (%s)'):format(edit.label or '', table.concat(keys, ', '))
end

--- Drops the stale entries (and their marks).
local function prune()
  local kept = {}
  for _, entry in ipairs(M.pending) do
    if is_fresh(entry) then
      kept[#kept + 1] = entry
    else
      clear_marks(entry)
    end
  end
  M.pending = kept
end

--- Drops stale entries; draws the new text beside each site and the hint after the best one's
--- line in each buffer.
function M.redraw()
  prune()
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) then
      vim.api.nvim_buf_clear_namespace(bufnr, M.hint_ns, 0, -1)
    end
  end
  local hinted = {}
  for _, entry in ipairs(M.pending) do
    entry.text_mark = nil
    if entry.bufnr then
      local _, _, er, ec = site(entry)
      local insert = entry.edit.oldText == ''
      local new = (entry.edit.newText:gsub('\n', ' ⏎ '))
      entry.text_mark = vim.api.nvim_buf_set_extmark(entry.bufnr, M.hint_ns, er, ec, {
        virt_text = { { new, insert and 'SuperposedNextEditInsert' or 'SuperposedNextEditAdded' } },
        virt_text_pos = 'inline',
      })
      if not hinted[entry.bufnr] then
        hinted[entry.bufnr] = true
        vim.api.nvim_buf_set_extmark(entry.bufnr, M.hint_ns, er, 0, {
          virt_text = { { M.hint(entry.edit), 'SuperposedNextEditHint' } },
          virt_text_pos = 'eol',
        })
      end
    end
  end
end
local redraw = M.redraw

--- The latest proposals in place of the pending ones: `edits` of the protocol, from `client_id`.
function M.set(edits, client_id)
  for _, entry in ipairs(M.pending) do
    clear_marks(entry)
  end
  M.pending = {}
  for _, edit in ipairs(type(edits) == 'table' and edits or {}) do
    if is_edit(edit) and not M.dismissed[edit.id] then
      local entry = { edit = edit, client_id = client_id }
      if place(entry) then
        M.pending[#M.pending + 1] = entry
      end
    end
  end
  redraw()
  vim.api.nvim_exec_autocmds('User', { pattern = 'SuperposedNextEdits', modeline = false })
end

--- The handler of superposed/nextEditsReady: { textDocument, edits }.
function M.on_ready(_, params, ctx)
  M.set(type(params) == 'table' and params.edits or {}, ctx.client_id)
end

--- The pending entries of buffer `bufnr`, fresh, in order.
local function in_buffer(bufnr)
  prune()
  return vim.tbl_filter(function(entry)
    return entry.bufnr == bufnr
  end, M.pending)
end

--- The entry whose site is on the cursor's line, in the current window.
function M.at_cursor()
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  for _, entry in ipairs(in_buffer(vim.api.nvim_get_current_buf())) do
    local sr, _, er = site(entry)
    if sr and row >= sr and row <= er then
      return entry
    end
  end
end

--- Where the jump goes: the best entry of this buffer that the cursor's line is not at.
function M.target()
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  for _, entry in ipairs(in_buffer(vim.api.nvim_get_current_buf())) do
    local sr, _, er = site(entry)
    if sr and (row < sr or row > er) then
      return entry
    end
  end
end

local function go_to(entry)
  local sr, sc = site(entry)
  if sr then
    vim.api.nvim_win_set_cursor(0, { sr + 1, sc })
  end
end

--- Jump key: the cursor to the start of the next site.
function M.jump()
  local entry = M.target()
  if entry then
    go_to(entry)
  else
    vim.notify('superposed: no next edit in this buffer')
  end
end

local function tell(entry, command)
  local client = vim.lsp.get_client_by_id(entry.client_id)
  if client and not client:is_stopped() then
    client:request('workspace/executeCommand', { command = command, arguments = { { id = entry.edit.id } } },
      function(err)
        if err then
          vim.notify(('superposed: %s failed: %s'):format(command, err.message or tostring(err)), vim.log.levels.WARN)
        end
      end, entry.bufnr)
  end
end

local function remove(entry)
  clear_marks(entry)
  M.pending = vim.tbl_filter(function(e)
    return e ~= entry
  end, M.pending)
  redraw()
end

--- Accept key: the edit at the cursor's line goes in as a normal buffer edit (its didChange
--- reaches the server), the cursor after it, and the server hears of the accept.
function M.accept()
  local entry = M.at_cursor()
  if not entry then
    vim.notify('superposed: no next edit on this line (jump to one first)')
    return
  end
  local sr, sc, er, ec = site(entry)
  local lines = vim.split(entry.edit.newText, '\n', { plain = true })
  remove(entry)
  vim.api.nvim_buf_set_text(entry.bufnr, sr, sc, er, ec, lines)
  local last = (#lines == 1 and sc or 0) + #lines[#lines]
  vim.api.nvim_win_set_cursor(0, { sr + #lines, last })
  tell(entry, M.ACCEPTED)
end

--- Dismiss key: the edit at the cursor's line (else the next one) goes; the server stops
--- proposing it.
function M.dismiss()
  local entry = M.at_cursor() or M.target()
  if entry then
    M.dismissed[entry.edit.id] = true
    remove(entry)
    tell(entry, M.DISMISSED)
  end
end

--- One vim.ui.select line: "rename a -> b    users.py:10:11 (file)".
function M.format(entry)
  local edit = entry.edit
  local ok, fname = pcall(vim.uri_to_fname, edit.textDocument.uri)
  local where = ok and vim.fn.fnamemodify(fname, ':~:.') or edit.textDocument.uri
  return ('%s    %s:%d:%d (%s)'):format(edit.label or '', where, edit.range.start.line + 1,
    edit.range.start.character + 1, edit.origin or 'file')
end

--- :SuperposedNextEdits: the server's next edits at the cursor (superposed/nextEdits; the pending
--- ones if it does not answer) through vim.ui.select; the pick opens its file and jumps there.
function M.list(name)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = vim.lsp.get_clients({ name = name, bufnr = bufnr })[1]
  local function show()
    redraw()
    if #M.pending == 0 then
      vim.notify('superposed: no next edits')
      return
    end
    vim.ui.select(M.pending, { prompt = 'Superposed next edits', kind = 'superposed.next_edits',
      format_item = M.format }, function(entry)
      if not entry then
        return
      end
      if not entry.bufnr then
        vim.cmd.edit(vim.fn.fnameescape(vim.uri_to_fname(entry.edit.textDocument.uri)))
        if not place(entry) then
          vim.notify('superposed: that edit no longer applies', vim.log.levels.WARN)
          M.pending = vim.tbl_filter(function(e)
            return e ~= entry
          end, M.pending)
          return
        end
        redraw()
      elseif vim.api.nvim_get_current_buf() ~= entry.bufnr then
        vim.api.nvim_set_current_buf(entry.bufnr)
      end
      go_to(entry)
    end)
  end
  if not client then
    return show()
  end
  local position = vim.lsp.util.make_position_params(0, client.offset_encoding).position
  client:request(M.REQUEST, { textDocument = { uri = vim.uri_from_bufnr(bufnr) }, position = position },
    function(err, result)
      if not err and type(result) == 'table' then
        M.set(result.edits, client.id)
      end
      show()
    end, bufnr)
end

--- The keys, in normal and insert mode, for one buffer.
function M.map(bufnr)
  local function map(lhs, rhs, desc)
    if lhs then
      vim.keymap.set({ 'n', 'i' }, lhs, rhs, { buffer = bufnr, desc = desc })
    end
  end
  map(M.keys.jump, M.jump, 'superposed: jump to the next edit')
  map(M.keys.accept, M.accept, 'superposed: accept the next edit on this line')
  map(M.keys.dismiss, M.dismiss, 'superposed: dismiss the next edit')
end

--- Redraw after the buffer's text changed (stale edits go), once per change.
function M.watch(bufnr)
  vim.api.nvim_create_autocmd({ 'TextChanged', 'TextChangedI' }, {
    buffer = bufnr,
    group = vim.api.nvim_create_augroup('superposed.next_edits.' .. bufnr, { clear = true }),
    callback = function()
      if #M.pending > 0 then
        redraw()
      end
    end,
    desc = 'superposed: drop next edits whose site changed',
  })
end

return M
