"""One-row matmul kernels on this CPU: how fast each streams weights (decode is bound by it).

A decode step of batch 1 reads every weight once, so the kernel's bandwidth on weights that
are not in cache sets the step's floor. For the default model's layer shapes (120 distinct
matrices, 212 MB in bf16, far more than the caches) and its output head, each kernel runs
one row through every matrix; medians of ``--runs``, one thread, interleaved. A plain fp32
sum over 256 MB is the machine's streaming bandwidth for reference.

Prefill (issue 14): the matmul throughput of bf16 ``F.linear`` with 512 rows (a prefill
chunk) through the same matrices, beside prefills of the default model (128, 256 and 1,500
tokens: a warm-up chunk, a first request's window, a long prompt) on the fast runner, int4
(short prefills on the int4 kernels, longer ones de-quantizing each layer as it runs; or with
``prefill_copy`` a bf16 copy of the layers) and bf16, in the same run: tokens/s and
effective GFLOP/s (the layers' matmuls, 2 x tokens x weights, plus causal
attention, 2 x tokens^2 x heads x head_dim per layer).

    python -m bench.kernels [--prefill-tokens 128 256 1500]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from bench.measure import Stamp, median_ms
from bench.pipeline import Benchmark, run
from bench.tables import load_span, stamp_header, table
from superposed.quant import Int4Linear, Int8Linear

# SmolLM2-135M: hidden 576, intermediate 1536, 9 query and 3 KV heads of 64, 30 layers.
LAYER_SHAPES = [(960, 576), (576, 576), (3072, 576), (576, 1536)]  # qkv, out, gate_up, down
LAYERS = 30
HEAD = (49152, 576)


def kernels(weights: list[torch.Tensor]) -> dict[str, tuple[Callable[[], object], int]]:
    """name -> (run one row through every weight, bytes of weights read)."""
    bf16 = [w.to(torch.bfloat16) for w in weights]
    rows = {w.shape[1]: torch.randn(1, w.shape[1]) for w in weights}
    rows16 = {k: v.to(torch.bfloat16) for k, v in rows.items()}
    inputs = [rows16[w.shape[1]] for w in weights]
    int8 = [Int8Linear(w, None) for w in weights]
    int4 = [Int4Linear(w, None) for w in weights]
    n32 = sum(w.numel() * 4 for w in weights)
    n16 = n32 // 2
    n8 = sum(q.qweight.numel() + q.scale.numel() * 2 for q in int8)
    n4 = sum(
        q.packed.numel() * q.packed.element_size() + q.scales_and_zeros.numel() * 2 for q in int4
    )
    return {
        "fp32 F.linear": (lambda: [F.linear(rows[w.shape[1]], w) for w in weights], n32),
        "bf16 F.linear": (lambda: [F.linear(rows16[w.shape[1]], w) for w in bf16], n16),
        "bf16 torch.mv": (lambda: [torch.mv(w, rows16[w.shape[1]][0]) for w in bf16], n16),
        "int8 _weight_int8pack_mm": (lambda: [q(x) for q, x in zip(int8, inputs, strict=True)], n8),
        "int4 _weight_int4pack_mm_for_cpu": (
            lambda: [q(x) for q, x in zip(int4, inputs, strict=True)],
            n4,
        ),
    }


KEYS = ("ms", "MB", "GB/s")


def measure(weights: list[torch.Tensor], runs: int) -> dict[str, Any]:
    table = kernels(weights)
    times: dict[str, list[float]] = {name: [] for name in table}
    for _ in range(runs):  # interleaved: every kernel sees the same machine load
        for name, (fn, _) in table.items():
            times[name].append(median_ms(fn, 1))
    out = {}
    for name, (_, nbytes) in table.items():
        ms = statistics.median(times[name])
        out[name] = {
            "ms": round(ms, 2),
            "MB": round(nbytes / 1e6, 1),
            "GB/s": round(nbytes / ms / 1e6, 1),
        }
    return out


def matmul_gflops(weights: list[torch.Tensor], rows: int, runs: int) -> dict[str, float]:
    """bf16 F.linear of ``rows`` rows through every weight: ms and GFLOP/s."""
    bf16 = [w.to(torch.bfloat16) for w in weights]
    inputs = {w.shape[1]: torch.randn(rows, w.shape[1]).to(torch.bfloat16) for w in weights}
    ms = statistics.median(
        median_ms(lambda: [F.linear(inputs[w.shape[1]], w) for w in bf16], 1) for _ in range(runs)
    )
    flops = 2 * rows * sum(w.numel() for w in weights)
    return {"rows": rows, "ms": round(ms, 1), "GFLOP/s": round(flops / ms / 1e6, 1)}


def prefill_rates(tokens: int, runs: int) -> dict[str, dict[str, float]]:
    """A ``tokens``-token prefill of the default model on the fast runner, int4 and bf16."""
    from superposed.fast_runner import FastRunner
    from superposed.model import load_model

    loaded = load_model(threads=1, skeleton=True)
    ids = loaded.tokenizer(Path(argparse.__file__).read_text())["input_ids"][:tokens]
    config = loaded.model.config

    def fast(precision: str, copy: bool = False) -> FastRunner:
        return FastRunner(loaded.model, precision, checkpoint=loaded.checkpoint, prefill_copy=copy)

    int4 = fast("int4")
    runners = {
        f"int4 runner (int4 kernels to {int4.plan.decode_tokens} tokens, then de-quantized)": int4,
        "int4 runner, bf16 prefill copy": fast("int4", copy=True),
        "bf16": fast("bf16"),
    }
    layer_weights = sum(
        p.numel() for name, p in loaded.model.named_parameters() if ".layers." in name
    )
    head_dim = config.hidden_size // config.num_attention_heads
    attention = 2 * tokens**2 * config.num_attention_heads * head_dim * config.num_hidden_layers
    flops = 2 * tokens * layer_weights + attention
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(runs):  # interleaved
        for name, runner in runners.items():
            runner.rewind(0)
            times[name].append(median_ms(partial(runner.prefill, ids), 1))
    out = {}
    for name, ms_list in times.items():
        ms = statistics.median(ms_list)
        out[name] = {
            "tokens": len(ids),
            "ms": round(ms),
            "tokens/s": round(len(ids) / ms * 1e3),
            "GFLOP/s": round(flops / ms / 1e6, 1),
        }
    return out


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument(
        "--prefill-tokens",
        type=int,
        nargs="+",
        default=[128, 256, 1500],
        help="prefill lengths: a warm-up chunk, a first request's window, a long prompt",
    )
    parser.add_argument("--prefill-runs", type=int, default=3)


def run_kernels(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    """Bandwidth, the one-row kernels over the layers and the head, the bf16 matmul rate and
    the prefill rates, on one thread."""
    torch.set_num_threads(1)
    stamp = Stamp(model="SmolLM2-135M shapes, random weights")
    torch.manual_seed(0)
    stream = torch.randn(64 * 2**20)  # 256 MB
    sums = [median_ms(stream.sum, 1) for _ in range(args.runs)]
    results: dict[str, Any] = {
        "fp32 sum, 256 MB (GB/s)": round(stream.numel() * 4 / statistics.median(sums) / 1e6, 1),
        "runs": args.runs,
    }
    del stream
    layers = [torch.randn(shape) * 0.02 for _ in range(LAYERS) for shape in LAYER_SHAPES]
    results["layers"] = measure(layers, args.runs)
    results["head"] = measure([torch.randn(HEAD) * 0.02], args.runs)
    results["bf16 matmul, prefill chunk"] = matmul_gflops(layers, 512, args.prefill_runs * 3)
    del layers
    results["prefill"] = {
        f"{name}, {tokens}": rate
        for tokens in args.prefill_tokens
        for name, rate in prefill_rates(tokens, args.prefill_runs).items()
    }
    return results, stamp


def main(argv: list[str] | None = None) -> None:
    run(BENCH, run_kernels, lambda results: [markdown(results).rstrip("\n")], argv)


def markdown(results: dict[str, Any]) -> str:
    """kernels.md: the bandwidth line and one row per kernel."""
    s, runs = results["stamp"], results["runs"]
    rows = [
        [name, *(results[part][name][key] for part in ("layers", "head") for key in KEYS)]
        for name in results["layers"]
    ]
    lines = [
        "# One-row matmul kernels (bench/kernels.py)",
        "",
        f"{stamp_header(s)}, 1 thread, medians of {runs}, {load_span(s)}.",
        "",
        f"Streaming bandwidth (fp32 sum over 256 MB): {results['fp32 sum, 256 MB (GB/s)']} GB/s.",
        "",
        table(
            ["kernel", "30 layers: ms", "MB", "GB/s", "output head: ms", "MB", "GB/s"],
            rows,
            align="l" + "r" * 6,
        ),
    ]
    matmul = results.get("bf16 matmul, prefill chunk")
    if matmul is not None:
        prefill = results["prefill"]
        lines += [
            "",
            "## Prefill against the bf16 matmul throughput (same run)",
            "",
            f"bf16 `F.linear`, {matmul['rows']} rows through the 30 layers' matrices: "
            f"{matmul['ms']} ms, **{matmul['GFLOP/s']} GFLOP/s**. A prefill of the default "
            "model (medians; effective GFLOP/s: the layers' matmuls plus causal attention, see "
            "the module docstring):",
            "",
            table(
                ["runner", "tokens", "ms", "tokens/s", "effective GFLOP/s"]
                + ["of the bf16 matmul rate"],
                [
                    [name.rpartition(", ")[0], r["tokens"], r["ms"], r["tokens/s"], r["GFLOP/s"]]
                    + [f"{r['GFLOP/s'] / matmul['GFLOP/s']:.0%}"]
                    for name, r in prefill.items()
                ],
                align="l" + "r" * 5,
            ),
        ]
    return "\n".join(lines) + "\n"


BENCH = Benchmark("kernels", __doc__.splitlines()[0], options=options, markdown=markdown)


if __name__ == "__main__":
    main()
