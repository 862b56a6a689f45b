"""Command line: ``superposed-lsp`` starts the language server; ``superposed-lsp complete``
prints the drafts for one cursor position of a file.

    superposed-lsp                       # server on stdio (what editors run)
    superposed-lsp --tcp --port 2087     # server on 127.0.0.1:2087, for debugging
    superposed-lsp complete FILE --line L --col C [-k 3] [--method superposed] [--json]
    superposed-lsp complete FILE --line L --col C --settings '{"lineMode": "single"}'

``--line`` and ``--col`` are 0-based, like LSP positions; ``--col`` counts characters
(Unicode code points) of the line. ``complete`` answers as the server would at that place,
with the same settings and defaults (``--settings`` takes any of them, as the editors send
them; the flags are shorthands) and the same completion path: the codebase store given
with ``--db`` (wherever the file lies), else that of the file's git repository when that
store exists (build it with ``index-repo``), the user store, and the memory over both and
the file.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from lsp_server.settings import LINE_MODES, Settings, parse_settings
from superposed.embedded import DEFAULT_MODEL, EMBEDDED
from superposed.onednn_caches import bound_onednn_caches
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
    # Flags left out (None) keep the server's default (lsp_server/settings.py).
    complete.add_argument("-k", type=int, help="number of drafts (setting k)")
    complete.add_argument("--method", choices=METHODS)
    complete.add_argument("--max-new-tokens", type=int, help="setting maxNewTokens")
    complete.add_argument(
        "--model",
        help=f"{' or '.join(EMBEDDED)} (default {DEFAULT_MODEL}), a GGUF file, ollama:NAME, "
        "or a model directory",
    )
    complete.add_argument("--device")
    complete.add_argument("--dtype")
    complete.add_argument(
        "--precision",
        choices=PRECISION_CHOICES,
        help="decode weights of the fast runner (auto: int4 on CPU)",
    )
    complete.add_argument(
        "--runner",
        choices=RUNNERS,
        help="fast (Llama family), hf (the reference), llama.cpp (the llama extra) or auto",
    )
    complete.add_argument("--threads", type=int, help="CPU threads (default 1)")
    complete.add_argument("--line-mode", choices=LINE_MODES, help="setting lineMode (auto)")
    complete.add_argument("--multi-line", action="store_true", help="--line-mode multi")
    complete.add_argument(
        "--db", type=Path, help="codebase store, wherever FILE lies (default: its repo's, if any)"
    )
    complete.add_argument(
        "--settings",
        type=json.loads,
        default={},
        metavar="JSON",
        help="any server settings, as the editors send them: '{\"memory\": false}'",
    )
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


def cli_settings(args: argparse.Namespace) -> Settings:
    """The server's settings from ``--settings`` and the flags (which win); an invalid one
    is an error here, where the server would fall back to its default."""
    if not isinstance(args.settings, dict):
        raise CliError("--settings takes a JSON object, e.g. '{\"memory\": false}'")
    flags = {
        "k": args.k,
        "method": args.method,
        "maxNewTokens": args.max_new_tokens,
        "lineMode": "multi" if args.multi_line else args.line_mode,
        "model": args.model,
        "device": args.device,
        "dtype": args.dtype,
        "precision": args.precision,
        "runner": args.runner,
        "threads": args.threads,
        "codebaseDb": str(args.db) if args.db else None,
        "compile": "off",  # one request: nothing to compile for
    }
    options = {**args.settings, **{k: v for k, v in flags.items() if v is not None}}
    settings, errors = parse_settings(options)
    if errors:
        raise CliError("; ".join(errors))
    return settings


def run_complete(args: argparse.Namespace) -> dict[str, object]:
    """The drafts at the cursor as the JSON object ``complete --json`` prints: the server's
    answer (lsp_server/completion/answer.py) for one file, which is the only open document. The
    codebase
    store is ``--db`` (which must exist), else the file's git repository's if it has one."""
    from lsp_server.completion.answer import answer
    from lsp_server.completion.cursor import CursorContext
    from lsp_server.completion.request import Request
    from lsp_server.models import load_engine
    from lsp_server.session import Session
    from lsp_server.stores.match_indexes import MatchIndexes
    from lsp_server.stores.stores import Stores
    from lsp_server.workspace import Where, doc_key, root_for

    settings = cli_settings(args)
    path = args.file.resolve()
    roots = []  # no workspace: the file's repository's store, only where it exists
    if args.db is not None:  # the store given serves the file, wherever the file lies
        if not args.db.is_file():
            raise CliError(
                f"--db {args.db}: there is no store at that path; build one with "
                f"index-repo FOLDER --db {args.db}"
            )
        roots = [root_for(path, []) or path.parent]
    try:
        data = path.read_bytes()
    except OSError as err:
        raise CliError(f"cannot read {args.file}: {err.strerror}") from err
    text = data.decode("utf-8", errors="surrogateescape")
    context = CursorContext.at(text, cursor_offset(text, args.line, args.col), path.name)
    started = time.perf_counter()
    engine = load_engine(settings.model)
    load_ms = (time.perf_counter() - started) * 1e3
    stores = Stores(engine.tokenizer, settings.stores)
    session = Session(engine, stores, MatchIndexes(engine.tokenizer))
    # The file is the one open document.
    uri = path.as_uri()
    request = Request(doc_key(uri), Where(uri, path, roots, {uri: text}), context, settings)
    here = session.stores.for_path(path, roots)
    if settings.decoding.memory:
        for store in here.present():  # index the stores now, as a running server has
            session.indexes.stores.store_index(store)
        session.indexes.wait()
    try:
        drafts = answer(session, request)
    finally:
        session.stores.close()
    return {
        "drafts": [
            {"text": s.text, "score": s.score, "source": s.source} for s in drafts.suggestions
        ],
        "timing_ms": {"load": load_ms, **drafts.timing_ms},
        "model": engine.name,
        "method": settings.decoding.method,
        "k": settings.decoding.k,
        "codebase_store": None if here.codebase is None else str(args.db or root_for(path, [])),
    }


def main(argv: list[str] | None = None) -> int:
    bound_onednn_caches()  # before torch's first matmul: a long-lived server's memory
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
