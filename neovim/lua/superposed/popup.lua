--- superposed-lsp for Neovim 0.11: the drafts as completion items in the built-in popup
--- (vim.lsp.completion), with the plugin's keys.
local drafts = require('superposed.drafts')

local M = {}

--- The popup entry of a draft. Neovim 0.11 inserts a plain-text item only up to its first
--- space ("2 * side" would insert "2"); a draft is inserted whole. The popup inserts one line:
--- a block's first line is the word, the built-in completion expands only that line, and the
--- rest of the block goes in below it on accept (CompleteDone, see `insert_rest`), as drafted:
--- a snippet would re-indent every line by the cursor line's indentation. The label is the
--- block's first line with text, the info popup shows the whole block.
function M.complete_item(item)
  local text = (item.textEdit and item.textEdit.newText) or item.insertText or item.label
  local lines = vim.split(text, '\n', { plain = true })
  if #lines == 1 then
    return { word = lines[1] }
  end
  local text_of = drafts.draft_text(item)
  local draft = vim.split(text_of, '\n', { plain = true })
  local one_line = vim.deepcopy(item)
  if one_line.textEdit then
    one_line.textEdit.newText = lines[1]
  end
  if one_line.insertText then
    one_line.insertText = vim.split(one_line.insertText, '\n', { plain = true })[1]
  end
  local plugin = require('superposed')
  local client = vim.lsp.get_clients({ name = plugin.name, bufnr = 0 })[1]
  return {
    word = draft[1],
    abbr = drafts.first_line(text_of),
    menu = ('%s, %d lines'):format(item.detail or 'superposed', drafts.line_count(text_of)),
    info = (text_of:gsub('^\n+', '')),
    user_data = {
      nvim = { lsp = { completion_item = one_line, client_id = client and client.id } },
      superposed = { rest = vim.list_slice(draft, 2) },
    },
  }
end

--- After a block's first line went in from the popup: its other lines below it, as drafted
--- (no re-indenting), and the cursor at the end of the last.
function M.insert_rest(bufnr, rest)
  local win = vim.api.nvim_get_current_win()
  if vim.api.nvim_win_get_buf(win) ~= bufnr or #rest == 0 then
    return
  end
  local row, col = unpack(vim.api.nvim_win_get_cursor(win))
  vim.api.nvim_buf_set_text(bufnr, row - 1, col, row - 1, col, vim.list_extend({ '' }, rest))
  vim.api.nvim_win_set_cursor(win, { row + #rest, #rest[#rest] })
end

--- Keymaps for the popup in `bufnr`: the drafts are completion items. `partial(command, part)`
--- makes the accept command of a part of a draft (init.lua).
function M.attach(client, bufnr, options, map, partial)
  local keys = options.keys
  vim.lsp.completion.enable(true, client.id, bufnr, {
    autotrigger = options.autotrigger,
    convert = M.complete_item,
  })
  map(bufnr, keys.trigger, function()
    vim.lsp.completion.get()
  end, 'superposed: drafts')
  vim.api.nvim_create_autocmd('CompleteDone', {
    buffer = bufnr,
    group = vim.api.nvim_create_augroup('superposed.block.' .. bufnr, { clear = true }),
    callback = function()
      local rest = vim.tbl_get(vim.v.completed_item, 'user_data', 'superposed', 'rest')
      if type(rest) == 'table' and vim.v.event.reason == 'accept' then
        vim.schedule(function()
          M.insert_rest(bufnr, rest)
        end)
      end
    end,
    desc = 'superposed: the rest of an accepted block',
  })
  local function pum(key, fallback)
    return function()
      return vim.fn.pumvisible() == 1 and key or fallback
    end
  end
  if keys.accept then
    vim.keymap.set('i', keys.accept, pum('<C-y>', '<CR>'), { buffer = bufnr, expr = true })
  end
  if keys.next then
    vim.keymap.set('i', keys.next, pum('<C-n>', ''), { buffer = bufnr, expr = true })
  end
  if keys.prev then
    vim.keymap.set('i', keys.prev, pum('<C-p>', ''), { buffer = bufnr, expr = true })
  end
  -- Partial accept of the selected draft (the first if none is): close the popup (<C-e> takes
  -- back what selecting inserted), insert the part, and run the accept command with it.
  local function part(cut)
    return function()
      if vim.fn.pumvisible() == 0 then
        return ''
      end
      local info = vim.fn.complete_info({ 'items', 'selected' })
      local item = info.items[math.max(info.selected, 0) + 1]
      local lsp_item = item and vim.tbl_get(item, 'user_data', 'nvim', 'lsp', 'completion_item')
      local command = lsp_item and lsp_item.command
      local text = command and vim.tbl_get(command, 'arguments', 1, 'text')
      if type(text) ~= 'string' then
        return ''
      end
      local piece = cut(text)
      vim.schedule(function()
        vim.api.nvim_put(vim.split(piece, '\n', { plain = true }), 'c', false, true)
        client:exec_cmd(partial(command, piece), { bufnr = bufnr })
      end)
      return '<C-e>'
    end
  end
  local plugin = require('superposed')
  if keys.accept_word then
    vim.keymap.set('i', keys.accept_word, part(plugin.next_word), { buffer = bufnr, expr = true })
  end
  if keys.accept_line then
    vim.keymap.set('i', keys.accept_line, part(plugin.next_line), { buffer = bufnr, expr = true })
  end
end

return M
