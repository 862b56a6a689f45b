--- superposed-lsp for Neovim: k drafts from one superposed decoding pass as completions.
---
--- Neovim 0.12+: inline (ghost-text) completion via vim.lsp.inline_completion; a block's lines
---               below the cursor's are virtual lines, and a "(1/3)" hint says which draft.
--- Neovim 0.11:  the drafts as completion items via vim.lsp.completion (the popup); a block
---               shows its first line, the whole block in the info popup, and goes in whole.
--- Both:         :SuperposedDrafts lists the k drafts through vim.ui.select; the pick goes in.
---
---   require('superposed').setup({ python = '/path/to/.venv/bin/python', settings = { k = 3 } })
---
--- or, without setup(), with the config in lsp/superposed.lua:
---
---   vim.lsp.config('superposed', { cmd = { '/path/to/.venv/bin/python', '-m', 'lsp_server.cli' } })
---   vim.lsp.enable('superposed')
local drafts = require('superposed.drafts')
local ghost = require('superposed.ghost')
local next_edits = require('superposed.next_edits')
local popup = require('superposed.popup')
local problems = require('superposed.problems')
local status = require('superposed.status')

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
  -- Sent as initializationOptions and workspace settings; unset keys take the server's defaults.
  -- settings: python -m lsp_server.pages.settings_pages
  -- model, k, lineMode, trigger, nextEdits, maxNewTokens, maxLines, midLine, minPrefixChars,
  -- triggerOnAccept, nextEditsScope, indexOnSave, userStore, memory, wellFormed, fim,
  -- debounceMs, device, dtype, runner, precision, threads, compile, prefillCopy,
  -- maxPromptTokens, answerWithinMs, firstPromptTokens, userWeight, maxFileBytes, codebaseDb,
  -- userDb, sharedIndexes, sharedBudgetMs; research = { method, alpha, mix, temperature,
  -- lambdas, orders, memorySeed, branch, distinctDrafts, sharedWeight }.
  settings = {},
  -- 0.11: ask for completions as you type (at the server's trigger characters); else use keys.trigger.
  autotrigger = false,
  -- 'auto': ghost text on 0.12+, the built-in popup on 0.11; 'none': the plugin shows nothing
  -- and maps no keys, for nvim-cmp or blink.cmp (their LSP source lists the drafts).
  ui = 'auto',
  -- Insert-mode keys; false disables one.
  keys = {
    trigger = '<C-Space>', -- ask for drafts now
    accept = '<M-CR>', -- accept the current draft (0.11: also <C-y>; 0.12: also <Tab> if free)
    next = '<M-]>', -- next draft
    prev = '<M-[>', -- previous draft
    accept_word = '<M-Right>', -- accept the draft's next word (as copilot.vim)
    accept_line = '<M-C-Right>', -- accept the draft's next line
    drafts = '<M-d>', -- all k drafts in vim.ui.select (:SuperposedDrafts); the pick goes in
  },
  -- Loading and ready in a small float at the bottom right (shown in Insert mode too, where
  -- an echo is drawn over); false: no float (ready is said with vim.notify, and status()
  -- still serves a statusline).
  status_float = true,
  -- 0.12: "(1/3)" beside the ghost text: which of the k drafts is shown. The ghost text's
  -- highlight is SuperposedGhost (default: Comment, or a grey where Comment has no terminal
  -- colour), the hint's SuperposedGhostHint (default: ComplHintMore).
  hint = true,
  -- Next edits (superposed/next_edits.lua): normal- and insert-mode keys; false disables one.
  next_edits = {
    keys = { jump = '<M-n>', accept = '<M-y>', dismiss = '<M-e>' },
  },
}

M.options = vim.deepcopy(M.defaults)

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

--- The part of a draft that "accept next word" inserts: leading blanks and one word, or one run
--- of punctuation (non-ASCII bytes count as word characters, so a UTF-8 character stays whole).
function M.next_word(text)
  return text:match('^%s*[%w_\128-\255]+') or text:match('^%s*[^%w_%s\128-\255]+') or text
end

--- The part of a draft that "accept next line" inserts: up to the end of its first line (a draft
--- that starts with a line break: that break and the line after it).
function M.next_line(text)
  return text:match('^\n?[^\n]*')
end

