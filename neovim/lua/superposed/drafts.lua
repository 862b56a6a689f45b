--- superposed-lsp for Neovim: all k drafts at a glance (:SuperposedDrafts), through vim.ui.select.
local M = {}

--- The draft a completion item inserts: the raw text in its accept command (the text edit may be
--- an escaped snippet), else its text edit, insert text or label.
function M.draft_text(item)
  local text = vim.tbl_get(item, 'command', 'arguments', 1, 'text')
  if type(text) == 'string' then
    return text
  end
  return (item.textEdit and item.textEdit.newText) or item.insertText or item.label
end

--- The first line of `text` that holds more than blanks, trimmed.
function M.first_line(text)
  for line in vim.gsplit(text, '\n', { plain = true }) do
    if line:find('%S') then
      return vim.trim(line)
    end
  end
  return ''
end

--- How many lines a draft has, not counting the line break it may start with.
function M.line_count(text)
  return #vim.split((text:gsub('^\n+', '')), '\n', { plain = true })
end

--- The k drafts of a completion answer as vim.ui.select entries: the draft, its first line with
--- text, the server's detail (rank, score and source), its line count.
function M.entries(items)
  local entries = {}
  for _, item in ipairs(items) do
    local text = M.draft_text(item)
    if text:find('%S') then
      local lines = M.line_count(text)
      entries[#entries + 1] = {
        text = text,
        label = M.first_line(text),
        detail = item.detail or '',
        lines = lines,
        command = item.command,
      }
    end
  end
  return entries
end

--- How vim.ui.select shows an entry: "return side ** 3    superposed draft 1 (score 0.90, model+store)".
function M.format(entry)
  local block = entry.lines > 1 and (', %d lines'):format(entry.lines) or ''
  return ('%s    %s%s'):format(entry.label, entry.detail, block)
end

--- The k drafts at the cursor (in Normal mode: after the cursor's character,
--- where `a` inserts) through vim.ui.select, so Telescope, fzf-lua or snacks show them when they
--- replace it. The pick goes in there as drafted and the server's accept command runs with it,
--- as after accepting ghost text (the user store learns it). The drafts come from a completion
--- request (Invoked), whose items carry the scores; the server answers it from the drafts it
--- just showed when the user only typed along them. `hold(bufnr)`, if given, stops other
--- requests for the buffer until the function it returns is called (the server answers only a
--- document's newest request: a ghost-text request sent meanwhile would leave this one empty).
function M.show(name, hold)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = vim.lsp.get_clients({ name = name, bufnr = bufnr })[1]
  if not client then
    vim.notify('superposed: the server is not running for this buffer', vim.log.levels.WARN)
    return
  end
  local win = vim.api.nvim_get_current_win()
  local row, col = unpack(vim.api.nvim_win_get_cursor(win))
  local line = vim.api.nvim_buf_get_lines(bufnr, row - 1, row, false)[1] or ''
  if not vim.api.nvim_get_mode().mode:match('^i') and #line > 0 then
    col = math.min(#line, col + vim.str_utf_end(line, col + 1) + 1)
  end
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    position = {
      line = row - 1,
      character = vim.lsp.util.character_offset(bufnr, row - 1, col, client.offset_encoding),
    },
    context = { triggerKind = 1 }, -- Invoked: asked for, the full k
  }
  local tick = vim.api.nvim_buf_get_changedtick(bufnr)
  local release = hold and hold(bufnr) or function() end
  local sent = client:request('textDocument/completion', params, function(err, result)
    release()
    if err then
      vim.notify('superposed: no drafts: ' .. tostring(err.message or err), vim.log.levels.ERROR)
      return
    end
    local entries = M.entries(type(result) == 'table' and (result.items or result) or {})
    if #entries == 0 then
      vim.notify('superposed: no drafts here')
      return
    end
    vim.ui.select(entries, {
      prompt = 'Superposed drafts',
      kind = 'superposed.drafts',
      format_item = M.format,
    }, function(entry)
      if not entry then
        return
      elseif vim.api.nvim_buf_get_changedtick(bufnr) ~= tick then
        vim.notify('superposed: the buffer changed; ask again', vim.log.levels.WARN)
        return
      end
      local lines = vim.split(entry.text, '\n', { plain = true })
      vim.api.nvim_buf_set_text(bufnr, row - 1, col, row - 1, col, lines)
      if vim.api.nvim_win_is_valid(win) and vim.api.nvim_win_get_buf(win) == bufnr then
        local last = (#lines == 1 and col or 0) + #lines[#lines]
        vim.api.nvim_win_set_cursor(win, { row + #lines - 1, last })
      end
      if entry.command then
        client:exec_cmd(entry.command, { bufnr = bufnr })
      end
    end)
  end, bufnr)
  if not sent then
    release()
  end
end

return M
