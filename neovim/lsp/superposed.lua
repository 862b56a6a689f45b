--- superposed-lsp's config for Neovim 0.11+: `vim.lsp.enable('superposed')` works without
--- require('superposed').setup(). Change any field with vim.lsp.config, e.g. the interpreter:
---
---   vim.lsp.config('superposed', {
---     cmd = { '/path/to/superposed-lsp/.venv/bin/python', '-m', 'lsp_server.cli' },
---     settings = { superposed = { k = 3, debounceMs = 30 } },
---   })
---   vim.lsp.enable('superposed')
---
--- on_attach maps the plugin's keys and turns on ghost text (0.12+) or the popup (0.11).
return {
  cmd = { 'python3', '-m', 'lsp_server.cli' },
  filetypes = { 'python' },
  root_markers = { 'pyproject.toml', 'setup.py', 'setup.cfg', '.git' },
  on_attach = function(client, bufnr)
    require('superposed').attach(client, bufnr)
  end,
}
