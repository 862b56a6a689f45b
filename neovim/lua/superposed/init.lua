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
local next_edits = require('superposed.next_edits')

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
  -- model, device, dtype, precision, runner, threads, compile, prefillCopy, k, method,
  -- maxNewTokens, alpha, temperature, mix, memory, memorySeed, distinctDrafts,
  -- lambdas, orders,
  -- codebaseDb, userDb, userStore, userWeight, indexOnSave, maxFileBytes, lineMode,
  -- maxPromptTokens, firstPromptTokens, debounceMs, fim, trigger, minPrefixChars, midLine.
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
  -- 0.12: "(1/3)" after the ghost text: which of the k drafts is shown.
  hint = true,
  -- Next edits (superposed/next_edits.lua): normal- and insert-mode keys; false disables one.
  next_edits = {
    keys = { jump = '<M-n>', accept = '<M-y>', dismiss = '<M-e>' },
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
  local client = client_for(vim.api.nvim_get_current_buf())
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
  local function partial(cut)
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
      local part = cut(text)
      vim.schedule(function()
        vim.api.nvim_put(vim.split(part, '\n', { plain = true }), 'c', false, true)
        client:exec_cmd(partial_command(command, part), { bufnr = bufnr })
      end)
      return '<C-e>'
    end
  end
  if keys.accept_word then
    vim.keymap.set('i', keys.accept_word, partial(M.next_word), { buffer = bufnr, expr = true })
  end
  if keys.accept_line then
    vim.keymap.set('i', keys.accept_line, partial(M.next_line), { buffer = bufnr, expr = true })
  end
end

local hinting = false

--- 0.12: the ghost text of our drafts ends with "(1/3)" from the first answer on, not only after
--- cycling (the built-in shows the index then). Through the built-in's completor class, a private
--- API: where it is missing, no hint.
local function hint_index()
  local ok, capability = pcall(require, 'vim.lsp._capability')
  local completor = ok and type(capability.all) == 'table' and capability.all.inline_completion
  if hinting or type(completor) ~= 'table' or type(completor.handler) ~= 'function' then
    return
  end
  hinting = true
  local handler = completor.handler
  completor.handler = function(self, err, result, ctx, ...)
    handler(self, err, result, ctx, ...)
    local current = self.current
    local client = current and vim.lsp.get_client_by_id(current.client_id)
    if M.options.hint and client and client.name == M.name and self:count_items() > 1 then
      self:select(current._index, true)
    end
  end
end

--- Keymaps for ghost text (0.12+): the drafts are inline completion items.
local function attach_inline(_, bufnr)
  hint_index()
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
  -- Partial accept: the shown draft, cut to its next word or line; the accept command gets the
  -- part. The next ghost text (the rest of the draft) comes from the server's typed-along cache.
  local function partial(cut)
    return function()
      inline.get({
        bufnr = bufnr,
        on_accept = function(item)
          if type(item.insert_text) ~= 'string' then
            return item -- a snippet is accepted whole
          end
          local part = cut(item.insert_text)
          item.insert_text = part
          item.command = partial_command(item.command, part)
          return item
        end,
      })
    end
  end
  map(bufnr, keys.accept_word, partial(M.next_word), 'superposed: accept next word')
  map(bufnr, keys.accept_line, partial(M.next_line), 'superposed: accept next line')
  if vim.fn.maparg('<Tab>', 'i') == '' then
    vim.keymap.set('i', '<Tab>', function()
      if not inline.get({ bufnr = bufnr }) then
        return '<Tab>'
      end
    end, { buffer = bufnr, expr = true, desc = 'superposed: accept draft' })
  end
end

--- :SuperposedDrafts: the k drafts at the cursor through vim.ui.select (superposed/drafts.lua).
function M.show_drafts()
  drafts.show(M.name)
end

--- Runs one of the server's commands; `on_result(err, result)` is called with its answer.
function M.execute(command, on_result, bufnr, arguments)
  local client = client_for(bufnr or 0) or vim.lsp.get_clients({ name = M.name })[1]
  if not client then
    vim.notify('superposed: the server is not running', vim.log.levels.WARN)
    return
  end
  client:request('workspace/executeCommand', { command = command, arguments = arguments or {} }, on_result)
end

--- One line for a statusline: "superposed: loading smollm2-135m 40%", "superposed: ready (smollm2-135m, k=3)".
function M.status()
  local s = M.state
  if s.kind == 'ready' then
    local stats, settings = s.stats or {}, M.options.settings
    local model = stats.model or settings.model or 'default model'
    local k = (stats.settings and stats.settings.k) or settings.k or 3
    -- until the compiled decode step is built (once per machine), drafts come slower
    local eager = (s.step or stats.decodeStep) == 'eager' and ', eager step' or ''
    return ('superposed: ready (%s, k=%d%s)'):format(model, k, eager)
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
      for _, key in ipairs({ 'model', 'ready', 'error', 'decodeStep', 'compiledStep', 'counters', 'stores' }) do
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

--- The handler of superposed/status, the server's notification of its state (docs/architecture.md,
--- "Status"): { state = loading | indexing | ready | error, model, message?, percent? }.
function M.on_status(_, status, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if not client or type(status) ~= 'table' then
    return
  end
  if status.state == 'ready' then
    M.state = { kind = 'ready', stats = M.state.stats, step = status.step }
    client:request('workspace/executeCommand', { command = 'superposed.stats', arguments = {} },
      function(err, result)
        if not err and type(result) == 'table' then
          M.state.stats = result
        end
      end)
  elseif status.state == 'error' then
    M.state = { kind = 'error', title = status.message }
  elseif status.state == 'loading' then
    M.state = { kind = 'loading', title = 'loading ' .. tostring(status.model) }
  else
    M.state = { kind = status.state, title = status.state, percent = status.percent }
  end
  vim.api.nvim_exec_autocmds('User', { pattern = 'SuperposedStatus', modeline = false })
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
    attach_completion(client, bufnr)
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

--- The user commands and the status handler, once (from setup() or the first attach).
local function setup_global()
  if global_done then
    return
  end
  global_done = true
  vim.lsp.handlers['superposed/status'] = M.on_status
  vim.lsp.handlers['superposed/nextEditsReady'] = next_edits.on_ready
  local command = vim.api.nvim_create_user_command
  command('SuperposedStatus', M.show_status, { desc = 'superposed: status and store stats' })
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
  setup_global()
  if M.state.kind == 'stopped' then
    M.state = { kind = 'starting' }
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
    attach_inline(client, bufnr)
  else
    attach_completion(client, bufnr)
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
  setup_global()
  vim.lsp.enable(M.name)
end

return M
