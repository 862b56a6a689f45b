--- superposed-lsp for Neovim: k drafts from one superposed decoding pass as completions.
---
--- Neovim 0.12+: inline (ghost-text) completion via vim.lsp.inline_completion.
--- Neovim 0.11:  the drafts as completion items via vim.lsp.completion (the popup).
---
---   require('superposed').setup({ python = '/path/to/.venv/bin/python', settings = { k = 3 } })
local M = {}

M.name = 'superposed'

--- Defaults; `settings` uses the server's own names (the same as VS Code's superposed.*).
M.defaults = {
  -- Interpreter with superposed-lsp installed; ignored when `cmd` is given.
  python = 'python3',
  -- Full server command, e.g. { 'superposed-lsp' } or { 'superposed-lsp', '-v' }.
  cmd = nil,
  filetypes = { 'python' },
  root_markers = { 'pyproject.toml', 'setup.py', 'setup.cfg', '.git' },
  -- Sent as initializationOptions and workspace settings; unset keys take the server's defaults:
  -- model, device, dtype, precision, runner, threads, compile, k, method, maxNewTokens, alpha,
  -- temperature, mix, memory, memorySeed, verify, lambdas, orders, codebaseDb, userDb, userStore,
  -- userWeight, indexOnSave, lineMode.
  settings = {},
  -- 0.11: ask for completions as you type (at the server's trigger characters); else use keys.trigger.
  autotrigger = false,
  -- Insert-mode keys; false disables one.
  keys = {
    trigger = '<C-Space>', -- ask for drafts now
    accept = '<M-CR>', -- accept the current draft (0.11: also <C-y>; 0.12: also <Tab> if free)
    next = '<M-]>', -- next draft
    prev = '<M-[>', -- previous draft
  },
}

M.options = vim.deepcopy(M.defaults)

--- What the server is doing, for :SuperposedStatus and statuslines.
M.state = { kind = 'stopped', percent = nil, title = nil, stats = nil }

local function has_inline()
  return vim.lsp.inline_completion ~= nil
end

--- The command that starts the server on stdio.
function M.server_cmd(opts)
  if opts.cmd then
    return opts.cmd
  end
  return { opts.python, '-m', 'lsp_server.cli' }
end

local function client_for(bufnr)
  return vim.lsp.get_clients({ name = M.name, bufnr = bufnr })[1]
end

local function map(bufnr, lhs, rhs, desc)
  if lhs then
    vim.keymap.set('i', lhs, rhs, { buffer = bufnr, desc = desc, expr = type(rhs) == 'string' })
  end
end

--- The popup entry of a draft. Neovim 0.11 inserts a plain-text item only up to its first
--- space ("2 * side" would insert "2"); a draft is inserted whole (its first line: the popup
--- cannot insert line breaks).
function M.complete_item(item)
  local text = (item.textEdit and item.textEdit.newText) or item.insertText or item.label
  return { word = vim.split(text, '\n', { plain = true })[1] }
end

--- Keymaps for the popup (0.11): the drafts are completion items.
local function attach_completion(client, bufnr)
  local keys = M.options.keys
  vim.lsp.completion.enable(true, client.id, bufnr, {
    autotrigger = M.options.autotrigger,
    convert = M.complete_item,
  })
  map(bufnr, keys.trigger, function()
    vim.lsp.completion.get()
  end, 'superposed: drafts')
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
end

--- Keymaps for ghost text (0.12+): the drafts are inline completion items.
local function attach_inline(_, bufnr)
  local keys = M.options.keys
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
  if vim.fn.maparg('<Tab>', 'i') == '' then
    vim.keymap.set('i', '<Tab>', function()
      if not inline.get({ bufnr = bufnr }) then
        return '<Tab>'
      end
    end, { buffer = bufnr, expr = true, desc = 'superposed: accept draft' })
  end
end

--- Runs one of the server's commands; `on_result(err, result)` is called with its answer.
function M.execute(command, on_result, bufnr)
  local client = client_for(bufnr or 0) or vim.lsp.get_clients({ name = M.name })[1]
  if not client then
    vim.notify('superposed: the server is not running', vim.log.levels.WARN)
    return
  end
  client:request('workspace/executeCommand', { command = command, arguments = {} }, on_result)
end

--- One line for a statusline: "superposed: loading smollm2-135m 40%", "superposed: ready (smollm2-135m, k=3)".
function M.status()
  local s = M.state
  if s.kind == 'ready' then
    local stats, settings = s.stats or {}, M.options.settings
    local model = stats.model or settings.model or 'default model'
    local k = (stats.settings and stats.settings.k) or settings.k or 3
    return ('superposed: ready (%s, k=%d)'):format(model, k)
  end
  local percent = s.percent and (' %d%%'):format(s.percent) or ''
  return ('superposed: %s%s'):format(s.title or s.kind, percent)
end

local function flatten(stats, prefix, out)
  for key, value in vim.spairs(stats) do
    local name = prefix and (prefix .. '.' .. key) or key
    if type(value) == 'table' and not vim.islist(value) then
      flatten(value, name, out)
    else
      out[#out + 1] = ('%s: %s'):format(name, vim.inspect(value))
    end
  end
  return out
end
M.flatten_stats = flatten

--- :SuperposedStatus: the state and the store stats.
function M.show_status()
  M.execute('superposed.stats', function(err, result)
    local lines = { M.status() }
    if err then
      lines[#lines + 1] = 'stats failed: ' .. tostring(err.message or err)
    elseif type(result) == 'table' then
      M.state.stats = result
      for _, key in ipairs({ 'model', 'ready', 'error', 'counters', 'stores' }) do
        if result[key] ~= nil then
          vim.list_extend(lines, flatten({ [key] = result[key] }, nil, {}))
        end
      end
    end
    vim.notify(table.concat(lines, '\n'))
  end)
end

--- :SuperposedIndex: index the workspace into the codebase store (progress in the messages).
function M.index()
  M.execute('superposed.indexWorkspace', function(err, result)
    if err then
      vim.notify('superposed: indexing failed: ' .. tostring(err.message or err), vim.log.levels.ERROR)
    else
      local summary = type(result) == 'table' and table.concat(flatten(result, nil, {}), ', ') or ''
      vim.notify('superposed: workspace indexed ' .. summary)
    end
  end)
end

--- :SuperposedRestart: a new server process for every attached buffer.
function M.restart()
  for _, client in ipairs(vim.lsp.get_clients({ name = M.name })) do
    client:stop(true)
  end
  M.state = { kind = 'starting' }
  vim.defer_fn(function()
    -- Start clients for the open buffers again (enable alone does so only after VimEnter).
    vim.lsp.enable(M.name)
    vim.cmd.doautoall('nvim.lsp.enable FileType')
  end, 500)
end

--- Mirrors the server's work-done progress (model load, indexing) in M.state.
local function on_progress(args)
  local client = vim.lsp.get_client_by_id(args.data.client_id)
  local value = args.data.params and args.data.params.value
  if not client or client.name ~= M.name or type(value) ~= 'table' then
    return
  end
  if value.kind == 'begin' then
    -- The server's title is its name; the message says what it does ("loading smollm2-135m").
    M.state = { kind = 'busy', title = value.message or value.title, percent = value.percentage }
  elseif value.kind == 'report' then
    M.state.percent = value.percentage or M.state.percent
  elseif value.kind == 'end' and (value.message or ''):find('^failed') then
    M.state = { kind = 'error', title = value.message }
  elseif value.kind == 'end' then
    M.state = { kind = 'ready', stats = M.state.stats }
    client:request('workspace/executeCommand', { command = 'superposed.stats', arguments = {} },
      function(err, result)
        if not err and type(result) == 'table' then
          M.state.stats = result
        end
      end)
  end
  vim.api.nvim_exec_autocmds('User', { pattern = 'SuperposedStatus', modeline = false })
end

function M.setup(opts)
  M.options = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  local o = M.options
  local settings = vim.empty_dict()
  for key, value in pairs(o.settings) do
    settings[key] = value
  end
  vim.lsp.config(M.name, {
    cmd = M.server_cmd(o),
    filetypes = o.filetypes,
    root_markers = o.root_markers,
    init_options = settings,
    settings = { superposed = settings },
  })
  local group = vim.api.nvim_create_augroup('superposed', { clear = true })
  vim.api.nvim_create_autocmd('LspAttach', {
    group = group,
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data.client_id)
      if not client or client.name ~= M.name then
        return
      end
      if M.state.kind == 'stopped' then
        M.state = { kind = 'starting' }
      end
      if has_inline() then
        attach_inline(client, args.buf)
      else
        attach_completion(client, args.buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd('LspProgress', { group = group, callback = on_progress })
  vim.api.nvim_create_user_command('SuperposedStatus', M.show_status, { desc = 'superposed: status and store stats' })
  vim.api.nvim_create_user_command('SuperposedIndex', M.index, { desc = 'superposed: index the workspace' })
  vim.api.nvim_create_user_command('SuperposedRestart', M.restart, { desc = 'superposed: restart the server' })
  vim.lsp.enable(M.name)
end

return M
