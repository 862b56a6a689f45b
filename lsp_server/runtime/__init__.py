"""The server's runtime: the engine and store threads (scheduler), a request's model call
(model_calls), loading a session and swapping it in (loader), the cache's warm-up (warmup),
the drafts decoded ahead as the user types (ahead), what the server tells people (notifier)
and the stores open now and their writes (learning).

A room of lsp_server: it reads the ground floor (settings, session, workspace...), the
completion room (a request's answer) and the stores room; neither room reads it back."""
