"""The language server with test hooks: a slow model load and slow decoding steps.

    python tests/e2e/hooked_server.py [--load-delay S] [--step-delay S] -- [superposed-lsp args]

Test-only: timing tests run the real server through this entry point so that production code
reads no test switches. ``--load-delay`` waits before the model loads (requests that come
before it is ready); ``--step-delay`` sleeps at every cancellation check, so that
cancellation and warm-up tests do not depend on the machine's speed.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from typing import Any

from lsp_server import cli, server


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="hooked_server")
    parser.add_argument("--load-delay", type=float, default=0.0, metavar="S")
    parser.add_argument("--step-delay", type=float, default=0.0, metavar="S")
    hooks, rest = parser.parse_known_args(argv)
    if hooks.load_delay:
        load_engine = server.load_engine

        @functools.wraps(load_engine)
        def slow_load(*args: Any, **kwargs: Any) -> Any:
            time.sleep(hooks.load_delay)
            return load_engine(*args, **kwargs)

        server.load_engine = slow_load  # type: ignore[assignment]
    if hooks.step_delay:
        server.SERVER.scheduler.step_hook = functools.partial(time.sleep, hooks.step_delay)
    return cli.main([a for a in rest if a != "--"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
