"""Which dtype a long prefill's de-quantized weights should have on this CPU, measured.

The int4 runner (the default on a CPU) multiplies a prefill of 80+ tokens by its layers
de-quantized. In bf16 that is the fast path where the CPU has AVX-512 BF16 or AMX, but an
AVX2-only CPU emulates bf16 matmuls. This script times, side by side in one run on one
thread: the matmul probe ``quant.prefill_dtype`` decides by (bf16 against fp32), and a
256-token prefill of the default model through the de-quantized layers in bf16, in fp32 and
(for reference) through the int4 kernels. Medians; bench/results/prefill_dtype.{json,md}.

    python -m bench.prefill_dtype [--runs 3] [--tokens 256]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import torch

from bench.measure import Stamp, median_ms
from bench.pipeline import Benchmark, run
from bench.tables import table
from superposed import quant
from superposed.api import Engine
from superposed.fast_runner import FastRunner


def prefill_ms(engine: Engine, ids: list[int], runs: int, dtype: torch.dtype | None) -> float:
    """Median ms of a prefill of ``ids`` from an empty cache; ``dtype`` None: int4 kernels."""
    runner = engine.runner
    assert isinstance(runner, FastRunner), "the prefill kernels are the fast runner's"
    few, chosen = runner.plan.decode_tokens, quant.prefill_dtype
    if dtype is None:
        runner.plan.decode_tokens = len(ids)  # the decode weights: the int4 kernels
    else:
        quant.prefill_dtype = lambda: dtype  # type: ignore[assignment]

    def prefill() -> None:
        runner.rewind(0)
        runner.prefill(ids)

    try:
        return median_ms(prefill, runs)
    finally:
        runner.plan.decode_tokens, quant.prefill_dtype = few, chosen  # type: ignore[assignment]


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    stamp = Stamp(model="smollm2-135m")
    engine = Engine.load("smollm2-135m", precision="int4", compile="off", threads=1)
    ids = list(range(1000, 1000 + args.tokens))
    probe = {
        str(d).removeprefix("torch."): quant.matmul_seconds(d) * 1e3
        for d in (torch.bfloat16, torch.float32)
    }
    paths = {"de-quantized, bf16": torch.bfloat16, "de-quantized, fp32": torch.float32}
    result: dict[str, Any] = {
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "probe_ms": probe,
        "chosen": str(quant.prefill_dtype()).removeprefix("torch."),
        "tokens": args.tokens,
        "runs": args.runs,
        "prefill_ms": {name: prefill_ms(engine, ids, args.runs, d) for name, d in paths.items()},
    }
    result["prefill_ms"]["int4 kernels"] = prefill_ms(engine, ids, args.runs, None)
    slow = result["prefill_ms"]["de-quantized, bf16"] / result["prefill_ms"]["de-quantized, fp32"]
    result["bf16_over_fp32"] = slow
    return result, stamp


def markdown(result: dict[str, Any]) -> str:
    """The probe's choice and the three prefill paths' medians (prefill_dtype.md)."""
    s, probe = result["stamp"], result["probe_ms"]
    return "\n".join(
        [
            "# A long prefill's de-quantized weights: bf16 or fp32 on this CPU",
            "",
            f"CPU capability {result['cpu_capability']}; one thread; default model, int4; "
            f"{result['tokens']}-token prefill from an empty cache, median of {result['runs']}. "
            f"Commit {s['commit']}, {s['date']}, load {s['load_start'][0]:.2f}.",
            "",
            f"Probe (quant.matmul_seconds, [64, 512] x [512, 512], fastest of 3): bf16 "
            f"{probe['bfloat16']:.2f} ms, fp32 {probe['float32']:.2f} ms: the runner chooses "
            f"**{result['chosen']}** (bf16 only where it takes at most "
            f"{quant.BF16_SLOWER_AT_MOST:.0f}x fp32's time).",
            "",
            table(
                ["prefill path", "median ms"],
                [[name, f"{ms:,.0f}"] for name, ms in result["prefill_ms"].items()],
                align="lr",
            ),
            "",
            f"bf16 over fp32: {result['bf16_over_fp32']:.1f}x.",
            "",
            f"Command: `{s['command']}`",
            "",
        ]
    )


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=256)


BENCH = Benchmark("prefill_dtype", __doc__.splitlines()[0], options=options, markdown=markdown)


def main(argv: list[str] | None = None) -> int:
    run(BENCH, measure, lambda result: [markdown(result)], argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
