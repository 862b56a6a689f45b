--- superposed-lsp for Neovim: what the server is doing, said in Neovim's own UI.
---
--- From the server's superposed/status notification (docs/architecture.md, "Status"): loading
--- and indexing show in a small float at the bottom right (badge.lua; with `percent` when the
--- server sends one), ready shows there for a few seconds once per load (or, with
--- `status_float = false`, is said with vim.notify), and a model that does not load is said
--- once, in the server's words (which say what to do). A server that cannot start (problems.lua) or that stops is kept
--- here too. :SuperposedStatus sums it up in a few lines; :SuperposedStatus! lists every
--- counter in a scratch buffer.
local M = {}

--- kind: stopped | starting | loading | indexing | ready | error (the model did not load) |
--- failed (the server did not start, or stopped); model, percent, message, stats.
M.state = { kind = 'stopped' }

local said = {} -- messages already shown: each problem once

local badge = require('superposed.badge')
local READY_S = 4 -- how long "ready" stays in the float
local PROBLEM_S = 15 -- how long a problem said in Insert mode stays in the float

local function floating()
  return require('superposed').options.status_float ~= false
end

--- Shows `message` unless it was shown already (by this module or the server's showMessage);
--- in Insert mode, where "-- INSERT --" is drawn over it, in the float too. Scheduled: an
--- error-level message shown from inside an autocommand (FileType) would be reported as that
--- autocommand's error, with a stack trace.
function M.say(message, level)
  if not said[message] then
    said[message] = true
    vim.schedule(function()
      vim.notify(message, level)
      if floating() and vim.api.nvim_get_mode().mode:match('^i') then
        badge.show(message, PROBLEM_S)
      end
    end)
  end
end

--- The server's window/showMessage, remembered so that the same words in superposed/status
--- are not shown twice, then shown as Neovim does.
function M.on_show_message(err, params, ctx, ...)
  if type(params) == 'table' and type(params.message) == 'string' then
    said[params.message] = true
  end
  return vim.lsp.handlers['window/showMessage'](err, params, ctx, ...)
end

--- One line for a statusline: "superposed: loading smollm2-135m 40%", "superposed: ready
--- (smollm2-135m, k=3)", or what is wrong.
function M.line()
  local s = M.state
  local settings = require('superposed').options.settings or {}
  local model = s.model or vim.tbl_get(s, 'stats', 'model') or settings.model or 'the model'
  local percent = s.percent and (' %d%%'):format(s.percent) or ''
  if s.kind == 'ready' then
    local k = vim.tbl_get(s, 'stats', 'settings', 'k') or settings.k or 3
    return ('superposed: ready (%s, k=%d)'):format(model, k)
  elseif s.kind == 'loading' then
    return ('superposed: loading %s%s'):format(model, percent)
  elseif s.kind == 'indexing' then
    return ('superposed: indexing%s'):format(percent)
  elseif s.kind == 'error' or s.kind == 'failed' then
    return s.message
  end
  return 'superposed: ' .. s.kind
end

--- The model is ready after loading: said (with the model and k, from superposed.stats), and
--- ghost text asked for at the cursor (the requests made while it loaded were answered empty).
local function announce(client)
  require('superposed.ghost').refresh()
  client:request('workspace/executeCommand', { command = 'superposed.stats', arguments = {} },
    function(err, result)
      if not err and type(result) == 'table' then
        M.state.stats = result
      end
      if M.state.kind ~= 'ready' then
        return
      elseif floating() then
        badge.show(M.line(), READY_S)
      else
        vim.notify(M.line())
      end
    end)
end

--- The handler of superposed/status: { state = loading | indexing | ready | error, model,
--- message?, percent?, step? }.
function M.on_status(_, status, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if not client or type(status) ~= 'table' then
    return
  end
  local model = type(status.model) == 'string' and status.model or nil
  local percent = type(status.percent) == 'number' and math.floor(status.percent) or nil
  local message = type(status.message) == 'string' and status.message or nil
  if status.state == 'ready' then
    local before = M.state.kind -- ready again (the compiled step is in), or after indexing: quiet
    M.state = { kind = 'ready', model = model, step = status.step, stats = M.state.stats }
    if before == 'indexing' then
      badge.close() -- :SuperposedIndex says how it went
    elseif before ~= 'ready' then
      announce(client)
    end
  elseif status.state == 'error' then
    local said_by_server = 'superposed: ' .. (message or 'the model did not load')
    M.state = { kind = 'error', model = model, message = said_by_server }
    badge.close()
    M.say(M.state.message, vim.log.levels.ERROR)
  elseif status.state == 'loading' or status.state == 'indexing' then
    M.state = { kind = status.state, model = model, percent = percent, stats = M.state.stats }
    if floating() then
      badge.show(M.line())
    end
  end
  vim.api.nvim_exec_autocmds('User', { pattern = 'SuperposedStatus', modeline = false })
end

--- The server cannot start: `problem` says why and what to do; said once.
function M.fail(problem)
  M.state = { kind = 'failed', message = problem }
  M.say(problem, vim.log.levels.ERROR)
end

--- on_exit of lsp/superposed.lua: a server that stopped on its own is kept as failed (Neovim
--- says "quit with exit code"; :SuperposedStatus says what to do).
function M.on_exit(code, signal)
  badge.close()
  if code ~= 0 or (signal ~= 0 and signal ~= 15) then
    if M.state.kind ~= 'failed' then
      M.state = {
        kind = 'failed',
        message = ('superposed: the server stopped (exit code %d); its last words are in %s; '
          .. ':SuperposedRestart starts it again'):format(code, require('vim.lsp.log').get_filename()),
      }
    end
  elseif M.state.kind ~= 'failed' then
    M.state = { kind = 'stopped' }
  end
end

--- A new start: the problems may have been fixed, and are said again if not.
function M.reset()
  said = {}
  M.state = { kind = 'starting' }
end

--- "a, b.c: 1" lines of nested tables (JSON null reads "none").
function M.flatten(stats, prefix, out)
  out = out or {}
  for key, value in vim.spairs(stats) do
    local name = prefix and (prefix .. '.' .. key) or key
    if type(value) == 'table' and not vim.islist(value) then
      M.flatten(value, name, out)
    else
      out[#out + 1] = ('%s: %s'):format(name, value == vim.NIL and 'none' or vim.inspect(value))
    end
  end
  return out
end

local function files(store)
  return type(store) == 'table' and type(store.files) == 'number' and store.files or 0
end

local function count(n, what)
  return ('%d %s%s'):format(n, what, n == 1 and '' or 's')
end

--- :SuperposedStatus in a few lines: the state (or what is wrong), the settings people change
--- most, the stores.
function M.summary(stats)
  local lines = { M.line() }
  if type(stats) ~= 'table' then
    return lines
  end
  local s = type(stats.settings) == 'table' and stats.settings or {}
  local function get(key)
    local value = s[key]
    return value == nil and '?' or (type(value) == 'boolean' and (value and 'on' or 'off') or tostring(value))
  end
  lines[#lines + 1] = ('  k %s, trigger %s, lineMode %s, maxNewTokens %s, nextEdits %s'):format(
    get('k'), get('trigger'), get('lineMode'), get('maxNewTokens'), get('nextEdits'))
  local stores = type(stats.stores) == 'table' and stats.stores or {}
  local codebase = 0
  for _, store in pairs(type(stores.codebase) == 'table' and stores.codebase or {}) do
    codebase = codebase + files(store)
  end
  local user = stores.user ~= nil and stores.user ~= vim.NIL
      and 'user store ' .. count(files(stores.user), 'file') or 'user store off'
  lines[#lines + 1] = ('  codebase store %s, %s; :SuperposedStatus! for every counter')
    :format(count(codebase, 'file'), user)
  return lines
end

--- The full stats in a scratch buffer (:SuperposedStatus!).
function M.details(stats)
  local lines = { M.line(), '' }
  vim.list_extend(lines, M.flatten(type(stats) == 'table' and stats or {}))
  local name = 'superposed://status'
  local old = vim.fn.bufnr(name)
  if old ~= -1 then
    vim.api.nvim_buf_delete(old, { force = true })
  end
  vim.cmd('botright new')
  local buf = vim.api.nvim_get_current_buf()
  vim.bo[buf].buftype, vim.bo[buf].bufhidden, vim.bo[buf].swapfile = 'nofile', 'wipe', false
  vim.api.nvim_buf_set_name(buf, name)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  return buf
end

return M
