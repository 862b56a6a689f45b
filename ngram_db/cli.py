"""index-repo: build or refresh an n-gram store from a source tree.

    index-repo PATH [--db FILE] [--scope codebase|user] [--orders 2-6] [--include GLOB]
               [--exclude GLOB] [--max-file-bytes N] [--model NAME] [--rebuild] [--stats]
    index-repo PATH --forget [--scope user | --db FILE]   # erase a file or folder from a store
    index-repo --clear [--scope user | --db FILE | PATH]   # erase everything a store holds
    index-repo --engine infini-gram --out DIR PATH...      # a shared index, a shard a repo

The command opens the store, calls ``index_repo`` and turns the library's errors into one
message and exit status 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from time import perf_counter
from typing import Any

from ngram_db import errors
from ngram_db.errors import Advice, NgramStoreError, advised
from ngram_db.files import DEFAULT_MAX_FILE_BYTES
from ngram_db.indexer import index_repo
from ngram_db.infini import build_index
from ngram_db.paths import codebase_db_path, user_db_path
from ngram_db.store import NgramStore, parse_orders
from ngram_db.store_files import drop_leftovers
from ngram_db.tokenizer import as_tokenizer
from ngram_db.tokenizer_stores import erase, for_tokenizer, tokenizer_stores
from superposed.embedded import DEFAULT_MODEL, EMBEDDED
from superposed.tokenizer import converts_first
from superposed.tokenizer import load_tokenizer as embedded_tokenizer

# What to do about each store error, with this command's flags (subclasses first).
ADVICE: Advice = (
    (errors.StoreBusy, "try again once the other writer is done"),
    (
        errors.StoreUnwritable,
        "check that the file and its folder are writable by you and the disk has room, "
        "or choose another store file with --db",
    ),
    (errors.StoreCorrupt, "run index-repo with --rebuild to replace it (or delete it)"),
    (errors.NotAStore, "run index-repo with --rebuild to replace it, or use --db elsewhere"),
    (
        errors.TokenizerMismatch,
        "run index-repo with --rebuild (and the same --model) to rebuild it",
    ),
    (errors.SchemaMismatch, "run index-repo with --rebuild"),
    (
        errors.OrdersMismatch,
        "omit --orders to use the stored ones, or run index-repo with --rebuild",
    ),
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="index-repo",
        description="Index the token n-grams of a source tree into an SQLite store.",
    )
    p.add_argument("path", type=Path, nargs="*",
                   help="the folder to index (--forget: the file or folder to forget; "
                   "--engine infini-gram: one or more repositories)")  # fmt: skip
    p.add_argument("--engine", choices=("store", "infini-gram"), default="store",
                   help="store: an SQLite store (default); infini-gram: a read-only shared "
                   "index in --out with one shard per PATH (ngram_db/infini.py)")  # fmt: skip
    p.add_argument("--out", type=Path, help="--engine infini-gram: the index folder")
    p.add_argument("--db", type=Path, help="store file (default: chosen by --scope)")
    p.add_argument(
        "--scope",
        choices=("codebase", "user"),
        default="codebase",
        help="codebase: a store for this folder under the cache directory (default); "
        "user: the per-user store under the data directory",
    )
    p.add_argument("--orders", help="n-gram orders, e.g. 2-6 (default: the store's, or 2-6)")
    p.add_argument("--include", action="append", default=[], metavar="GLOB",
                   help="index only files matching GLOB (repeatable)")  # fmt: skip
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                   help="skip files matching GLOB (repeatable)")  # fmt: skip
    p.add_argument("--max-file-bytes", type=int, default=DEFAULT_MAX_FILE_BYTES, metavar="N",
                   help=f"skip larger files (default {DEFAULT_MAX_FILE_BYTES})")  # fmt: skip
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"whose tokenizer: {' or '.join(EMBEDDED)} (default {DEFAULT_MODEL}), "
                   "a GGUF file, ollama:NAME, a model folder or a hub id")  # fmt: skip
    p.add_argument("--rebuild", action="store_true", help="delete the store and start over")
    p.add_argument("--stats", action="store_true", help="print the store's statistics and exit")
    p.add_argument("--forget", action="store_true",
                   help="remove PATH (a file, or every file under a folder) from the store and "
                   "erase it from disk, then exit")  # fmt: skip
    p.add_argument("--clear", action="store_true",
                   help="remove everything from the store, erasing it from disk; exit")  # fmt: skip
    p.add_argument("--index-secrets", action="store_true",
                   help="also index files that often hold secrets (.env, *.pem)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="log more")
    return p


def load_tokenizer(model: str) -> Any:
    """The tokenizer of ``model`` (see ``superposed.embedded.load_tokenizer``), or a store error."""
    try:
        return embedded_tokenizer(model)
    except (OSError, ValueError) as err:
        raise NgramStoreError(f"cannot load the tokenizer of {model!r}: {err}") from err


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_intermixed_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    if args.engine == "infini-gram":
        return _infini(parser, args)
    if len(args.path) > 1:
        parser.error("give one PATH (several only with --engine infini-gram)")
    root: Path | None = args.path[0] if args.path else None
    chosen = args.db is not None or args.scope == "user"
    if root is None and not (args.clear and chosen):
        parser.error("give PATH (or, with --clear, --db FILE or --scope user)")
    if root is not None and not root.is_dir() and not args.forget:
        print(f"index-repo: error: {root} is not a folder", file=sys.stderr)
        return 1
    if args.forget and not chosen and root is not None and not root.is_dir():
        print(
            f"index-repo: error: {root} is not a folder: to forget a file, name the store "
            "with --scope user or --db FILE",
            file=sys.stderr,
        )
        return 1
    if args.db is not None:
        db = args.db
    elif args.scope == "user" or root is None:
        db = user_db_path()
    else:
        db = codebase_db_path(root)
    default = args.db is None  # a default store: one per tokenizer (tokenizer_stores.py)
    if (args.forget or args.clear) and default:
        return _forget_everywhere(Path(db), root, args.clear)
    if (args.forget or args.clear) and not Path(db).exists():
        drop_leftovers(db)  # an older version's file beside a store deleted by hand
        print(f"index-repo: nothing to forget: there is no store at {db}")
        return 0
    try:
        orders = None if args.orders is None else parse_orders(args.orders)
        if converts_first(args.model):  # else the first run sits silent for 20-60 s
            print(
                f"index-repo: converting {args.model} once for its tokenizer (20-60 s; "
                "later runs and the server reuse it)",
                file=sys.stderr,
                flush=True,
            )
        started = perf_counter()
        tokenizer = load_tokenizer(args.model)
        tokenizer_seconds = perf_counter() - started
        if default:
            db = for_tokenizer(Path(db), as_tokenizer(tokenizer).fingerprint)
        with NgramStore.open(db, tokenizer, orders, rebuild=args.rebuild) as store:
            for notice in store.notices:
                print(f"index-repo: note: {notice}", file=sys.stderr)
            if args.stats:
                print(json.dumps(store.stats(), indent=2))
                return 0
            if args.forget or args.clear:
                return _forget(store, root, args.clear)
            assert root is not None
            summary = index_repo(
                root,
                store,
                include=args.include,
                exclude=args.exclude,
                max_file_bytes=args.max_file_bytes,
                skip_secrets=not args.index_secrets,
            )
            summary.tokenizer_seconds = tokenizer_seconds
    except NgramStoreError as err:
        print(f"index-repo: error: {advised(err, ADVICE)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(
            "index-repo: interrupted; what was committed is kept: run again to finish",
            file=sys.stderr,
        )
        return 130
    if args.json:
        print(json.dumps(summary.as_dict(), indent=2, default=str))
    else:
        print(summary.format())
    return 0


def _forget_everywhere(base: Path, path: Path | None, everything: bool) -> int:
    """--forget / --clear on a default store: in every model's tokenizer's store of it
    (ngram_db/tokenizer_stores.py), so no model keeps what the user forgets."""
    if not tokenizer_stores(base):
        drop_leftovers(base)  # an older version's file beside a store deleted by hand
        print(f"index-repo: nothing to forget: there is no store at {base}")
        return 0
    target = None if everything or path is None else path.expanduser().resolve()
    try:
        removed = erase(base, target)
    except NgramStoreError as err:
        print(f"index-repo: error: {advised(err, ADVICE)}", file=sys.stderr)
        return 1
    for store, count in removed.items():
        if target is None:
            print(f"cleared {store}: {count} file(s) forgotten")
        else:
            print(f"forgot {count} file(s) at or under {target} in {store}")
    return 0


def _infini(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """--engine infini-gram: build or refresh the shared index in --out, a shard per PATH."""
    if args.out is None or not args.path:
        parser.error("--engine infini-gram needs --out DIR and at least one PATH")
    say = (lambda _: None) if args.json else (lambda line: print(line, flush=True))
    try:
        summary = build_index(
            args.out, args.path, load_tokenizer(args.model), args.model,
            max_file_bytes=args.max_file_bytes, skip_secrets=not args.index_secrets,
            include=args.include, exclude=args.exclude, progress=say,
        )  # fmt: skip
    except NgramStoreError as err:
        print(f"index-repo: error: {err}", file=sys.stderr)
        return 1
    print(json.dumps(summary.as_dict(), indent=2) if args.json else summary.format())
    return 0


def _forget(store: NgramStore, path: Path | None, everything: bool) -> int:
    """--forget / --clear: remove files from the store and erase them from disk."""
    if everything:
        removed = store.clear()
        print(f"cleared {store.path}: {removed} file(s) forgotten")
    else:
        assert path is not None
        target = path.expanduser().resolve()
        removed = store.forget(target)
        print(f"forgot {removed} file(s) at or under {target} in {store.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
