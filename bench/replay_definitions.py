"""The replay's lines that call a name defined elsewhere: definition proposals on against off.

Issue 22 asks for a split of its own: target lines that call a name (``f(`` or ``obj.f(``)
that a different file of the repository's snapshot defines, by tree-sitter tags
(ngram_db.symbols) over the snapshot's files. On those positions this script runs
``bench.replay``'s machinery (its positions, stores, server run, metrics and paired
intervals; it edits nothing there) with the default settings (``off``: definitionWeight 0)
and with the definitions' proposals weighed in (``defs``), and saves
bench/results/replay_definitions.json.

Its stores are built in a folder of their own (``bench/replay``'s cache is shared with runs
of other commits' servers, which the symbols table's schema would refuse).

    python -m bench.replay_definitions                          # test split, line-start
    python -m bench.replay_definitions --cursor both --weight 0.5   # mid-line too
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench import replay
from bench.measure import RESULTS, ROOT, Stamp
from bench.pipeline import Benchmark, run
from ngram_db.symbols import extract

OUT = RESULTS / "replay_definitions.json"
_CALL = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*\s*\.\s*)*([A-Za-z_]\w*)\s*\(")
_NOT_CALLS = {"if", "elif", "while", "for", "return", "and", "or", "not", "in", "def", "class"}


def definitions(files: Mapping[str, str]) -> dict[str, set[str]]:
    """name -> the snapshot files that define it (functions, methods, classes)."""
    found: dict[str, set[str]] = {}
    for path, text in files.items():
        for symbol in extract(path, text, "python" if path.endswith(".py") else None):
            found.setdefault(symbol.name, set()).add(path)
    return found


def called_elsewhere(line: str, path: str, defined: Mapping[str, set[str]]) -> list[str]:
    """The names the line calls that a snapshot file other than ``path`` defines."""
    if line.lstrip().startswith(("def ", "async def ", "class ", "#")):
        return []
    names = [n for n in _CALL.findall(line) if n not in _NOT_CALLS]
    return [n for n in dict.fromkeys(names) if defined.get(n, set()) - {path}]


def select(data: Mapping[str, Any], todo: Sequence[replay.Position]) -> list[replay.Position]:
    """The positions whose target line calls a name defined in another snapshot file."""
    tasks = {t["id"]: t for t in data["tasks"]}
    defined = {r: definitions(data["repos"][r]["files"]) for r in {p.repo for p in todo}}
    return [p for p in todo if called_elsewhere(tasks[p.task]["text"], p.path, defined[p.repo])]


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--split", choices=("validation", "test"), default="test")
    parser.add_argument("--cursor", choices=(*replay.CURSORS, "both"), default="line-start")
    parser.add_argument("--weight", type=float, default=0.5, help="definitionWeight of 'defs'")
    parser.add_argument("--limit", type=int, help="positions at most (the first ones)")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--out", type=Path, help=f"results JSON (default: {OUT.relative_to(ROOT)})")
    parser.add_argument("--server-commit", default="HEAD",
                        help="the server of this commit (not others' unsaved work)")  # fmt: skip


BENCH = Benchmark("replay_definitions", __doc__.splitlines()[0], options=options)


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    stamp = Stamp(model=args.model)
    data = replay.load_data()
    cursors = replay.CURSORS if args.cursor == "both" else (args.cursor,)
    everything = replay.positions(data, args.split, None, cursors)
    todo = select(data, everything)[: args.limit]
    print(f"{len(todo)} of {len(everything)} positions call a name defined elsewhere",
          file=sys.stderr)  # fmt: skip
    configs = [
        replay.Config("off", {"memory": True, "definitionWeight": 0.0}),
        replay.Config("defs", {"memory": True, "definitionWeight": args.weight}),
    ]
    # stores of its own (see the docstring)
    own = replay.store_dir() / "replay_definitions"
    replay.store_dir = lambda: own  # type: ignore[assignment]
    stores = replay.build_stores(data, list(dict.fromkeys(p.repo for p in todo)), args.model)
    commit = replay.resolve_commit(args.server_commit)
    rows, server = asyncio.run(
        replay.run_configs(
            configs, todo, stores, args.model, replay.MAX_NEW_TOKENS, server_commit=commit
        )
    )
    stamp.runner = f"the server's (precision auto), compiled step {server['compiled_step']}"
    result = {
        "about": "issue 22: target lines calling a name defined in another snapshot file",
        "data": {
            "sha256": hashlib.sha256(replay.DATA.read_bytes()).hexdigest(),
            "split": args.split,
            "cursors": list(cursors),
            "positions": len(todo),
            "of": len(everything),
        },
        "configs": {c.name: dict(c.options) for c in configs},
        "server_commit": commit,
        "server": server,
        "summary": replay.summarize(rows),
        "comparisons": [c for c in replay.compare(rows, ["defs", "off"]) if c["cursor"] in cursors],
        "rows": rows,
    }
    return result, stamp


def report(result: dict[str, Any]) -> list[str]:
    """EM@3, ES@3 and latency with and without the definitions, and their paired differences."""
    lines = []
    for name in ("off", "defs"):
        for cursor in result["data"]["cursors"]:
            cell = result["summary"][name][cursor]["all"]
            lines.append(f"{name:5s} {cursor:10s} n={cell['n']} EM@3 {cell['emk']['mean']:.3f} "
                         f"ES@3 {cell['esk']['mean']:.3f} p50 {cell['p50_ms']:.0f} ms")  # fmt: skip
    for c in result["comparisons"]:
        if c["metric_a"] in ("emk", "esk"):
            lines.append(str({k: c[k] for k in c if k not in ("a", "b", "metric_b")}))
    return lines


def main(argv: list[str] | None = None) -> int:
    run(BENCH, measure, report, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
