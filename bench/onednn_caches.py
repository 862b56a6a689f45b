"""oneDNN's primitive caches by capacity (issue 51 item 7): the memory they hold after
prefills of distinct lengths, and what a smaller capacity costs the prefills.

    python -m bench.onednn_caches [--capacities 1024 16 1] [--lengths 10] [--rounds 2]

Each run is a fresh process with both caches (``superposed/onednn_caches.py``: oneDNN's and
ideep's) set to one capacity; 1,024 is the libraries' own default. It loads the model, then
prefills ``--lengths`` prompts of distinct lengths twice over, in the same order: on the
first pass every length is new to every capacity; on the second, 1,024 finds each length's
primitives cached and a small capacity has evicted them, its worst case. Resident MiB is read
once the model is in and after the second pass with the cache rewound and the heap trimmed
(``Engine.release``, what the server does when the last document closes). Runs alternate
between the capacities (ABBA over ``--rounds``) on a shared machine: compare within the run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.measure import RESULTS, Stamp, write_results
from bench.tables import table
from superposed.onednn_caches import VARIABLES

SHORTEST, LONGEST = 100, 700  # prompt lengths drawn, tokens (over 80: the bf16 matmuls)


def lengths(count: int) -> list[int]:
    """``count`` distinct prompt lengths, the same in every run."""
    return random.Random(0).sample(range(SHORTEST, LONGEST), count)


def child(model: str, count: int) -> dict[str, Any]:
    """One run in this process (its capacity set by the parent): held MiB and prefill ms."""
    from lsp_server.session import resident_mb
    from superposed.api import Engine
    from superposed.model import give_back_freed_memory

    engine = Engine.load(model, compile="off")
    give_back_freed_memory()
    loaded = resident_mb()["rss"] or 0.0
    draw = random.Random(1)
    passes: list[list[float]] = []
    for _ in range(2):
        times = []
        for n in lengths(count):
            ids = [draw.randrange(100, engine.tokenizer.vocab_size) for _ in range(n)]
            engine.runner.rewind(0)
            start = time.perf_counter()
            engine.runner.prefill(ids)
            times.append((time.perf_counter() - start) * 1e3)
        passes.append(times)
    engine.release()
    return {"held_mb": round((resident_mb()["rss"] or 0.0) - loaded, 1), "prefill_ms": passes}


def one_run(model: str, count: int, capacity: int) -> dict[str, Any]:
    """A fresh process with both caches at ``capacity``."""
    env = {**os.environ, **dict.fromkeys(VARIABLES, str(capacity))}
    command = [sys.executable, "-m", "bench.onednn_caches", "--child", "--model", model]
    command += ["--lengths", str(count)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def summary(runs: list[dict[str, Any]], baseline: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over a capacity's runs, and its prefill times against ``baseline``'s."""

    def pass_ms(rows: list[dict[str, Any]], which: int) -> list[float]:
        return [ms for run in rows for ms in run["prefill_ms"][which]]

    out: dict[str, Any] = {"held_mb": statistics.median(run["held_mb"] for run in runs)}
    for which, name in enumerate(("new", "again")):
        mine, theirs = pass_ms(runs, which), pass_ms(baseline, which)
        out[f"{name}_ms"] = round(statistics.median(mine), 1)
        # per length, this capacity's time over the baseline's, then the median of those
        ratios = [a / b for a, b in zip(mine, theirs, strict=True)]
        out[f"{name}_ratio"] = round(statistics.median(ratios), 3)
    return out


def markdown(result: dict[str, Any]) -> str:
    stamp, first = result["stamp"], result["capacities"][0]
    rows = [
        [
            str(capacity),
            f"{case['held_mb']:+.0f}",
            f"{case['new_ms']:.0f}",
            f"{case['new_ratio']:.2f}x",
            f"{case['again_ms']:.0f}",
            f"{case['again_ratio']:.2f}x",
        ]
        for capacity, case in zip(result["capacities"], result["cases"].values(), strict=True)
    ]
    header = [
        "capacity (both caches)",
        "held MiB",
        "prefill ms, new lengths",
        f"vs {first}",
        "prefill ms, lengths again",
        f"vs {first}",
    ]
    return "\n".join(
        [
            "# oneDNN's primitive caches by capacity (bench/onednn_caches.py, issue 51 item 7)",
            "",
            f"{stamp['command']} at {stamp['commit']}, {stamp['date']}, {stamp['machine']} "
            f"(load {stamp['load_start']} -> {stamp['load_end']}), model {stamp['model']}, "
            f"{result['rounds']} rounds of fresh processes alternating between the capacities.",
            "",
            f"Each process prefilled {len(result['lengths'])} prompts of distinct lengths "
            f"({SHORTEST} to {LONGEST} tokens) twice, in the same order. Held: resident MiB "
            "after both passes, the cache rewound and the heap trimmed, less the level once "
            "the model loaded (medians of the runs). Prefill ms: medians over lengths and "
            f"runs; vs {first}: the median of each length's time over {first}'s. "
            "The second pass finds every length's primitives cached at 1,024 and evicted at "
            "a small capacity.",
            "",
            table(header, rows, "lrrrrr"),
            "",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.onednn_caches")
    parser.add_argument("--capacities", type=int, nargs="+", default=[1024, 16, 1])
    parser.add_argument("--lengths", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS / "onednn_caches")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.model, args.lengths)))
        return
    started, stamp = time.perf_counter(), Stamp(model=args.model)
    runs: dict[int, list[dict[str, Any]]] = {capacity: [] for capacity in args.capacities}
    for round_ in range(args.rounds):
        order = args.capacities if round_ % 2 == 0 else args.capacities[::-1]
        for capacity in order:
            runs[capacity].append(one_run(args.model, args.lengths, capacity))
            print(f"round {round_ + 1}, capacity {capacity}: {runs[capacity][-1]['held_mb']} MiB")
    baseline = runs[args.capacities[0]]
    cases = {str(capacity): summary(runs[capacity], baseline) for capacity in args.capacities}
    result = {
        "stamp": stamp.finish(started),
        "capacities": args.capacities,
        "rounds": args.rounds,
        "lengths": lengths(args.lengths),
        "cases": cases,
        "runs": {str(capacity): rows for capacity, rows in runs.items()},
    }
    write_results(args.out, result, markdown)


if __name__ == "__main__":
    main()
