--- superposed-lsp's config for Neovim 0.11+: `vim.lsp.enable('superposed')` works without
--- require('superposed').setup(). Change any field with vim.lsp.config, e.g. the interpreter:
---
---   vim.lsp.config('superposed', {
---     cmd = { '/path/to/superposed-lsp/.venv/bin/python', '-m', 'lsp_server.cli' },
---     settings = { superposed = { k = 3, debounceMs = 30 } },
---   })
---   vim.lsp.enable('superposed')
---
--- on_attach maps the plugin's keys and turns on ghost text (0.12+) or the popup (0.11);
--- root_dir starts the server only once its interpreter is known to have the package, and
--- says what to do otherwise (superposed/problems.lua); on_exit and the showMessage handler
--- keep what went wrong for :SuperposedStatus (superposed/status.lua). A config of your own
--- that replaces one of them loses that part.
local plugin = require('superposed')
plugin.setup_global()
-- The buffer whose FileType loaded this file: the FileType check was not yet in place for it.
vim.schedule(function()
  require('superposed.problems').check_buffer(vim.api.nvim_get_current_buf())
end)

return {
  cmd = { 'python3', '-m', 'lsp_server.cli' },
  filetypes = { 'python' },
  root_markers = { 'pyproject.toml', 'setup.py', 'setup.cfg', '.git' },
  root_dir = function(bufnr, on_dir)
    require('superposed.problems').before_start(bufnr, on_dir)
  end,
  on_attach = function(client, bufnr)
    require('superposed').attach(client, bufnr)
  end,
  on_exit = function(code, signal)
    require('superposed.status').on_exit(code, signal)
  end,
  handlers = {
    ['window/showMessage'] = function(...)
      return require('superposed.status').on_show_message(...)
    end,
  },
}
