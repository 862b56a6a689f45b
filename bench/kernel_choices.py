"""The CPU kernel choices behind superposed/quant.py and prefill.py, measured (issue 39).

Runs on the AVX2 path by default (``ATEN_CPU_CAPABILITY=avx2``, ``ONEDNN_MAX_CPU_ISA=AVX2``,
``FBGEMM_ENABLE_INSTRUCTIONS=AVX2``, set before torch is imported: the script re-executes
itself with them), as on an AVX2-only CPU; ``--native`` runs on this CPU's own kernels. One
thread, the default model's real weights, interleaved rounds, medians. Modes:

- ``matmuls``: one row through the 30 layers' matmuls (q/k/v, o, gate/up and down fused as
  the fast runner fuses them) per kernel: int4 and int8 weight-only (bf16 activations, the
  product's), fbgemm's dynamic int8 (int8 activations, one scale a row) with 8-bit and with
  7-bit activations (``reduce_range``), fp32; and each kernel's relative error against the
  fp32 matmul on the real activations of a 256-token forward (the worst layer per matrix).
- ``agreement``: teacher-forced greedy agreement with the reference (HF, fp32) of the fast
  runner in int4 and with its layers on dynamic int8 (8-bit, 7-bit, 7-bit with down_proj
  kept int4), and each one's eager step at 512 positions.
- ``head``: the output head's options (one row): error, the reference's top 8 kept, time.
- ``prefill``: a 256-token prefill on the dense (de-quantized) layers against one on dynamic
  int8: time, and the next 12 greedy tokens' agreement with the dense prefill's.
- ``threads``: the calibration's timings (superposed/calibrate.py) at 1 and 2 threads, and
  its choice as a first load measures it.

    python -m bench.kernel_choices [--native] [--quick] [--modes matmuls head ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

AVX2_ENV = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2",
}
MODES = ("matmuls", "agreement", "head", "prefill", "threads")
MATRICES = ("qkv", "out", "gate_up", "down")  # a Block's linears, in its order
PREFILL_TOKENS = 256
NEXT_TOKENS = 12  # greedy tokens compared after a prompt
STEP_POSITIONS = 512
SIZES = {  # (rounds, prompts) by size
    "full": (7, 8),
    "quick": (3, 3),
}
NOTE = (
    "Measured on a shared 2-core machine while other processes ran: medians of interleaved "
    "rounds, compare within the run only."
)


def needs_env(native: bool, environ: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """The variables to set (and re-execute with) for the AVX2 path; empty when ``native`` or
    when they are already set."""
    if native:
        return {}
    return {k: v for k, v in AVX2_ENV.items() if environ.get(k) != v}


def agreement(got: Sequence[Sequence[int]], ref: Sequence[Sequence[int]]) -> float:
    """The share of positions where ``got``'s token equals ``ref``'s, over all sequences."""
    if len(got) != len(ref) or any(len(g) != len(r) for g, r in zip(got, ref, strict=True)):
        raise ValueError("agreement needs sequences of the same lengths")
    pairs = [(a, b) for g, r in zip(got, ref, strict=True) for a, b in zip(g, r, strict=True)]
    if not pairs:
        raise ValueError("agreement of no tokens")
    return round(sum(a == b for a, b in pairs) / len(pairs), 3)


def relative_error(out: Any, ref: Any) -> float:
    """||out - ref|| / ||ref|| (tensors, compared in fp32)."""
    out, ref = out.float(), ref.float()
    return float((out - ref).norm() / ref.norm())


def medians(times: dict[str, list[float]], digits: int = 2) -> dict[str, float]:
    """Each name's median ms, the first (warm-up) sample left out where there are more."""
    return {k: round(statistics.median(v[1:] or v), digits) for k, v in times.items()}


