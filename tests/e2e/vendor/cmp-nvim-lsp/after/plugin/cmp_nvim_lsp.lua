require('cmp_nvim_lsp').setup()
