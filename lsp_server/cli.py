"""Command line: ``superposed-lsp`` starts the language server; ``superposed-lsp complete``
prints the drafts for one cursor position of a file.

    superposed-lsp                       # server on stdio (what editors run)
    superposed-lsp --tcp --port 2087     # server on 127.0.0.1:2087, for debugging
    superposed-lsp complete FILE --line L --col C [-k 3] [--method superposed] [--json]

``--line`` and ``--col`` are 0-based, like LSP positions; ``--col`` counts characters
(Unicode code points) of the line. ``complete`` re-scores with the codebase store of the
file's git repository when that store exists (build it with ``index-repo``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from superposed.embedded import DEFAULT_MODEL, EMBEDDED
from superposed.options import METHODS, PRECISION_CHOICES, RUNNERS


class CliError(Exception):
    """A command-line request that cannot be served; the message says what to change."""


def _server_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tcp", action="store_true", help="serve on TCP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1", help="TCP host (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=2087, help="TCP port (default 2087)")
    parser.add_argument("--log-file", help="write logs to this file instead of stderr")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="-v info, -vv debug")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="superposed-lsp",
        description="Editor completion server: k drafts from one superposed decoding pass.",
    )
    _server_parser(parser)
    commands = parser.add_subparsers(dest="command")
    complete = commands.add_parser("complete", help="print the drafts at a cursor position")
    complete.add_argument("file", type=Path)
    complete.add_argument("--line", type=int, required=True, help="0-based line of the cursor")
    complete.add_argument("--col", type=int, required=True, help="0-based column (characters)")
    complete.add_argument("-k", type=int, default=3, help="number of drafts (default 3)")
    complete.add_argument("--method", choices=METHODS, default="superposed")
    complete.add_argument("--max-new-tokens", type=int, default=10)
    complete.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help=f"{' or '.join(EMBEDDED)} (default {DEFAULT_MODEL}), or a model directory",
    )
    complete.add_argument("--device", default="auto")
    complete.add_argument("--dtype", default="auto")
    complete.add_argument(
        "--precision",
        choices=PRECISION_CHOICES,
        default="auto",
        help="decode weights of the fast runner (auto: int4 on CPU)",
    )
    complete.add_argument(
        "--runner",
        choices=RUNNERS,
        default="auto",
        help="fast (Llama family), hf (the reference) or auto",
    )
    complete.add_argument("--threads", type=int, default=1, help="CPU threads (default 1)")
    complete.add_argument("--multi-line", action="store_true", help="keep multi-line drafts")
    complete.add_argument("--db", type=Path, help="codebase store (default: the repo's, if any)")
    complete.add_argument("--json", action="store_true", help="print JSON")
    complete.add_argument("-v", "--verbose", action="count", default=0)
    return parser


def setup_logging(verbose: int, log_file: str | None) -> None:
    """Logs go to stderr or a file, never stdout (stdout is the protocol)."""
    level = logging.WARNING - 10 * min(verbose, 2)
    handler = logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)


def cursor_offset(text: str, line: int, col: int) -> int:
    """Offset of a 0-based (line, character) position; an error names what is out of range."""
    lines = text.split("\n")
    if not 0 <= line < len(lines):
        raise CliError(f"--line {line} is outside the file (lines 0..{len(lines) - 1})")
    if not 0 <= col <= len(lines[line]):
        raise CliError(f"--col {col} is outside line {line} (columns 0..{len(lines[line])})")
    return sum(len(s) + 1 for s in lines[:line]) + col


def run_complete(args: argparse.Namespace) -> dict[str, object]:
    """The drafts at the cursor as the JSON object ``complete --json`` prints."""
    from lsp_server.completion import CursorContext, decode
    from lsp_server.models import load_engine
    from lsp_server.settings import DecodingSettings, ModelSettings, StoreSettings
    from lsp_server.stores import Stores, repo_root

    try:
        data = args.file.read_bytes()
    except OSError as err:
        raise CliError(f"cannot read {args.file}: {err.strerror}") from err
    text = data.decode("utf-8", errors="surrogateescape")
    context = CursorContext.at(text, cursor_offset(text, args.line, args.col))
    started = time.perf_counter()
    engine = load_engine(
        ModelSettings(  # one request: nothing to compile for
            args.model, args.device, args.dtype, args.precision, args.runner, args.threads, "off"
        )
    )
    load_ms = (time.perf_counter() - started) * 1e3
    root = repo_root(args.file.resolve().parent)
    ngram, store_path = None, None
    if args.db is not None or root is not None:
        stores = Stores(
            engine.tokenizer,
            StoreSettings(codebase_db=str(args.db) if args.db else None, user_store=False),
        )
        store = stores.codebase(root or args.file.resolve().parent, create=False)
        if store is not None:
            ngram, store_path = store, str(args.db or root)
    decoding = DecodingSettings(
        k=args.k,
        method=args.method,
        max_new_tokens=args.max_new_tokens,
        line_mode="multi" if args.multi_line else "single",
    )
    answer = decode(engine, context, decoding, ngram)
    return {
        "drafts": [{"text": s.text, "score": s.score} for s in answer.suggestions],
        "timing_ms": {"load": load_ms, **answer.timing_ms},
        "model": engine.name,
        "method": args.method,
        "k": args.k,
        "codebase_store": store_path,
    }


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose, getattr(args, "log_file", None))
    if args.command == "complete":
        from superposed.types import EngineError

        try:
            result = run_complete(args)
        except (CliError, EngineError) as err:
            print(f"superposed-lsp complete: {err}", file=sys.stderr)
            return 2
        if args.json:
            print(json.dumps(result, ensure_ascii=False))
        else:
            drafts: list[dict[str, Any]] = result["drafts"]  # type: ignore[assignment]
            for i, draft in enumerate(drafts, 1):
                print(f"{i}. {draft['text']!r}  (score {draft['score']:.2f})")
            print(f"timing_ms: {result['timing_ms']}", file=sys.stderr)
        return 0

    from lsp_server.protocol import FramedStdin
    from lsp_server.server import SERVER

    if args.tcp:
        SERVER.start_tcp(args.host, args.port)
    else:  # bad frames are skipped with a log line, not trusted (see protocol.py)
        stdin = FramedStdin(sys.stdin.buffer)  # type: ignore[arg-type]
        SERVER.start_io(stdin=stdin)  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
