"""Where a first window's prefill goes at the server's default thread count (issue 54 item 3):
the de-quantized prefill (the product's path past ``DEQUANTIZED_DECODE_TOKENS``) against the
same prefill on the int4 kernels, and de-quantizing every layer alone, with the minor page
faults each costs. Not a timed test.

    .venv/bin/python -m bench.prefill_parts [--tokens 92 210] [--rounds 5] [--threads 1]
        [--versus-env NAME=VALUE ...]

Cases run interleaved, round by round, on one loaded engine; medians. ``--versus-env``: each
round in two fresh processes, this environment and the one with these variables added (glibc's
``MALLOC_TRIM_THRESHOLD_`` and ``MALLOC_MMAP_THRESHOLD_`` keep freed memory for reuse, where
by default a prefill's temporaries are handed back and faulted in anew), in ABBA order.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.measure import RESULTS, Stamp, write_results
from bench.tables import table
from superposed.prefill import DequantizedBlocks


def _timed(fn: Callable[[], object]) -> tuple[float, int]:
    """ms and minor page faults of one call."""
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    fn()
    ms = (time.perf_counter() - start) * 1e3
    return ms, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults


def measure(model: str, tokens: list[int], rounds: int, threads: int) -> dict[str, Any]:
    """Every case, ``rounds`` interleaved rounds after one that warms up: (ms, faults) each."""
    import argparse as stdlib_argparse

    from superposed.api import Engine
    from superposed.fast_runner import FastRunner

    engine = Engine.load(model, threads=threads, compile="off")
    runner = engine.runner
    assert isinstance(runner, FastRunner), "the de-quantized prefill is the fast runner's"
    plan = runner.plan
    source = Path(stdlib_argparse.__file__).read_text()  # real Python, as lsp_latency's
    ids = engine.tokenizer(source)["input_ids"][1000 : 1000 + max(tokens)]
    dequantizing = plan.decode_tokens

    dense = plan.dense
    serial = dataclasses.replace(dense, blocks=DequantizedBlocks(plan.decode.blocks, ahead=False))

    def prefill(n: int, on_int4: bool, one_after_another: bool = False) -> Callable[[], object]:
        def run() -> object:
            plan.decode_tokens = 10**9 if on_int4 else dequantizing
            plan.dense = serial if one_after_another else dense
            try:
                return runner.prefill(ids[:n])
            finally:
                plan.decode_tokens, plan.dense = dequantizing, dense

        return run

    cases: dict[str, Callable[[], object]] = {}
    for n in tokens:
        cases[f"prefill {n} tokens, de-quantized (the product)"] = prefill(n, False)
        cases[f"prefill {n} tokens, de-quantized on the forward's thread"] = prefill(n, False, True)
        cases[f"prefill {n} tokens, int4 kernels"] = prefill(n, True)
    cases["de-quantize every layer, one at a time, nothing else"] = lambda: all(plan.dense.blocks)
    rows: dict[str, list[tuple[float, int]]] = {name: [] for name in cases}
    for round_ in range(rounds + 1):  # the first round warms up, and is dropped
        for name, fn in cases.items():
            runner.rewind(0)
            timed = _timed(fn)
            if round_:
                rows[name].append(timed)
    return {"runner": f"{type(runner).__name__} ({runner.precision})", "rows": rows}


def medians(rows: dict[str, list[list[float]]]) -> dict[str, dict[str, float]]:
    return {
        name: {
            "ms": statistics.median(ms for ms, _ in done),
            "faults": statistics.median(f for _, f in done),
        }
        for name, done in rows.items()
    }


def in_child(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    """One measure() in a fresh process with ``env`` added."""
    command = [sys.executable, "-m", "bench.prefill_parts", "--child", "--model", args.model]
    command += ["--rounds", str(args.rounds), "--threads", str(args.threads), "--tokens"]
    command += [str(n) for n in args.tokens]
    done = subprocess.run(
        command, env={**os.environ, **env}, capture_output=True, text=True, check=True
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def markdown(result: dict[str, Any]) -> str:
    stamp = result["stamp"]
    sides = result["sides"]
    header = ["case"]
    for side in sides:
        header += [f"ms, {side}", f"page faults, {side}"]
    rows = []
    for name in next(iter(sides.values())):
        row = [name]
        for cases in sides.values():
            row += [f"{cases[name]['ms']:,.0f}", f"{cases[name]['faults']:,.0f}"]
        rows.append(row)
    order = f", processes in the order {', '.join(result['order'])}" if result["order"] else ""
    return (
        "# Where a first window's prefill goes (issue 54 item 3)\n\n"
        f"{stamp['model']}, {result['runner']}, de-quantized past {result['dequantizing']} "
        f"tokens, {result['threads']} thread(s), medians of {result['rounds']} interleaved "
        f"rounds per process{order}. {stamp['machine']}; commit {stamp['commit']}, "
        f"{stamp['date']}; load {stamp['load_start']} -> {stamp['load_end']}.\n\n"
        + table(header, rows)
        + f"\n\nCommand: `{stamp['command']}`\n"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.prefill_parts")
    parser.add_argument("--tokens", type=int, nargs="+", default=[92, 210])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="the server's default: 1")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--versus-env", nargs="*", default=[], metavar="NAME=VALUE")
    parser.add_argument("--processes", type=int, default=2, help="per side, with --versus-env")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS / "prefill_parts")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.model, args.tokens, args.rounds, args.threads)))
        return
    from superposed.prefill import DEQUANTIZED_DECODE_TOKENS

    started, stamp = time.perf_counter(), Stamp(model=args.model)
    order: list[str] = []
    if args.versus_env:
        versus = dict(item.split("=", 1) for item in args.versus_env)
        other = " ".join(args.versus_env)
        runs: dict[str, list[dict[str, Any]]] = {"default": [], other: []}
        for i in range(args.processes):
            for side in ("default", other) if i % 2 == 0 else (other, "default"):
                runs[side].append(in_child(args, {} if side == "default" else versus))
                order.append(side)
        pooled = {
            side: {name: [r for run in done for r in run["rows"][name]] for name in done[0]["rows"]}
            for side, done in runs.items()
        }
        runner = runs["default"][0]["runner"]
    else:
        done = measure(args.model, args.tokens, args.rounds, args.threads)
        pooled, runner = {"default": done["rows"]}, done["runner"]
    result = {
        "stamp": stamp.finish(started),
        "runner": runner,
        "dequantizing": DEQUANTIZED_DECODE_TOKENS,
        "threads": args.threads,
        "rounds": args.rounds,
        "tokens": args.tokens,
        "order": order,
        "sides": {side: medians(rows) for side, rows in pooled.items()},
        "per_round": pooled,
    }
    write_results(args.out, result, markdown)


if __name__ == "__main__":
    main()
