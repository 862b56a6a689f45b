"""Where the server's resident memory goes, stage by stage (issue 14), default model, CPU.

One process does what the server does, in order, and reads its resident set size after
each stage: import torch; import the server (transformers, pygls); load the tokenizer and
the model code (a weightless model); build the fast runner (Engine.load, which reads the
weights one tensor at a time); load the compiled decode step (if it is in the cache, as
after the server's first run); prefill a 1,500-token prompt and decode a few steps. Beside
it, the bytes of the runner's own tensors by part, counted from the tensors themselves.
The peak is the process's high-water mark (``ru_maxrss``), as ``/usr/bin/time -v`` reports.

    python -m bench.footprint          # results: bench/results/footprint.{json,md}
    python -m bench.footprint --cold   # a fresh machine's first run: the GGUF converted first
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
from pathlib import Path
from typing import Any

from bench.measure import Stamp
from bench.pipeline import Benchmark, run
from bench.tables import stamp_header, table

TARGET_MB = 600  # issue 14: peak of one server run with the default model on a CPU


def resident_mib() -> tuple[float, float]:
    """(now, peak) resident MiB of this process (Linux)."""
    with open("/proc/self/statm") as statm:
        now = int(statm.read().split()[1]) * resource.getpagesize() / 2**20
    return round(now, 1), round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10, 1)


def tensor_mib(obj: Any, seen: set[int] | None = None) -> float:
    """MiB of the distinct tensor storages reachable from ``obj`` (attributes, lists)."""
    import torch

    seen = set() if seen is None else seen
    if isinstance(obj, torch.Tensor):
        storage = obj.untyped_storage()
        if storage.data_ptr() in seen:
            return 0.0
        seen.add(storage.data_ptr())
        return storage.nbytes() / 2**20
    if isinstance(obj, list | tuple):
        return sum(tensor_mib(item, seen) for item in obj)
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return sum(tensor_mib(value, seen) for value in vars(obj).values())
    return 0.0


def runner_parts(runner: Any) -> dict[str, float]:
    """MiB of the runner's tensors by part (each storage counted once, in this order)."""
    seen: set[int] = set()
    head = runner.decode_weights.lm_head
    return {
        "embedding (bf16; the int4 head's exact rows)": tensor_mib(runner._embed_weight, seen),
        "output head, int4": tensor_mib(head, seen),
        "decode layers (int4, norms)": tensor_mib(runner.decode_weights, seen),
        "prefill copy of the layers (bf16; only with prefill_copy)": tensor_mib(
            runner.plan.dense, seen
        ),
        "rotary table, KV cache, fingerprint sample": tensor_mib(runner, seen),
    }


def stages_of(prompt_tokens: int, cold: bool) -> tuple[dict[str, tuple[float, float]], Any, bool]:
    """What the server does, in order, with the resident MiB (now, peak) after each stage;
    the runner; whether the compiled step was in the cache."""
    stages: dict[str, tuple[float, float]] = {"python, numpy": resident_mib()}
    import torch  # noqa: F401 - the first thing the server imports

    stages["import torch"] = resident_mib()
    import lsp_server.server  # noqa: F401 - what the server imports before any model
    from superposed import compiled
    from superposed.api import Engine
    from superposed.model import load_model

    stages["import the server (transformers, pygls)"] = resident_mib()
    load_model(skeleton=True)  # the tokenizer and the model code, no weights (kept: imports)
    stage = "tokenizer, model code (a weightless model)"
    stages[("the GGUF converted; " if cold else "") + stage] = resident_mib()
    engine = Engine.load(compile="off")
    runner: Any = engine.runner  # the fast runner (Engine.load on a CPU)
    stages["Engine.load: the fast runner's weights"] = resident_mib()
    path = compiled.package_path(runner, 1)
    if path.exists():
        runner.compiled_steps[1] = compiled.load(path, runner)
        stages["the compiled decode step"] = resident_mib()
    source = Path(argparse.__file__).read_text()
    ids = engine.tokenizer(source)["input_ids"][:prompt_tokens]
    logits = runner.prefill(ids)
    for _ in range(8):
        logits = runner.step(runner.embed(logits.reshape(1, -1).argmax(-1)[:, None]))
    stages[f"a {len(ids)}-token prefill and 8 steps"] = resident_mib()
    return stages, runner, path.exists()


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    if args.cold:  # the default model is converted from its GGUF on the first load
        os.environ["SUPERPOSED_CACHE_DIR"] = tempfile.mkdtemp(prefix="footprint-cold-")
    stamp = Stamp(model="smollm2-135m, int4 (the CPU default)")
    stages, runner, compiled_step = stages_of(args.prompt_tokens, args.cold)
    from superposed.model import default_model_dir

    result = {
        "stages_mib": {name: {"rss": now, "peak": peak} for name, (now, peak) in stages.items()},
        "runner_tensors_mib": {k: round(mib, 1) for k, mib in runner_parts(runner).items()},
        "compiled_step": compiled_step,
        "model_dir": str(default_model_dir()),
        "target_peak_mb": TARGET_MB,
        "cold_cache": args.cold,
    }
    return result, stamp


def markdown(result: dict[str, Any]) -> str:
    """The stages and the runner's tensors as tables (footprint.md, footprint-cold.md)."""
    s, parts = result["stamp"], result["runner_tensors_mib"]
    lines = [
        "# Resident memory by stage (bench/footprint.py)",
        "",
        f"{stamp_header(s)}. Default model, "
        f"int4, one thread{', an empty cache directory' if result['cold_cache'] else ''}. "
        f"Target (issue 14): peak at most {result['target_peak_mb']} MB.",
        "",
    ]
    rows, previous = [], 0.0
    for name, stage in result["stages_mib"].items():
        now, peak = stage["rss"], stage["peak"]
        rows.append([name, f"{now:.0f}", f"{now - previous:+.0f}", f"{peak:.0f}"])
        previous = now
    lines.append(table(["stage", "resident MiB", "added MiB", "peak MiB"], rows, "lrrr"))
    lines += ["", "The runner's own tensors:", ""]
    parts_rows = [[name, mib] for name, mib in parts.items()]
    parts_rows.append(["total", f"{sum(parts.values()):.1f}"])
    lines.append(table(["part", "MiB"], parts_rows, "lr"))
    return "\n".join(lines) + "\n"


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prompt-tokens", type=int, default=1500)
    parser.add_argument(
        "--cold", action="store_true", help="an empty cache directory (footprint-cold.*)"
    )


BENCH = Benchmark(
    "footprint",
    __doc__.splitlines()[0],
    options=options,
    markdown=markdown,
    variant=lambda args: "-cold" if args.cold else "",
)


def main(argv: list[str] | None = None) -> None:
    run(BENCH, measure, lambda result: [markdown(result)], argv)


if __name__ == "__main__":
    main()