def interleaved(fns: Mapping[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """ms of each function, ``rounds`` + 1 times, interleaved (the first round warms up)."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds + 1):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1e3)
    return times


class DynamicInt8Linear:
    """fbgemm's dynamic int8 linear: per-channel int8 weights, the activations quantized
    per call with one scale a row; ``reduce_range`` keeps 7 bits of them (AVX2's u8 x s8
    products saturate int16 otherwise). fp32 in and out."""

    out_dtype: Any = None

    def __init__(self, weight: Any, bias: Any, reduce_range: bool) -> None:
        import torch

        w = weight.detach().float().contiguous()  # [N, K]
        scale = w.abs().amax(1).clamp(min=1e-8) / 127  # [N]
        zeros = torch.zeros(w.shape[0], dtype=torch.long)
        with warnings.catch_warnings():  # torch deprecates its quantized tensors (2.13)
            warnings.simplefilter("ignore", UserWarning)
            q = torch.quantize_per_channel(w, scale.double(), zeros, 0, torch.qint8)
        b = None if bias is None else bias.detach().float()
        self.packed = torch.ops.quantized.linear_prepack(q, b)
        self.reduce_range = reduce_range
        self.out_dtype = torch.float32

    def __call__(self, x: Any) -> Any:
        import torch

        flat = x.reshape(-1, x.shape[-1]).float()  # [M, K]
        out = torch.ops.quantized.linear_dynamic(flat, self.packed, self.reduce_range)
        return out.reshape(*x.shape[:-1], out.shape[-1])


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--native", action="store_true", help="this CPU's kernels, not AVX2")
    parser.add_argument("--quick", action="store_true", help="fewer rounds and prompts")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--out", default=None, help="results file (.json)")


def variant(args: argparse.Namespace) -> str:
    return ("-native" if args.native else "") + ("-quick" if args.quick else "")


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], Any]:
    import torch

    from bench import kernel_modes
    from bench.measure import Stamp
    from superposed.model import load_model

    capability = torch.backends.cpu.get_cpu_capability()
    if not args.native and capability != "AVX2":
        raise RuntimeError(f"the AVX2 path did not take: torch reports {capability}")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rounds, prompts = SIZES["quick" if args.quick else "full"]
    stamp = Stamp(model="smollm2-135m")
    loaded = load_model(threads=1)
    results: dict[str, Any] = {
        "note": NOTE,
        "cpu_capability": capability,
        "path": "native" if args.native else "AVX2 (" + ", ".join(AVX2_ENV) + ")",
        "rounds": rounds,
        "prompts": prompts,
    }
    for mode in args.modes:
        print(f"{mode}...", file=sys.stderr, flush=True)
        results[mode] = kernel_modes.MEASURES[mode](loaded, rounds, prompts)
    return results, stamp


def markdown(results: dict[str, Any]) -> str:
    """kernel_choices.md: one table a mode measured."""
    from bench.tables import load_span, stamp_header, table

    s = results["stamp"]
    lines = [
        "# The CPU kernel choices (bench/kernel_choices.py)",
        "",
        f"{stamp_header(s)}, {results['path']} path (torch CPU capability "
        f"{results['cpu_capability']}), 1 thread, SmolLM2-135M, medians of {results['rounds']} "
        f"interleaved rounds, {load_span(s)}. {results['note']}",
    ]
    if (m := results.get("matmuls")) is not None:
        lines += [
            "",
            "One row through the 30 layers' matmuls (the product's layers run int4); "
            "relative error against fp32 on a 256-token forward's activations, the worst layer:",
            "",
        ]
        rows = [[k, v["ms"], *(v["error"][n] for n in MATRICES)] for k, v in m.items()]
        lines.append(table(["kernel", "ms", *(f"error {n}" for n in MATRICES)], rows, "lrrrrr"))
    if (a := results.get("agreement")) is not None:
        lines += [
            "",
            f"Teacher-forced greedy agreement with the reference (HF, fp32) over "
            f"{NEXT_TOKENS} tokens after each prompt, and the eager step at "
            f"{STEP_POSITIONS} positions:",
            "",
        ]
        rows = [[k, v["agreement"], v["step ms"]] for k, v in a.items()]
        lines.append(table(["layers", "agreement", "step ms"], rows, "lrr"))
    if (h := results.get("head")) is not None:
        lines += [
            "",
            "The output head, one row: relative error, the reference's top 8 among "
            "the kernel's top 8, time:",
            "",
        ]
        rows = [[k, v["error"], v["top 8 kept"], v["ms"]] for k, v in h.items()]
        lines.append(table(["head", "error", "top 8 kept", "ms"], rows, "lrrr"))
    if (p := results.get("prefill")) is not None:
        lines += [
            "",
            f"A {PREFILL_TOKENS}-token prefill, and the next {NEXT_TOKENS} greedy "
            "tokens' agreement with the dense prefill's:",
            "",
        ]
        rows = [[k, v["ms"], v["agreement"]] for k, v in p.items()]
        lines.append(table(["prefill layers", "ms", "agreement"], rows, "lrr"))
    if (t := results.get("threads")) is not None:
        c = t["calibration"]
        lines += [
            "",
            "The calibration's timings (best of its repeats, ms) at 1 and 2 threads, "
            "and 2 threads' over 1 thread's:",
            "",
        ]
        rows = [[k, *v.values()] for k, v in t["ms"].items()]
        lines.append(table(["phase", "1 thread", "2 threads", "2 / 1"], rows, "lrrr"))
        lines += [
            "",
            f"calibrate.measure in the same run: {c['precision']} on {c['threads']} "
            f"thread(s) for steps, {c['prefill_threads']} for prefills, counts tried "
            f"{c['counts']}.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    from bench.pipeline import Benchmark, run

    bench = Benchmark(
        "kernel_choices",
        __doc__.splitlines()[0],
        options=options,
        markdown=markdown,
        variant=variant,
    )
    args = bench.parser().parse_args(argv)
    env = needs_env(args.native, os.environ)
    if env:  # torch reads them when it loads: start again with them set
        argv = sys.argv[1:] if argv is None else argv
        command = [sys.executable, "-m", "bench.kernel_choices", *argv]
        os.execve(sys.executable, command, {**os.environ, **env})
    run(bench, measure, lambda results: [markdown(results).rstrip("\n")], argv)


if __name__ == "__main__":
    main()
