"""The language server with test hooks: a slow model load, slow decoding steps, fixed drafts.

    python tests/e2e/hooked_server.py [--load-delay S] [--load-error MESSAGE]
        [--load-progress PERCENT] [--step-delay S] [--drafts FILE] [--exit-after-load S]
        -- [superposed-lsp args]

Test-only: timing tests run the real server through this entry point so that production code
reads no test switches. ``--load-delay`` waits before the model loads (requests that come
before it is ready); ``--load-error`` makes the load fail with ``MESSAGE`` (an EngineError,
as a model the settings name that cannot load); ``--load-progress`` reports that percentage
of a conversion before the delay (as a GGUF model's first load does); ``--step-delay`` sleeps
at every cancellation check, so that cancellation and warm-up tests do not depend on the
machine's speed.
``--drafts`` names a JSON list of ``{"after": TEXT, "drafts": [DRAFT, ...]}``: a model call
whose text before the cursor ends with ``TEXT`` answers those drafts instead of decoding
(first rule that fits; elsewhere the model decodes), so that editor tests of how drafts are
shown and accepted (a multi-line block, say) do not depend on what a model happens to draft.
``--exit-after-load`` makes the process exit (status 1) that many seconds after its model
loaded, as a server that crashes mid-session.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import threading
import time
from typing import Any

from lsp_server import cli, server, session
from lsp_server.completion import answer
from lsp_server.completion.cleanup import Suggestion
from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.decode import Answer
from superposed.types import EngineError


def fixed_drafts(rules: list[dict[str, Any]], decode: Any) -> Any:
    """``decode`` answering each rule's drafts where the text before the cursor ends with its
    ``after`` (scores falling from 1.0 in the rule's order)."""

    @functools.wraps(decode)
    def fixed(engine: Any, context: CursorContext, *args: Any, **kwargs: Any) -> Answer:
        for rule in rules:
            if context.before.endswith(rule["after"]):
                drafts = rule["drafts"]
                return Answer([Suggestion(text, 1.0 - i / 10) for i, text in enumerate(drafts)])
        return decode(engine, context, *args, **kwargs)

    return fixed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="hooked_server")
    parser.add_argument("--load-delay", type=float, default=0.0, metavar="S")
    parser.add_argument("--load-error", default=None, metavar="MESSAGE")
    parser.add_argument("--load-progress", type=int, default=None, metavar="PERCENT")
    parser.add_argument("--step-delay", type=float, default=0.0, metavar="S")
    parser.add_argument("--drafts", default=None, metavar="FILE")
    parser.add_argument("--exit-after-load", type=float, default=None, metavar="S")
    hooks, rest = parser.parse_known_args(argv)
    if (
        hooks.load_delay
        or hooks.load_error
        or hooks.load_progress is not None
        or hooks.exit_after_load
    ):
        load_engine = session.load_engine

        @functools.wraps(load_engine)
        def slow_load(settings: Any, progress: Any = None) -> Any:
            if hooks.load_progress is not None and progress is not None:
                progress("converting the model", hooks.load_progress)
            time.sleep(hooks.load_delay)
            if hooks.load_error:
                raise EngineError(hooks.load_error)
            engine = load_engine(settings, progress)
            if hooks.exit_after_load is not None:
                threading.Timer(hooks.exit_after_load, os._exit, args=(1,)).start()
            return engine

        session.load_engine = slow_load  # type: ignore[assignment]
    if hooks.step_delay:
        server.SERVER.scheduler.step_hook = functools.partial(time.sleep, hooks.step_delay)
    if hooks.drafts:
        with open(hooks.drafts, encoding="utf-8") as f:
            answer.decode = fixed_drafts(json.load(f), answer.decode)  # type: ignore[assignment]
    return cli.main([a for a in rest if a != "--"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
