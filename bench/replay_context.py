"""The replay's new lines with the codebase in the prompt (issue 22 part 3): ``context`` on
against off.

``bench.replay``'s machinery (its positions, stores, server run, metrics and paired intervals;
nothing there is edited) on the positions of its ``new`` subset only (the target line is not
verbatim in the snapshot and not elsewhere in the file), since the verdict is about those and
the other positions would only cost time. Configurations: ``off`` (the default settings) and
one per budget, ``ctxN`` = ``{"context": MODE, "contextTokens": N}``, in one server and run,
so the p50 latencies compare. bench/report_context.py reads the results into
docs/benchmarks.md.

    python -m bench.replay_context --split validation --budgets 128,256,512   # tune
    python -m bench.replay_context --budgets 256                              # test split
    python -m bench.replay_context --budgets 256 --model gemma-3-270m \\
        --out bench/results/replay_context-gemma.json
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sys
import time
from pathlib import Path
from typing import Any

from bench import replay
from bench.measure import RESULTS, Stamp, write_json
from lsp_server.settings import CONTEXT_MODES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("validation", "test"), default="test")
    parser.add_argument("--budgets", default="256", help="contextTokens, comma-separated")
    parser.add_argument("--mode", choices=CONTEXT_MODES[1:], default="definitions")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--limit", type=int, help="new positions at most (the first ones)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--server-commit", default="HEAD",
                        help="the server of this commit (not others' unsaved work)")  # fmt: skip
    args = parser.parse_args(argv)
    started = time.perf_counter()
    stamp = Stamp(model=args.model)
    data = replay.load_data()
    everything = replay.positions(data, args.split)
    todo = [p for p in everything if not p.verbatim and not p.in_file][: args.limit]
    print(f"{len(todo)} of {len(everything)} positions are new lines", file=sys.stderr)
    configs = [replay.Config("off", {"context": "off"})] + [
        replay.Config(f"ctx{n}", {"context": args.mode, "contextTokens": int(n)})
        for n in args.budgets.split(",")
    ]
    out = args.out or RESULTS / (
        "replay_context" + ("-validation" if args.split == "validation" else "") + ".json"
    )
    stores = replay.build_stores(data, list(dict.fromkeys(p.repo for p in todo)), args.model)
    commit = replay.resolve_commit(args.server_commit)

    def save(rows: list[dict[str, Any]], server: dict[str, Any] | None = None) -> None:
        ran = [c for c in configs if any(r["config"] == c.name for r in rows)]
        if server is not None:
            stamp.runner = f"the server's (precision auto), compiled step {server['compiled_step']}"
        write_json(
            out,
            {
                "stamp": stamp.finish(started),
                "about": "issue 22 part 3: the codebase in the prompt, on the replay's new lines",
                "data": {
                    "sha256": hashlib.sha256(replay.DATA.read_bytes()).hexdigest(),
                    "split": args.split,
                    "positions": len(todo),
                    "of": len(everything),
                },
                "configs": {c.name: {"options": dict(c.options), "store": c.store} for c in ran},
                "server_commit": commit,
                "server": server,
                "partial": server is None,
                "summary": replay.summarize(rows),
                "comparisons": replay.compare(rows, [c.name for c in ran]),
                "rows": rows,
            },
        )

    rows, server = asyncio.run(
        replay.run_configs(
            configs, todo, stores, args.model, replay.MAX_NEW_TOKENS, done=save,
            server_commit=commit,
        )
    )  # fmt: skip
    save(rows, server)
    for name in dict.fromkeys(r["config"] for r in rows):
        for cursor in replay.CURSORS:
            cell = replay.summarize([r for r in rows if r["config"] == name])[name][cursor]["new"]
            print(f"{name:7s} {cursor:10s} n={cell['n']} EM@3 {cell['emk']['mean']:.3f} "
                  f"ES@3 {cell['esk']['mean']:.3f} p50 {cell['p50_ms']:.0f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
