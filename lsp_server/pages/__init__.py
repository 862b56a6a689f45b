"""The settings' words for people (settings_docs) and the pages made from them and the table in
settings.py (settings_pages: package.json, the READMEs, the Neovim plugin's list).

A room of lsp_server: it reads settings.py only."""
