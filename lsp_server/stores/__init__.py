"""The stores service: which n-gram stores apply to a file and their lifecycle (stores), what
a store's failure means (failures), their writes on one thread (write_queue), the suffix
indexes over the stores and the open documents (store_indexes, match_indexes), a request's
match sources over them (match_sources), the organisation's shared indexes (shared_indexes)
and the open documents other documents may copy from (shareable_documents).

A room of lsp_server: it reads the ground floor (settings, workspace), ngram_db and the
engine, and no other room."""
