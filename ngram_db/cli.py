"""index-repo: build or refresh an n-gram store from a source tree.

    index-repo PATH [--db FILE] [--scope codebase|user] [--orders 2-6] [--include GLOB]
               [--exclude GLOB] [--max-file-bytes N] [--model NAME] [--rebuild] [--stats]

The command opens the store, calls ``index_repo`` and turns the library's errors into one
message and exit status 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from ngram_db.errors import NgramStoreError
from ngram_db.files import DEFAULT_MAX_FILE_BYTES
from ngram_db.indexer import index_repo
from ngram_db.paths import cache_root, codebase_db_path, user_db_path
from ngram_db.store import NgramStore, parse_orders

# lsp_server.engine.model's default and the folder it converts it into, without importing torch
DEFAULT_MODEL = "smollm2-135m"
DEFAULT_MODEL_FOLDER = "SmolLM2-135M-Instruct"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="index-repo",
        description="Index the token n-grams of a source tree into an SQLite store.",
    )
    p.add_argument("path", type=Path, help="the folder to index")
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
                   help="whose tokenizer: default model, model folder or hub id")  # fmt: skip
    p.add_argument("--rebuild", action="store_true", help="delete the store and start over")
    p.add_argument("--stats", action="store_true", help="print the store's statistics and exit")
    p.add_argument("--index-secrets", action="store_true",
                   help="also index files that often hold secrets (.env, *.pem)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="log more")
    return p


def load_tokenizer(model: str) -> Any:
    """The tokenizer of the default model, a local model folder or a hub id.

    A folder with a tokenizer.json loads through ``tokenizers`` alone (no torch import).
    """
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    default = model in ("", DEFAULT_MODEL)
    folder = cache_root() / "models" / DEFAULT_MODEL_FOLDER if default else Path(model)
    if default and not (folder / "tokenizer.json").is_file():
        from lsp_server.engine.model import default_model_dir  # converts the model once

        folder = default_model_dir()
    if (folder / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(folder / "tokenizer.json"))
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(model)
    except (OSError, ValueError) as err:
        raise NgramStoreError(f"cannot load the tokenizer of {model!r}: {err}") from err


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    root: Path = args.path
    if not root.is_dir():
        print(f"index-repo: error: {root} is not a folder", file=sys.stderr)
        return 1
    db = args.db or (codebase_db_path(root) if args.scope == "codebase" else user_db_path())
    try:
        orders = None if args.orders is None else parse_orders(args.orders)
        tokenizer = load_tokenizer(args.model)
        with NgramStore.open(db, tokenizer, orders, rebuild=args.rebuild) as store:
            if args.stats:
                print(json.dumps(store.stats(), indent=2))
                return 0
            summary = index_repo(
                root,
                store,
                include=args.include,
                exclude=args.exclude,
                max_file_bytes=args.max_file_bytes,
                skip_secrets=not args.index_secrets,
            )
    except NgramStoreError as err:
        print(f"index-repo: error: {err}", file=sys.stderr)
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


if __name__ == "__main__":
    sys.exit(main())
