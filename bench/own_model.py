"""What a user's own GGUF model costs the first time and after (issue 56).

The first load converts the file once (superposed/gguf_convert.py): its time, its peak
memory, and the converted folder's size on disk; beside it, the peak of converting through
transformers' own GGUF load (``from_pretrained(gguf_file=...)``, a plain copy, saved: what
the embedded models' conversion does), which the streamed conversion replaces for the
user's files. Then ``Engine.load`` from the conversion, as the server loads it (runner
auto, compile off), twice: the first start's (which also calibrates the CPU's kernels for
the model's shapes, superposed/calibrate.py, once) and a later start's. Each phase runs in
a fresh process of its own, so each peak is that phase's alone (ru_maxrss). By default on
the random-weight Q8_0 GGUF of Qwen2.5-Coder-0.5B's shapes that ``bench.cpu_anchor
--qwen-shapes`` writes (speed and memory do not depend on the weights' values), or on
``--gguf PATH``.

    .venv/bin/python -m bench.own_model [--gguf PATH] [--no-transformers]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.measure import Stamp
from bench.pipeline import Benchmark, run
from bench.tables import load_span, stamp_header, table

NOTE = (
    "Measured on a shared 2-core machine while other processes ran (other engineers' tests): "
    "times move with the load; the peaks do not."
)


def _peak_mb() -> float:
    """This process's peak resident set, MiB (Linux: ru_maxrss is in KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def child(args: list[str]) -> dict[str, Any]:
    """One phase in a fresh process (``--child PHASE ...``); its JSON line."""
    command = [sys.executable, "-m", "bench.own_model", "--child", *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def run_phase(phase: str, gguf: Path, target: Path) -> dict[str, Any]:
    """In the child: run ``phase`` and say its seconds and peak."""
    start = time.perf_counter()
    if phase == "stream":
        from superposed.gguf_convert import convert

        convert(gguf, target, lambda done, total: None)
    elif phase == "transformers":
        from transformers import AutoModelForCausalLM

        from superposed.gguf_convert import gguf_named
        from superposed.model import _plain_copy

        with gguf_named(gguf) as (folder, name):
            loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)
        _plain_copy(loaded).save_pretrained(target)
    elif phase == "load":
        from superposed.api import Engine

        engine = Engine.load(str(gguf), "cpu", threads=1, compile="off")
        return {
            "seconds": round(time.perf_counter() - start, 1),
            "peak_mb": _peak_mb(),
            "runner": f"{type(engine.runner).__name__} {getattr(engine.runner, 'precision', '')}",
        }
    return {"seconds": round(time.perf_counter() - start, 1), "peak_mb": _peak_mb()}


def folder_mb(folder: Path) -> float:
    return round(sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20, 1)


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    from bench.cpu_anchor import model_of
    from superposed.own_model import converted_folder, gguf_model

    model = model_of(argparse.Namespace(qwen_shapes=not args.gguf, gguf=args.gguf))
    own = gguf_model(model)
    assert own is not None, f"{model} is not a GGUF file"
    stamp = Stamp(model=model)
    results: dict[str, Any] = {"note": NOTE, "gguf_mb": round(own.path.stat().st_size / 2**20, 1)}
    converted_folder(own).parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=converted_folder(own).parent) as scratch:
        streamed = Path(scratch) / "streamed"
        results["stream"] = child(["stream", str(own.path), str(streamed)])
        results["folder_mb"] = folder_mb(streamed)
        if not args.no_transformers:
            whole = Path(scratch) / "transformers"
            results["transformers"] = child(["transformers", str(own.path), str(whole)])
        target = converted_folder(own)
        if not (target / "config.json").is_file():  # the later start reads this conversion
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(streamed, target)
    results["first_load"] = child(["load", model, "-"])  # calibrates once for these shapes
    results["load"] = child(["load", model, "-"])
    results["model"] = "Qwen2.5-Coder-0.5B's shapes, Q8_0" if not args.gguf else own.path.name
    return results, stamp


def report(data: dict[str, Any]) -> str:
    phases = {"stream": "convert, streamed (the product)"}
    if "transformers" in data:
        phases["transformers"] = "convert through from_pretrained(gguf_file)"
    phases["first_load"] = "first start's load, after the conversion (calibrates the CPU once)"
    phases["load"] = f"a later start: Engine.load ({data['load']['runner']})"
    rows = [[words, data[key]["seconds"], data[key]["peak_mb"]] for key, words in phases.items()]
    stamp = data["stamp"]
    sizes = (
        f"{data['model']}: a {data['gguf_mb']} MiB GGUF file, converted into a "
        f"{data['folder_mb']} MiB folder (fp32 safetensors shards)"
    )
    parts = [
        "# A user's own GGUF model, the first time and after (bench/own_model.py)",
        f"{stamp_header(stamp)}, {load_span(stamp)}. {sizes}. {data['note']}",
        table(["phase, a fresh process each", "seconds", "peak MiB"], rows, "lrr"),
        "The first start is the streamed conversion and its load; every later start is the "
        "load alone. Each time counts its process's imports (torch, transformers: seconds "
        "on a busy machine), as a server's start does.",
    ]
    return "\n\n".join(parts) + "\n"


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gguf", help="a GGUF file (default: the Qwen2.5-Coder-0.5B shapes')")
    parser.add_argument("--no-transformers", action="store_true", help="skip from_pretrained's")
    parser.add_argument("--out", help="<out>.json and <out>.md (default bench/results/own_model)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)


BENCH = Benchmark(
    "own_model", __doc__.splitlines()[0], options=options, markdown=report, out_is_stem=True
)


def main(argv: list[str] | None = None) -> None:
    args = BENCH.parser().parse_args(argv)
    if args.child:
        phase, gguf, target = args.child
        print(json.dumps(run_phase(phase, Path(gguf), Path(target))))
        return
    run(BENCH, measure, lambda results: [report(results).rstrip("\n")], argv)


if __name__ == "__main__":
    main()
