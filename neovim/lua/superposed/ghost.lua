--- superposed-lsp for Neovim 0.12+: the drafts as ghost text, drawn by vim.lsp.inline_completion.
---
--- The built-in requests, draws and accepts; this module adds, for this server's items only:
--- - the highlight groups SuperposedGhost and SuperposedGhostHint instead of ComplHint, which
---   has no terminal colour (drafts looked like code without 'termguicolors');
--- - "(1/3)" from the first answer on, on the cursor's line (which of the k drafts is shown);
--- - the draft you chose stays chosen: when the next answer comes after cycling, a partial
---   accept or typing along, the continuation of the draft on screen is shown, not draft 1;
--- - a block that would run past the window's bottom scrolls into view, or is cut with a marker
---   where the window is too short for it;
--- - `hold`: no automatic request while the drafts picker's own is in flight (the server
---   answers only the newest request per document, so a ghost-text request sent meanwhile
---   would leave the picker empty);
--- - `refresh`: a request at the cursor once the model is ready.
--- The hooks go through the built-in's completor class, a private API (vim.lsp._capability):
--- where it is missing or changed, the built-in's own drawing stays.
local M = {}

M.GHOST = 'SuperposedGhost'
M.HINT = 'SuperposedGhostHint'
local NAMESPACE = 'nvim.lsp.inline_completion' -- the built-in's extmarks

--- The draft last shown per buffer and where its text starts: { row, col, text } (0-based).
local shown = {}

--- SuperposedGhost: Comment where Comment has a terminal colour of its own; otherwise (Nvim's
--- default colorscheme gives Comment a GUI grey only, and the terminal's text colour without
--- 'termguicolors') Comment's GUI colour and the terminal's grey (colour 8). `default`: a
--- colorscheme's or the user's definition wins.
function M.define_highlights()
  local comment = vim.api.nvim_get_hl(0, { name = 'Comment', link = false })
  local normal = vim.api.nvim_get_hl(0, { name = 'Normal', link = false })
  if comment.ctermfg and comment.ctermfg ~= normal.ctermfg then
    vim.api.nvim_set_hl(0, M.GHOST, { link = 'Comment', default = true })
  else
    vim.api.nvim_set_hl(0, M.GHOST, { fg = comment.fg, ctermfg = 8, default = true })
  end
  vim.api.nvim_set_hl(0, M.HINT, { link = 'ComplHintMore', default = true })
end

local function ours(client_id)
  local client = client_id and vim.lsp.get_client_by_id(client_id)
  return client ~= nil and client.name == require('superposed').name
end

--- The built-in's completor class, if it still looks as this module expects.
local function completor_class()
  local ok, capability = pcall(require, 'vim.lsp._capability')
  local class = ok and type(capability.all) == 'table' and capability.all.inline_completion
  if type(class) ~= 'table' or type(class.active) ~= 'table' then
    return nil
  end
  for _, method in ipairs({ 'handler', 'show', 'select', 'get_item', 'count_items' }) do
    if type(class[method]) ~= 'function' then
      return nil
    end
  end
  return class
end

--- The text typed between `place` and the cursor of `bufnr`'s window; nil when the cursor is
--- before it or the buffer is not in a window.
local function typed_since(bufnr, place)
  local win = vim.fn.bufwinid(bufnr)
  if win == -1 then
    return nil
  end
  local cursor = vim.api.nvim_win_get_cursor(win)
  local row, col = cursor[1] - 1, cursor[2]
  if row < place.row or (row == place.row and col < place.col) then
    return nil
  end
  local ok, lines = pcall(vim.api.nvim_buf_get_text, bufnr, place.row, place.col, row, col, {})
  return ok and table.concat(lines, '\n') or nil
end

