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
import hashlib
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench import replay, replay_driver
from lsp_server.settings import CONTEXT_MODES


def new_lines(args: argparse.Namespace, data: Mapping[str, Any]) -> list[replay.Position]:
    """The split's positions whose target line is new (not verbatim, not in the file)."""
    everything = replay.positions(data, args.split)
    todo = [p for p in everything if not p.verbatim and not p.in_file][: args.limit]
    print(f"{len(todo)} of {len(everything)} positions are new lines", file=sys.stderr)
    return todo


def configs_of(args: argparse.Namespace) -> list[replay_driver.Config]:
    """``off``, and one configuration a budget."""
    return [replay_driver.Config("off", {"context": "off"})] + [
        replay_driver.Config(f"ctx{n}", {"context": args.mode, "contextTokens": int(n)})
        for n in args.budgets.split(",")
    ]


def header(
    args: argparse.Namespace, data: Mapping[str, Any], todo: Sequence[Any]
) -> dict[str, Any]:
    return {
        "about": "issue 22 part 3: the codebase in the prompt, on the replay's new lines",
        "data": {
            "sha256": hashlib.sha256(replay.DATA.read_bytes()).hexdigest(),
            "split": args.split,
            "positions": len(todo),
            "of": len(replay.positions(data, args.split)),
        },
    }


def new_line_summary(name: str, cursor: str, c: Mapping[str, Any]) -> str:
    """A configuration at a cursor (every position is a new line: the ``all`` cell)."""
    return (f"{name:7s} {cursor:10s} n={c['n']} EM@3 {c['emk']['mean']:.3f} "
            f"ES@3 {c['esk']['mean']:.3f} p50 {c['p50_ms']:.0f} ms")  # fmt: skip


CONTEXT = replay_driver.Tasks(
    stem="replay_context",
    count="positions",
    repo_fields=replay_driver.REPO_FIELDS,
    load=lambda path: replay.load_data(),
    positions=new_lines,
    row_of=replay.line_row,
    summarize=replay.summarize,
    compare=replay.compare,
    settings=lambda a: {},
    line=new_line_summary,
    configs=configs_of,
    header=header,
)


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
    args.data, args.max_new_tokens = replay.DATA, replay.MAX_NEW_TOKENS
    return replay_driver.replay(args, CONTEXT)


if __name__ == "__main__":
    sys.exit(main())
