"""What one request asks a shared index: lookups, contexts asked again, lookups skipped by
the budget and the time spent, per request, at each ``sharedBudgetMs`` given (issue 27).

The server's own request path in one process (lsp_server/cli.py's ``complete``, looped):
Session.matches_later, completion.decode; each request's ``shared._Budgeted`` is kept to
read its counters. Cursors: seeded line starts in the replay's flask snapshot, with its
codebase store (bench/replay.py builds both), and the index of bench/replay_shared.py.

    python -m bench.shared_requests --index /tmp/orgidx --budgets 60000,50 --requests 8
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from bench.measure import RESULTS, percentile
from ngram_db.infini_source import MAX_CONTEXT

OUT = RESULTS / "shared_requests.json"
REPLAY = Path.home() / ".cache/superposed-lsp/bench/replay"
ROOT = REPLAY / "ws/pallets--flask-6b054f8f38"
DB = REPLAY / "pallets--flask-6b054f8f38-48785366.db"
OPTIONS = {"memory": True, "mix": "interpolate", "lineMode": "auto", "userStore": False,
           "compile": "off"}  # fmt: skip


def cursors(root: Path, count: int) -> list[tuple[Path, int]]:
    """``count`` seeded cursors: a file and the offset of a line's first non-blank character."""
    rng = random.Random(1)
    files = sorted((root / "src").rglob("*.py"))
    out = []
    for _ in range(count):
        path = rng.choice(files)
        lines = path.read_text().split("\n")
        at = rng.choice([i for i, line in enumerate(lines) if line.strip() and i > 5])
        offset = sum(len(line) + 1 for line in lines[:at])
        out.append((path, offset + len(lines[at]) - len(lines[at].lstrip())))
    return out


class Recorded:
    """A request's budgeted shared source, and every question put to it."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.asked: list[tuple[tuple[int, ...], int, int]] = []

    def __len__(self) -> int:
        return len(self.source)

    def match(self, context: Any, follow: int = 32, others: int = 0) -> Any:
        self.asked.append((tuple(context[-MAX_CONTEXT:]), follow, others))
        return self.source.match(context, follow, others)

    def repeats(self) -> int:
        """Questions asked before in the same request (what a cache of answers would save)."""
        return len(self.asked) - len(set(self.asked))


def run(index: Path, budgets: list[int], count: int) -> dict[str, Any]:
    from lsp_server import shared
    from lsp_server.completion import CursorContext, decode
    from lsp_server.memory import Memory
    from lsp_server.models import load_engine
    from lsp_server.session import Session, Where
    from lsp_server.settings import parse_settings
    from lsp_server.stores import Stores

    made: list[Any] = []
    for_request = shared.SharedIndexes.for_request

    def keep(self: shared.SharedIndexes, *args: Any, **kwargs: Any) -> list[Any]:
        out = [Recorded(source) for source in for_request(self, *args, **kwargs)]
        made.extend(out)
        return out

    shared.SharedIndexes.for_request = keep  # type: ignore[method-assign]
    load = [os.getloadavg()[0]]
    runs: dict[str, Any] = {}
    for budget in budgets:
        options = {"sharedIndexes": [str(index)], "sharedBudgetMs": budget, "codebaseDb": str(DB)}
        settings, errors = parse_settings({**OPTIONS, **options})
        if errors:
            raise SystemExit("; ".join(errors))
        engine = load_engine(settings.model)
        session = Session(
            engine, Stores(engine.tokenizer, settings.stores), Memory(engine.tokenizer)
        )
        rows = []
        for path, offset in cursors(ROOT, count):
            text = path.read_text()
            context = CursorContext.at(text, offset, path.name)
            where = Where(path.as_uri(), path, [ROOT], {path.as_uri(): text})
            for store in session.stores.for_path(path, where.roots).present():
                session.memory.store_index(store)
            session.memory.wait()
            start = time.perf_counter()
            memory = session.matches_later(where, context, settings.decoding.definition_weight)()
            ngram = session.stores.source_for(path, where.roots, settings.decoding.lambdas)
            decode(engine, context, settings.decoding, ngram, memory=memory)
            seen = made[-1]
            budgeted = seen.source
            rows.append({"ms": (time.perf_counter() - start) * 1e3, "lookups": budgeted.lookups,
                         "repeats": seen.repeats(), "skipped": budgeted.skipped,
                         "spent_ms": budgeted.spent_s * 1e3})  # fmt: skip
        session.stores.close()
        runs[str(budget)] = {
            "rows": rows,
            **{k: sum(r[k] for r in rows) for k in ("lookups", "repeats", "skipped")},
            "p50_ms": percentile([r["ms"] for r in rows], 50),
            "spent_p50_ms": percentile([r["spent_ms"] for r in rows], 50),
            "spent_max_ms": max(r["spent_ms"] for r in rows),
        }
        load.append(os.getloadavg()[0])
    return {"index": str(index), "requests": count, "load": load, "budgets": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument(
        "--budgets", default="60000,50", help="sharedBudgetMs values, comma-separated"
    )
    parser.add_argument("--requests", type=int, default=8)
    args = parser.parse_args(argv)
    result = run(args.index, [int(b) for b in args.budgets.split(",")], args.requests)
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    for budget, r in result["budgets"].items():
        print(f"sharedBudgetMs {budget}: {r['lookups']} lookups, {r['repeats']} asked again, "
              f"{r['skipped']} skipped in {result['requests']} requests; spent p50 "
              f"{r['spent_p50_ms']:.0f} ms, max {r['spent_max_ms']:.0f}; "
              f"request p50 {r['p50_ms']:.0f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
