--- :checkhealth superposed: Neovim, the server command, the running server. It reports what
--- it finds and never fails itself: every check that runs a program or asks the server is
--- guarded, and a problem says what to do (superposed/problems.lua's messages).
local M = {}

local function check_neovim(health)
  health.start('superposed: Neovim')
  if vim.fn.has('nvim-0.11') == 1 then
    health.ok(('Neovim %s'):format(tostring(vim.version())))
  else
    health.error('Neovim 0.11 or newer is needed (vim.lsp.config, vim.lsp.completion)')
  end
  if vim.lsp.inline_completion then
    health.ok('ghost text: vim.lsp.inline_completion (0.12+)')
  else
    health.info('no vim.lsp.inline_completion (0.12+): the drafts come as completion items')
  end
end

--- The command vim.lsp.config resolves (setup()'s python, or the user's cmd).
local function server_cmd(superposed)
  local ok, config = pcall(function()
    return vim.lsp.config[superposed.name]
  end)
  local cmd = ok and type(config) == 'table' and config.cmd or nil
  return cmd or superposed.server_cmd(superposed.options)
end

local function check_command(health, superposed)
  health.start('superposed: server')
  local problems = require('superposed.problems')
  local cmd = server_cmd(superposed)
  if type(cmd) ~= 'table' then
    health.info('the server command is a function of your own: not checked')
    return
  end
  health.info(('server command: %s'):format(table.concat(cmd, ' ')))
  local ok, problem = pcall(problems.check_now, cmd)
  if not ok then
    health.warn('could not check the server command: ' .. tostring(problem))
  elseif problem then
    health.error(problem)
    return problem
  elseif problems.python_of(cmd) then
    health.ok(('%s has superposed-lsp installed'):format(cmd[1]))
  else
    health.ok(('%s is executable'):format(cmd[1]))
  end
end

--- The running server's state; `problem`: what check_command reported, not said twice.
local function check_server(health, superposed, problem)
  local status = require('superposed.status')
  local clients = vim.lsp.get_clients({ name = superposed.name })
  if #clients == 0 then
    if status.state.kind == 'failed' and status.state.message ~= problem then
      health.error(status.state.message)
    else
      health.info(('no server running (open a %s file)'):format(
        table.concat(superposed.options.filetypes, '/')))
    end
    return
  end
  local ok, reply = pcall(clients[1].request_sync, clients[1], 'workspace/executeCommand',
    { command = 'superposed.stats', arguments = {} }, 10000)
  local stats = ok and reply and reply.result or nil
  if type(stats) ~= 'table' then
    health.warn('no stats from the server: ' .. vim.inspect(ok and reply and reply.err or reply))
    return
  end
  status.state.stats = stats
  local lines = status.summary(stats)
  local report = status.state.kind == 'error' and health.error
    or (status.state.kind == 'ready' and health.ok or health.info)
  report(lines[1])
  for i = 2, #lines do
    health.info(vim.trim(lines[i]))
  end
end

function M.check()
  local health = vim.health
  local superposed = require('superposed')
  check_neovim(health)
  check_server(health, superposed, check_command(health, superposed))
end

return M
