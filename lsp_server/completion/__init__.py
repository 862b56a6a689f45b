"""One completion request's path: the request and its cursor (request, cursor), the answer
from a session (answer), the prompt and the decode (prompt_plan, decode), the drafts' text
clean-up (cleanup), their document's layout and plain text (layout, plain), the syntax at the
cursor and the drafts' well-formedness (syntax, wellformed), the memory's evidence (evidence)
and the protocol's items (items).

A room of lsp_server: it reads the ground floor, the engine and the stores room (the
stores and match sources a request decodes with), never the runtime."""
