"""One completion request, built once where it comes in and handed down whole.

The server's handler (server.py), ``superposed-lsp complete`` (cli.py) and the demo build a
``Request`` and give it to ``answer.answer``; the work done for it (a decode on the engine
thread, a warm-up, a draft ahead) takes it as it is. Frozen: nothing on the way changes it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from lsp_server.completion.cursor import CursorContext
from lsp_server.settings import Settings
from lsp_server.workspace import Where


@dataclass(frozen=True)
class Request:
    """A request at a cursor: for which document, where it is, what it sees, with what settings."""

    key: str  # the document's key for the caches and the scheduler (workspace.doc_key)
    where: Where  # the document and the workspace around it, as they were when it came
    context: CursorContext  # the text around the cursor
    settings: Settings  # the settings when it came
    # Someone waits for the answer (the server's request, not work done ahead or the command
    # line): it comes within ``answerWithinMs``, as far as the drafts got (decode.decode).
    due: bool = False
    # When it came (``time.perf_counter()``): ``answerWithinMs`` counts from then, the wait
    # for the engine thread (a warm-up's chunk ending, an older request stopping) included.
    arrived: float = field(default_factory=time.perf_counter)
