--- superposed-lsp for Neovim: a one-line float at the editor's bottom right, above the status
--- line, for what the server is doing ("superposed: loading smollm2-135m 40%", "superposed:
--- ready (smollm2-135m, k=3)"). An echo cannot say it in Insert mode: Neovim redraws
--- "-- INSERT --" over any message echoed there (0.11 and 0.12, tried in a terminal), and a
--- user often types while the model loads. Core API only (nvim_open_win), no plugin.
local M = {}

M.HIGHLIGHT = 'SuperposedStatusFloat'

local buf, win, timer

--- Where the float goes: the editor's bottom right, above the command line and status line.
local function placement(text)
  local width = math.max(1, math.min(vim.api.nvim_strwidth(text), vim.o.columns - 2))
  local height = math.ceil(vim.api.nvim_strwidth(text) / width)
  local bottom = vim.o.lines - vim.o.cmdheight - (vim.o.laststatus > 0 and 1 or 0)
  return {
    relative = 'editor',
    anchor = 'SE',
    row = math.max(bottom, height),
    col = vim.o.columns,
    width = width,
    height = height,
    style = 'minimal',
    focusable = false,
    zindex = 200,
    noautocmd = true,
  }
end

--- Closes the float (if open).
local function stop_timer()
  if timer and not timer:is_closing() then
    timer:stop()
    timer:close()
  end
  timer = nil
end

function M.close()
  stop_timer()
  if win and vim.api.nvim_win_is_valid(win) then
    vim.api.nvim_win_close(win, true)
  end
  win = nil
end

--- Shows `text` in the float (replacing what it showed); closes it after `seconds` if given.
function M.show(text, seconds)
  if not buf or not vim.api.nvim_buf_is_valid(buf) then
    buf = vim.api.nvim_create_buf(false, true)
    vim.bo[buf].bufhidden = 'hide'
  end
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, { text })
  local config = placement(text)
  if win and vim.api.nvim_win_is_valid(win) then
    config.noautocmd = nil -- only for a new window
    vim.api.nvim_win_set_config(win, config)
  else
    win = vim.api.nvim_open_win(buf, false, config)
    vim.wo[win].winhighlight = 'NormalFloat:' .. M.HIGHLIGHT
    vim.wo[win].wrap = true
  end
  stop_timer()
  if seconds then
    timer = vim.defer_fn(M.close, seconds * 1000)
  end
end

--- What the float shows now, or nil when it is closed (for tests and statuslines).
function M.text()
  if win and vim.api.nvim_win_is_valid(win) then
    return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
  end
  return nil
end

local function define_highlight()
  vim.api.nvim_set_hl(0, M.HIGHLIGHT, { link = 'NormalFloat', default = true })
end
define_highlight()
vim.api.nvim_create_autocmd('ColorScheme', {
  group = vim.api.nvim_create_augroup('superposed.badge.hl', { clear = true }),
  callback = define_highlight,
  desc = 'superposed: the status float highlight again after a colorscheme cleared it',
})

return M