--- The server's accept command for a part of a draft: the user store learns what was inserted.
--- Without the full accept's `position`: the server would draft ahead after the part and those
--- drafts would take the place of the rest of this one (a block's next lines), which is the
--- next ghost text; VS Code's partial accepts send none either.
local function partial_command(command, part)
  if not command or type(command.arguments) ~= 'table' or type(command.arguments[1]) ~= 'table' then
    return command
  end
  local argument = vim.tbl_extend('force', command.arguments[1], { text = part })
  argument.position = nil
  return vim.tbl_extend('force', command, { arguments = { argument } })
end

local function client_for(bufnr)
  return vim.lsp.get_clients({ name = M.name, bufnr = bufnr })[1]
end

local function map(bufnr, lhs, rhs, desc)
  if lhs then
    vim.keymap.set('i', lhs, rhs, { buffer = bufnr, desc = desc, expr = type(rhs) == 'string' })
  end
end

--- What a command says when no server runs: why (the setup problem), else how to start one.
local function not_running()
  local state = status.state
  if state.kind == 'failed' then
    return state.message
  end
  return ('superposed: the server is not running: open a %s file (:checkhealth superposed says'
    .. ' what keeps it from starting)'):format(table.concat(M.options.filetypes, '/'))
end

--- :SuperposedDrafts: the k drafts at the cursor through vim.ui.select (superposed/drafts.lua);
--- on 0.12 the ghost text makes no request while the picker's is in flight.
function M.show_drafts()
  drafts.show(M.name, ghost.hold)
end

--- Runs one of the server's commands; `on_result(err, result)` is called with its answer.
function M.execute(command, on_result, bufnr, arguments)
  local client = client_for(bufnr or 0) or vim.lsp.get_clients({ name = M.name })[1]
  if not client then
    vim.notify(not_running(), vim.log.levels.WARN)
    return
  end
  client:request('workspace/executeCommand', { command = command, arguments = arguments or {} }, on_result)
end

--- One line for a statusline: "superposed: loading smollm2-135m 40%", "superposed: ready
--- (smollm2-135m, k=3)", or what is wrong.
function M.status()
  return status.line()
end

--- :SuperposedStatus: the state (or what is wrong), key settings and the stores in a few lines;
--- :SuperposedStatus! (`details`): every counter, in a scratch buffer.
function M.show_status(details)
  if not (client_for(0) or vim.lsp.get_clients({ name = M.name })[1]) then
    return vim.notify(not_running(), vim.log.levels.WARN)
  end
  M.execute('superposed.stats', function(err, result)
    if err then
      return vim.notify(M.status() .. '\nstats failed: ' .. tostring(err.message or err))
    end
    status.state.stats = result
    if details then
      status.details(result)
    else
      vim.notify(table.concat(status.summary(result), '\n'))
    end
  end)
end

--- :SuperposedIndex: index the workspace into the codebase store (progress in the messages).
function M.index()
  M.execute('superposed.indexWorkspace', function(err, result)
    if err then
      vim.notify('superposed: indexing failed: ' .. tostring(err.message or err), vim.log.levels.ERROR)
    else
      local summary = type(result) == 'table' and table.concat(status.flatten(result), ', ') or ''
      vim.notify('superposed: workspace indexed ' .. summary)
    end
  end)
end

--- :SuperposedForget [path]: erase a file or folder (default: this buffer's file) from the stores;
--- :SuperposedForget!: erase everything in the user store (docs/privacy.md).
function M.forget(opts)
  local args = {}
  if not opts.bang then
    local path = opts.args ~= '' and vim.fn.fnamemodify(opts.args, ':p') or vim.api.nvim_buf_get_name(0)
    if path == '' then
      vim.notify('superposed: name a file or folder to forget', vim.log.levels.WARN)
      return
    end
    args = { { path = path } }
  end
  M.execute('superposed.forget', function(err, result)
    if err or (type(result) == 'table' and result.error) then
      local why = err and tostring(err.message or err) or tostring(result.error)
      vim.notify('superposed: forgetting failed: ' .. why, vim.log.levels.ERROR)
    else
      local files = 0
      for _, n in pairs(type(result) == 'table' and result.removed or {}) do
        files = files + n
      end
      vim.notify(('superposed: %d stored file(s) erased'):format(files))
    end
  end, nil, args)
end

--- :SuperposedRestart: a new server process for every buffer it serves, the interpreter asked
--- again (the user may have fixed it).
function M.restart()
  local clients = vim.lsp.get_clients({ name = M.name })
  for _, client in ipairs(clients) do
    client:stop(true)
  end
  problems.forget()
  status.reset()
  local function start()
    -- Start clients for the open buffers again (enable alone does so only after VimEnter).
    vim.lsp.enable(M.name)
    vim.cmd.doautoall('nvim.lsp.enable FileType')
  end
  local timer = vim.uv.new_timer()
  timer:start(0, 50, vim.schedule_wrap(function()
    if vim.iter(clients):all(function(c) return c:is_stopped() end) and not timer:is_closing() then
      timer:close()
      start()
    end
  end))
end

--- Filetypes whose completions :SuperposedToggle turned off (this session).
M.disabled = {}

--- Turns the drafts on or off in one buffer (the client stays attached: saves are still learned).
local function enable_in(client, bufnr, on)
  if M.options.ui == 'none' then
    return
  elseif has_inline() then
    vim.lsp.inline_completion.enable(on, { bufnr = bufnr })
  elseif on then
    popup.attach(client, bufnr, M.options, map, partial_command)
  else
    vim.lsp.completion.enable(false, client.id, bufnr)
  end
end

--- :SuperposedToggle [filetype]: completions off (or on again) for a filetype, the current
--- buffer's by default, in every buffer of it.
function M.toggle(filetype)
  local ft = (filetype and filetype ~= '') and filetype or vim.bo.filetype
  M.disabled[ft] = not M.disabled[ft] or nil
  for _, client in ipairs(vim.lsp.get_clients({ name = M.name })) do
    for bufnr in pairs(client.attached_buffers) do
      if vim.bo[bufnr].filetype == ft then
        enable_in(client, bufnr, not M.disabled[ft])
      end
    end
  end
  vim.notify(('superposed: completions %s for %s'):format(M.disabled[ft] and 'off' or 'on', ft))
end

local global_done = false

--- The user commands, the notification handlers and the start checks, once (from setup(),
--- lsp/superposed.lua or the first attach).
function M.setup_global()
  if global_done then
    return
  end
  global_done = true
  vim.lsp.handlers['superposed/status'] = status.on_status
  vim.lsp.handlers['superposed/nextEditsReady'] = next_edits.on_ready
  vim.lsp.handlers['superposed/draftsWhole'] = ghost.on_drafts_whole
  problems.watch()
  local command = vim.api.nvim_create_user_command
  command('SuperposedStatus', function(args)
    M.show_status(args.bang)
  end, { bang = true, desc = 'superposed: the state in short; ! every counter' })
  command('SuperposedIndex', M.index, { desc = 'superposed: index the workspace' })
  command('SuperposedRestart', M.restart, { desc = 'superposed: restart the server' })
  command('SuperposedForget', M.forget, {
    nargs = '?',
    bang = true,
    complete = 'file',
    desc = 'superposed: erase a file (default: this one) from the stores; ! clears the user store',
  })
  command('SuperposedDrafts', M.show_drafts, { desc = 'superposed: pick one of the k drafts at the cursor' })
  command('SuperposedNextEdits', function()
    next_edits.list(M.name)
  end, { desc = 'superposed: the pending next edits; the pick jumps there' })
  command('SuperposedToggle', function(args)
    M.toggle(args.args)
  end, { nargs = '?', complete = 'filetype', desc = 'superposed: completions on/off for a filetype' })
end

--- Where the cursor rests (CursorHold: 'updatetime' without a key), the server warms its cache
--- for a request there: LSP never tells a server where the cursor is (docs/architecture.md).
function M.notify_rest(client, bufnr)
  if M.disabled[vim.bo[bufnr].filetype] then
    return
  end
  local position = vim.lsp.util.make_position_params(0, client.offset_encoding).position
  client:notify('superposed/cursorRest', { textDocument = { uri = vim.uri_from_bufnr(bufnr) }, position = position })
end

--- on_attach of lsp/superposed.lua: the keys, and ghost text (0.12+) or the popup (0.11).
function M.attach(client, bufnr)
  M.setup_global()
  if status.state.kind == 'stopped' or status.state.kind == 'failed' then
    status.state = { kind = 'starting' }
  end
  vim.api.nvim_create_autocmd({ 'CursorHold', 'CursorHoldI' }, {
    buffer = bufnr,
    group = vim.api.nvim_create_augroup('superposed.rest.' .. bufnr, { clear = true }),
    callback = function()
      if not client:is_stopped() then
        M.notify_rest(client, bufnr)
      end
    end,
    desc = 'superposed: warm the server where the cursor rests',
  })
  next_edits.keys = M.options.next_edits.keys
  next_edits.map(bufnr)
  next_edits.watch(bufnr)
  if M.options.ui == 'none' then
    return
  end
  map(bufnr, M.options.keys.drafts, M.show_drafts, 'superposed: pick one of the k drafts')
  if has_inline() then
    ghost.attach(bufnr, M.options.keys, map, partial_command)
  else
    popup.attach(client, bufnr, M.options, map, partial_command)
  end
  if M.disabled[vim.bo[bufnr].filetype] then
    enable_in(client, bufnr, false)
  end
end

--- Optional: options (interpreter, settings, keys) on top of lsp/superposed.lua, and enable.
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
  problems.forget()
  M.setup_global()
  vim.lsp.enable(M.name)
end

--- `require('superposed').state`: what the server is doing (superposed/status.lua).
return setmetatable(M, {
  __index = function(_, key)
    if key == 'state' then
      return status.state
    end
  end,
})