--- Which of the completor's items continues `place`'s draft (the one on screen before this
--- answer): the item whose text is what is left of it after the text typed since (a partial
--- accept, or typing along), else one that starts the same way; nil if none.
function M.follow(completor, place)
  local typed = place and typed_since(completor.bufnr, place)
  if not typed or not vim.startswith(place.text, typed) or #place.text == #typed then
    return nil
  end
  local rest, near = place.text:sub(#typed + 1), nil
  for i = 1, completor:count_items() do
    local client_id, item = completor:get_item(i)
    local text = item and item.insertText
    if type(text) == 'string' and text ~= '' and ours(client_id) then
      if text == rest then
        return i
      elseif not near and (vim.startswith(rest, text) or vim.startswith(text, rest)) then
        near = i
      end
    end
  end
  return near
end

--- After the built-in took an answer (it shows item 1): the draft the user followed, with
--- "(i/n)" when `hint` is on.
local function after_answer(completor, place)
  local current = completor.current
  if not current or not ours(current.client_id) then
    return
  end
  local index = M.follow(completor, place) or current._index
  local hint = require('superposed').options.hint and completor:count_items() > 1
  if index ~= current._index or hint then
    completor:select(index, hint)
  end
end

--- How many of `wanted` virtual lines below row `row` (0-based) fit in `win`, scrolling it
--- (the cursor's line staying in it) so that as many as can do.
function M.fit(win, row, wanted)
  local height = vim.api.nvim_win_get_height(win)
  local function rows(top) -- screen rows from line `top` (1-based) to `row`, inclusive
    return vim.api.nvim_win_text_height(win, { start_row = top - 1, end_row = row }).all
  end
  local top = vim.api.nvim_win_call(win, vim.fn.winsaveview).topline
  if rows(top) + wanted <= height then
    return wanted
  end
  -- no higher than 'scrolloff' allows: Nvim would scroll back to keep lines above the cursor
  local scrolloff = vim.wo[win].scrolloff >= 0 and vim.wo[win].scrolloff or vim.go.scrolloff
  local highest = math.max(top, row + 1 - scrolloff)
  local new = top
  while new < highest and rows(new) + wanted > height do
    new = new + 1
  end
  if new ~= top then
    vim.api.nvim_win_call(win, function()
      vim.fn.winrestview({ topline = new })
    end)
  end
  return math.max(0, math.min(wanted, height - rows(new)))
end

--- The built-in's chunks restyled: SuperposedGhost for the draft, the "(i/n)" hint moved from
--- the block's last line to the cursor's (SuperposedGhostHint); `room` virtual lines at most,
--- the last of them then "… N more lines".
function M.restyle(virt_text, virt_lines, room)
  local hint
  local function recolour(chunks)
    local out = {}
    for _, chunk in ipairs(chunks) do
      if chunk[2] == 'ComplHintMore' then
        hint = { chunk[1], M.HINT }
      else
        out[#out + 1] = { chunk[1], chunk[2] == 'ComplHint' and M.GHOST or chunk[2] }
      end
    end
    return out
  end
  local text, lines = recolour(virt_text), vim.tbl_map(recolour, virt_lines)
  if room and room < #lines then
    local more = #lines - math.max(room - 1, 0)
    lines = vim.list_slice(lines, 1, math.max(room - 1, 0))
    local marker = { ('… %d more lines'):format(more), M.HINT }
    if room > 0 then
      lines[#lines + 1] = { marker }
    else
      text[#text + 1] = { ' ' .. marker[1], M.HINT }
    end
  end
  if hint then
    text[#text + 1] = hint
  end
  return text, lines
end

--- After the built-in drew a draft of ours: its extmark restyled, the block fitted in the
--- window, and the draft remembered as the one on screen.
local function after_show(completor)
  local current, bufnr = completor.current, completor.bufnr
  if not current or not ours(current.client_id) or type(current.insert_text) ~= 'string' then
    return
  end
  local ns = vim.api.nvim_create_namespace(NAMESPACE)
  local mark = vim.api.nvim_buf_get_extmarks(bufnr, ns, 0, -1, { details = true, limit = 1 })[1]
  if not mark then
    return
  end
  local id, row, col, details = mark[1], mark[2], mark[3], mark[4]
  local lines = details.virt_lines or {}
  local win = vim.fn.bufwinid(bufnr)
  local room = (#lines > 0 and win ~= -1) and M.fit(win, row, #lines) or nil
  local text, below = M.restyle(details.virt_text or {}, lines, room)
  vim.api.nvim_buf_set_extmark(bufnr, ns, row, col, {
    id = id,
    virt_text = text,
    virt_lines = below,
    virt_text_pos = details.virt_text_pos,
    hl_mode = details.hl_mode,
  })
  local start_row, start_col = row, col
  if current.range then
    start_row, start_col = current.range:to_extmark()
  else
    local cursor = vim.api.nvim_win_get_cursor(win ~= -1 and win or 0)
    start_row, start_col = cursor[1] - 1, cursor[2]
  end
  shown[bufnr] = { row = start_row, col = start_col, text = current.insert_text }
end

local hooked = false

--- Wraps the built-in's handler and show (once) with `after_answer` and `after_show`.
function M.hook()
  local class = completor_class()
  if hooked or not class then
    return
  end
  hooked = true
  local handler, show = class.handler, class.show
  class.handler = function(self, err, result, ctx, ...)
    local place = shown[self.bufnr] -- the draft on screen before this answer
    handler(self, err, result, ctx, ...)
    after_answer(self, place)
  end
  class.show = function(self, ...)
    show(self, ...)
    after_show(self)
  end
end

local function completor_for(bufnr)
  local class = completor_class()
  return class and class.active[bufnr]
end

--- No automatic request in `bufnr` until the returned function is called: the drafts picker's
--- request is in flight, and a newer request for the document would take its place on the
--- server. Turns the buffer's inline completion off meanwhile (public API), and back on.
function M.hold(bufnr)
  local inline = vim.lsp.inline_completion
  if not inline or not inline.is_enabled({ bufnr = bufnr }) then
    return function() end
  end
  inline.enable(false, { bufnr = bufnr })
  return function()
    if vim.api.nvim_buf_is_valid(bufnr) and not inline.is_enabled({ bufnr = bufnr }) then
      inline.enable(true, { bufnr = bufnr })
    end
  end
end

--- Asks for ghost text at the cursor once (the model just became ready: the requests made while
--- it loaded were answered empty), as typing would.
function M.refresh()
  local bufnr = vim.api.nvim_get_current_buf()
  local completor = completor_for(bufnr)
  if completor and vim.api.nvim_get_mode().mode:match('^i')
    and type(completor.automatic_request) == 'function' then
    completor:automatic_request()
  end
end

--- The handler of superposed/draftsWhole ({ textDocument = { uri } }): the drafts of an answer
--- the server cut at its deadline (answerWithinMs) are whole in its cache; in that buffer, in
--- insert mode, ask again (the server answers from the cache), as the next keystroke would.
function M.on_drafts_whole(_, params)
  local uri = params and params.textDocument and params.textDocument.uri
  if uri and vim.uri_to_bufnr(uri) == vim.api.nvim_get_current_buf() then
    M.refresh()
  end
end

--- Keymaps for ghost text in `bufnr`: accept, cycle, accept the next word or line.
--- `partial(cut)` makes the accept command of a part of a draft (init.lua).
function M.attach(bufnr, keys, map, partial)
  M.hook()
  local inline = vim.lsp.inline_completion
  -- Ghost text is requested as you type; keys.trigger is for the 0.11 popup only.
  inline.enable(true, { bufnr = bufnr })
  map(bufnr, keys.accept, function()
    inline.get({ bufnr = bufnr })
  end, 'superposed: accept draft')
  map(bufnr, keys.next, function()
    inline.select({ bufnr = bufnr, count = 1 })
  end, 'superposed: next draft')
  map(bufnr, keys.prev, function()
    inline.select({ bufnr = bufnr, count = -1 })
  end, 'superposed: previous draft')
  -- Partial accept: the shown draft, cut to its next word or line; the accept command gets the
  -- part. The next ghost text (the rest of the draft) comes from the server's typed-along
  -- cache, and `follow` keeps this draft on screen.
  local function part(cut)
    return function()
      inline.get({
        bufnr = bufnr,
        on_accept = function(item)
          if type(item.insert_text) ~= 'string' then
            return item -- a snippet is accepted whole
          end
          local piece = cut(item.insert_text)
          item.insert_text = piece
          item.command = partial(item.command, piece)
          return item
        end,
      })
    end
  end
  local plugin = require('superposed')
  map(bufnr, keys.accept_word, part(plugin.next_word), 'superposed: accept next word')
  map(bufnr, keys.accept_line, part(plugin.next_line), 'superposed: accept next line')
  if vim.fn.maparg('<Tab>', 'i') == '' then
    vim.keymap.set('i', '<Tab>', function()
      if not inline.get({ bufnr = bufnr }) then
        return '<Tab>'
      end
    end, { buffer = bufnr, expr = true, desc = 'superposed: accept draft' })
  end
end

M.define_highlights()
vim.api.nvim_create_autocmd('ColorScheme', {
  group = vim.api.nvim_create_augroup('superposed.ghost.hl', { clear = true }),
  callback = M.define_highlights,
  desc = 'superposed: the ghost text highlights again after a colorscheme cleared them',
})

return M
