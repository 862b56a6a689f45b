"""``make demo``: index a sample codebase, then print k drafts at sample cursors, with timings.

The sample codebase is this project's own ``ngram_db`` package (it ships with the source, so
the demo needs no network). The cursors sit in a new snippet that uses that package's API,
as a user of it would write: superposed decoding with the codebase's store (its n-grams and
the memory over it), the same without the store, and greedy decoding (one draft per pass) side
by side. Each draft comes from the server's own path (lsp_server/completion/answer.py) with the
server's
default settings but ``k`` and ``method``.

    python -m lsp_server.demo [--model NAME] [-k 3] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ngram_db
from lsp_server.completion.answer import answer
from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.request import Request
from lsp_server.models import load_engine
from lsp_server.session import Session
from lsp_server.settings import DecodingSettings, ModelSettings, Settings, StoreSettings
from lsp_server.stores.match_indexes import MatchIndexes
from lsp_server.stores.stores import Stores
from lsp_server.workspace import Where, doc_key
from superposed.api import Engine
from superposed.embedded import DEFAULT_MODEL

SAMPLE_CODEBASE = Path(ngram_db.__file__).parent

# (title, text before the cursor): a new file that uses the indexed package.
CURSORS = [
    (
        "after a dot, in a call of the indexed package",
        "from ngram_db import NgramStore, codebase_db_path\n\n\n"
        "def open_store(root, tokenizer):\n"
        '    """Open the codebase store of a workspace."""\n'
        "    return NgramStore.",
    ),
    (
        "after the indentation of a new line",
        "from ngram_db import NgramStore\n\n\n"
        "def count_file(store: NgramStore, path, text):\n"
        '    """Count a saved file into the store."""\n'
        "    ",
    ),
]
# The new file's place: in the indexed package's folder, whose store is the demo's.
SNIPPET = SAMPLE_CODEBASE / "demo_snippet.py"
RUNS = [  # (label, method, use the codebase store)
    ("superposed + codebase store", "superposed", True),
    ("superposed, no store", "superposed", False),
    ("greedy", "greedy", False),
]


def index_sample(tokenizer: Any, db: Path) -> tuple[Any, dict[str, Any]]:
    store = ngram_db.NgramStore.open(db, tokenizer)
    summary = ngram_db.index_repo(SAMPLE_CODEBASE, store, progress=False)
    return store, summary.as_dict()


def request(text: str, method: str, k: int, with_store: bool) -> Request:
    """A request at the end of ``text``, the new file in the sample's folder, the one open
    document; without the store it is in no folder (no codebase store applies)."""
    uri = SNIPPET.as_uri()
    roots = [SAMPLE_CODEBASE] if with_store else []
    where = Where(uri, SNIPPET if with_store else None, roots, {uri: text})
    settings = Settings(decoding=DecodingSettings(k=k, method=method))
    context = CursorContext(before=text, after="", language=SNIPPET.name)  # as an editor says
    return Request(doc_key(uri), where, context, settings)


@contextlib.contextmanager
def sample_session(engine: Engine, tmp: Path) -> Iterator[tuple[Session, dict[str, Any]]]:
    """A session over the sample codebase's store (indexed into ``tmp``), and the index
    summary; the store closes on the way out."""
    db = tmp / "demo.sqlite"
    store, summary = index_sample(engine.tokenizer, db)
    store.close()
    # The demo's store alone: the user's own store is left out.
    stores = Stores(engine.tokenizer, StoreSettings(codebase_db=str(db), user_store=False))
    session = Session(engine, stores, MatchIndexes(engine.tokenizer))
    try:
        for indexed in stores.for_path(SNIPPET, [SAMPLE_CODEBASE]).present():
            session.indexes.stores.store_index(indexed)  # the memory over the store, as a server
        session.indexes.wait()
        yield session, summary
    finally:
        stores.close()


def run(model: str, k: int) -> dict[str, Any]:
    started = time.perf_counter()
    engine = load_engine(ModelSettings(model=model, compile="off"))  # a few requests
    load_s = time.perf_counter() - started
    with (
        tempfile.TemporaryDirectory(prefix="superposed-demo-") as tmp,
        sample_session(engine, Path(tmp)) as (session, summary),
    ):
        results = []
        for title, text in CURSORS:
            for label, method, with_store in RUNS:
                asked = request(text, method, k, with_store)
                answer(session, asked)  # warm-up: first-call costs
                drafts = answer(session, asked)
                results.append(
                    {
                        "cursor": title,
                        "run": label,
                        "drafts": [s.text for s in drafts.suggestions],
                        "timing_ms": drafts.timing_ms,
                    }
                )
    return {"model": engine.name, "load_s": load_s, "index": summary, "results": results}


def print_report(report: dict[str, Any]) -> None:
    index = report["index"]
    print(f"model {report['model']} loaded in {report['load_s']:.1f} s")
    print(
        f"indexed {index['indexed']} files of {SAMPLE_CODEBASE} "
        f"({index['tokens']} tokens) in {index['seconds']:.2f} s"
    )
    cursor = None
    for result in report["results"]:
        if result["cursor"] != cursor:
            cursor = result["cursor"]
            prompt = dict(CURSORS)[cursor]
            print(f"\n== cursor {cursor}:\n{prompt}\u2038\n")
        timing = result["timing_ms"]
        print(f"-- {result['run']}: {timing['total']:.0f} ms (decode {timing['decode']:.0f} ms)")
        for i, text in enumerate(result["drafts"], 1):
            print(f"   {i}. {text!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help="model name (or tiny-random)")
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = run(args.model, args.k)
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        print()
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
