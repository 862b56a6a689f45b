--- :checkhealth superposed
local M = {}

function M.check()
  local health = vim.health
  local superposed = require('superposed')
  local opts = superposed.options

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

  health.start('superposed: server')
  local cmd = superposed.server_cmd(opts)
  if vim.fn.executable(cmd[1]) == 1 then
    health.ok(('server command: %s'):format(table.concat(cmd, ' ')))
  else
    health.error(('%s is not executable'):format(cmd[1]), 'set python = or cmd = in setup{}')
  end
  if not opts.cmd then
    local out = vim.system({ opts.python, '-c', 'import lsp_server.cli' }, { text = true }):wait()
    if out.code == 0 then
      health.ok(('%s imports lsp_server'):format(opts.python))
    else
      health.error(
        ('%s cannot import lsp_server: %s'):format(opts.python, vim.trim(out.stderr or '')),
        'install superposed-lsp into that interpreter (make setup), or point python = at its venv'
      )
    end
  end

  local clients = vim.lsp.get_clients({ name = superposed.name })
  if #clients == 0 then
    health.info('no server running (open a ' .. table.concat(opts.filetypes, '/') .. ' file)')
    return
  end
  health.ok(superposed.status())
  local reply = clients[1]:request_sync(
    'workspace/executeCommand',
    { command = 'superposed.stats', arguments = {} },
    10000
  )
  if reply and reply.result then
    for _, line in ipairs(superposed.flatten_stats(reply.result, nil, {})) do
      health.info(line)
    end
  else
    health.warn('no stats from the server: ' .. vim.inspect(reply and reply.err))
  end
end

return M
