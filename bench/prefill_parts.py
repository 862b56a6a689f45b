"""Where a first window's prefill goes at the server's default thread count (issue 54 item 3):
the de-quantized prefill (the product's path past ``DEQUANTIZED_DECODE_TOKENS``, each layer
de-quantized into one scratch kept between prefills) against the same with each layer in
fresh memory (as before the scratch) and on the int4 kernels, and de-quantizing every layer
alone, with the minor page faults each costs. Not a timed test.

    .venv/bin/python -m bench.prefill_parts [--tokens 92 210] [--rounds 5] [--threads 1]

Cases run interleaved, round by round, on one loaded engine; medians.
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.measure import RESULTS, Stamp, write_results
from bench.tables import table


def _timed(fn: Callable[[], object]) -> tuple[float, int]:
    """ms and minor page faults of one call."""
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    fn()
    ms = (time.perf_counter() - start) * 1e3
    return ms, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults


class FreshBlocks(Sequence[Any]):
    """De-quantized blocks walked as before the scratch: each layer into new memory."""

    def __init__(self, blocks: Any) -> None:
        self.blocks = blocks

    def __len__(self) -> int:
        return len(self.blocks)

    def __getitem__(self, index: Any) -> Any:
        return self.blocks.dense(index, reuse=False)


def measure(model: str, tokens: list[int], rounds: int, threads: int) -> dict[str, Any]:
    from superposed.api import Engine
    from superposed.fast_runner import FastRunner

    engine = Engine.load(model, threads=threads, compile="off")
    runner = engine.runner
    assert isinstance(runner, FastRunner), "the de-quantized prefill is the fast runner's"
    plan = runner.plan
    source = Path(argparse.__file__).read_text()  # ~2,600 lines of real Python (lsp_latency's)
    ids = engine.tokenizer(source)["input_ids"][1000 : 1000 + max(tokens)]
    dequantizing = plan.decode_tokens

    dense = plan.dense
    fresh = dataclasses.replace(dense, blocks=FreshBlocks(dense.blocks))

    def prefill(n: int, way: str) -> Callable[[], object]:
        def run() -> object:
            plan.decode_tokens = 10**9 if way == "int4" else dequantizing
            plan.dense = fresh if way == "fresh" else dense
            try:
                return runner.prefill(ids[:n])
            finally:
                plan.decode_tokens, plan.dense = dequantizing, dense

        return run

    cases: dict[str, Callable[[], object]] = {}
    for n in tokens:
        cases[f"prefill {n} tokens, de-quantized into the scratch (the product)"] = prefill(
            n, "scratch"
        )
        cases[f"prefill {n} tokens, de-quantized into fresh memory"] = prefill(n, "fresh")
        cases[f"prefill {n} tokens, int4 kernels"] = prefill(n, "int4")
    cases["de-quantize every layer into the scratch, nothing else"] = lambda: all(dense.blocks)
    rows: dict[str, list[tuple[float, int]]] = {name: [] for name in cases}
    for round_ in range(rounds + 1):  # the first round warms up, and is dropped
        for name, fn in cases.items():
            runner.rewind(0)
            timed = _timed(fn)
            if round_:
                rows[name].append(timed)
    return {
        "runner": f"{type(runner).__name__} ({runner.precision}), "
        f"de-quantized past {dequantizing} tokens",
        "cases": {
            name: {
                "ms": statistics.median(ms for ms, _ in done),
                "faults": statistics.median(f for _, f in done),
            }
            for name, done in rows.items()
        },
        "per_round": rows,
    }


def markdown(result: dict[str, Any]) -> str:
    stamp = result["stamp"]
    rows = [
        [name, f"{case['ms']:,.0f}", f"{case['faults']:,.0f}"]
        for name, case in result["cases"].items()
    ]
    return (
        "# Where a first window's prefill goes (issue 54 item 3)\n\n"
        f"{stamp['model']}, {result['runner']}, {result['threads']} thread(s), medians of "
        f"{result['rounds']} interleaved rounds. {stamp['machine']}; commit {stamp['commit']}, "
        f"{stamp['date']}; load {stamp['load_start']} -> {stamp['load_end']}.\n\n"
        + table(["case", "ms", "minor page faults"], rows)
        + f"\n\nCommand: `{stamp['command']}`\n"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.prefill_parts")
    parser.add_argument("--tokens", type=int, nargs="+", default=[92, 210])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="the server's default: 1")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--out", type=Path, default=RESULTS / "prefill_parts")
    args = parser.parse_args(argv)
    started, stamp = time.perf_counter(), Stamp(model=args.model)
    result = measure(args.model, args.tokens, args.rounds, args.threads)
    result = {
        "stamp": stamp.finish(started),
        "threads": args.threads,
        "rounds": args.rounds,
        "tokens": args.tokens,
        **result,
    }
    write_results(args.out, result, markdown)


if __name__ == "__main__":
    main()
