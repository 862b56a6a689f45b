"""Latency: wall time per request of superposed decoding against the baselines, per runner.

For each runner (the reference transformers runner, and the fast runner at each precision)
and thread count, two settings: a 15-token prefix with 10 new tokens (the paper's), and a
1,500-token code context. Methods: superposed k in {1,2,3,4,8}, greedy, sequential nucleus
(k runs), batched nucleus (one batch of k rows) and beam (width k), k=3 for the baselines.

Requests run through ``Engine.complete``, as the server runs them. The prompt is cached after
the first request (prompt cache reuse), so these times are decode times; "greedy, cold" clears
the cache first and adds the prefill. Every repetition runs every method once, interleaved,
so the ratios compare times taken side by side under the same machine load. Then decode
steps and prefills are timed alone (``steps``). Medians; the load average is recorded.

    python -m bench.latency --threads 1          # all runners: about 45 min on a loaded 2-core box
    python -m bench.latency --threads 2 --runners hf fast-int4 --settings short --runs 3 --merge

A runner named fast-<precision>-compiled steps through the AOTInductor package of
superposed/compiled.py, for one row and for three; a missing package is built first
(one to two minutes each, then cached).

Two modes measured once and left to history (bench/results/README.md): ``--memory`` (the
memory's costs: latency_memory.json) and ``--models`` (the embedded models side by side,
issue 16: latency_models.json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from bench.common import fast_runner
from bench.measure import RESULTS, ROOT, Stamp, median_ms, write_json
from bench.tables import load_span, stamp_header, table
from superposed.api import Engine
from superposed.cuda_graph import GRAPH_PRECISIONS
from superposed.embedded import DEFAULT_MODEL
from superposed.model import LoadedModel, load_model
from superposed.options import PRECISIONS
from superposed.runner import HFRunner, ModelRunner
from superposed.types import DecodeConfig

# fast-<precision>-compiled: the decode step compiled by AOTInductor (built first if needed)
RUNNERS = ["hf", *(f"fast-{p}" for p in PRECISIONS), *(f"fast-{p}-compiled" for p in PRECISIONS)]
DEFAULT_RUNNERS = RUNNERS[:]
# fast-<precision>-graphs: CUDA graphs (cuda_graph.py); for a GPU (bench/gpu.py), not a default
RUNNERS += [f"fast-{p}-graphs" for p in GRAPH_PRECISIONS]
SUPERPOSED_K = (1, 2, 3, 4, 8)
BASELINE_K = 3
NEW_TOKENS = 10
SETTINGS = {"short": 15, "long": 1500}  # prompt tokens of each setting
STEPS = 8  # decode steps per timing of a step alone
# (label, method, k); "greedy, cold" also prefills the whole prompt.
METHODS: list[tuple[str, str, int]] = [
    ("greedy", "greedy", 1),
    *((f"superposed k={k}", "superposed", k) for k in SUPERPOSED_K),
    ("nucleus-sequential k=3", "nucleus-sequential", BASELINE_K),
    ("nucleus k=3", "nucleus", BASELINE_K),
    ("beam k=3", "beam", BASELINE_K),
    ("greedy, cold", "greedy", 1),
]


def model_label(model: str, device: torch.device) -> str:
    """The model, and the GPU when one runs it, as the results name them."""
    name = "SmolLM2-135M-Instruct" if model == DEFAULT_MODEL else Path(model).name
    return f"{name} on {torch.cuda.get_device_name(device)}" if device.type == "cuda" else name


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def make(loaded: LoadedModel, name: str) -> ModelRunner:
    if name == "hf":
        return HFRunner(loaded.model)
    # compiled: one row (superposed, greedy, sequential nucleus) and BASELINE_K (batched, beam)
    return fast_runner(loaded, name.removeprefix("fast-"), rows=(1, BASELINE_K))


ENGINE_SOURCE = "superposed"  # the prompts' text: the engine's own code


def code_context(tokenizer: Any, tokens: int) -> str:
    """About ``tokens`` tokens of this repository's engine code, ending mid-line."""
    files = sorted((ROOT / ENGINE_SOURCE).glob("*.py"))
    text = "\n\n".join(path.read_text() for path in files)
    ids = tokenizer.encode(text, add_special_tokens=False)[:tokens]
    if len(ids) < tokens:  # the engine moved and the prompt would silently shrink (or empty)
        raise ValueError(f"{ENGINE_SOURCE}/*.py holds {len(ids)} tokens, fewer than {tokens}")
    return str(tokenizer.decode(ids))


def sync() -> None:
    """Wait for the GPU's queued work, so that a timing covers it (a no-op on a CPU)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def time_requests(engine: Engine, text: str, runs: int) -> dict[str, Any]:
    """Median ms per request of every method, interleaved run by run."""
    times: dict[str, list[float]] = {label: [] for label, _, _ in METHODS}
    engine.complete(text, method="greedy", cfg=DecodeConfig(k=1, max_new_tokens=1))  # cache it
    for _ in range(runs):
        for label, method, k in METHODS:
            if label.endswith("cold"):
                engine.runner.rewind(0)
            cfg = DecodeConfig(k=k, max_new_tokens=NEW_TOKENS, seed=0)
            start = time.perf_counter()
            engine.complete(text, method=method, cfg=cfg)
            times[label].append((time.perf_counter() - start) * 1e3)
    medians = {label: round(statistics.median(t), 1) for label, t in times.items()}
    greedy, k3 = medians["greedy"], medians["superposed k=3"]
    return {
        "median_ms": medians,
        "runs_ms": {label: [round(t, 1) for t in ts] for label, ts in times.items()},
        "ratios": {
            "superposed k=3 / greedy": round(k3 / greedy, 3),
            "nucleus-sequential k=3 / superposed k=3": round(
                medians["nucleus-sequential k=3"] / k3, 3
            ),
            "nucleus k=3 / superposed k=3": round(medians["nucleus k=3"] / k3, 3),
            "beam k=3 / superposed k=3": round(medians["beam k=3"] / k3, 3),
        },
        "load": load(),
    }


@torch.inference_mode()
def time_steps(runner: ModelRunner, ids: list[int], runs: int) -> dict[str, float]:
    """Median ms of one decode step (batch 1 and 3, 512+ positions) and of prefills."""
    out: dict[str, float] = {}
    for n in (15, 512, 1500):

        def prefill(n: int = n) -> None:
            runner.rewind(0)
            runner.prefill(ids[:n])

        out[f"prefill {n}"] = round(median_ms(prefill, 3, sync), 2)
    runner.rewind(0)
    runner.prefill(ids[:512])
    for batch in (1, 3):
        embeds = runner.embed(torch.tensor(ids[:batch])[:, None])  # [B, 1, H]

        times: list[float] = []

        def steps(batch: int = batch, embeds: torch.Tensor = embeds, times: list = times) -> None:
            runner.expand(batch)
            start = time.perf_counter()
            for _ in range(STEPS):
                runner.step(embeds)
            sync()
            times.append((time.perf_counter() - start) * 1e3 / STEPS)
            runner.rewind(512)

        for _ in range(runs + 1):
            steps()
        out[f"step batch {batch}, 512 positions"] = round(statistics.median(times[1:]), 2)
    runner.rewind(0)
    return out


def markdown(results: dict[str, Any]) -> str:
    """The tables of latency.md."""
    lines = [
        "# Latency (bench/latency.py)",
        "",
        "Measured on the machine each stamp names; **the CPU machine is a 2-core one shared with",
        "other jobs**: compare the ratios, taken side by side in one run (methods interleaved run",
        "by run), more than absolute times.",
        f"Milliseconds per request ({NEW_TOKENS} new tokens; the prompt is cached except in",
        '"greedy, cold"); medians. Load average (1/5/15 min) recorded at start and end.',
    ]
    for threads, part in results["threads"].items():
        per_runner = part["runners"]
        runners = list(per_runner)
        lines += ["", f"## {threads} thread(s)", ""]
        for stamp in part["stamps"]:
            lines.append(
                f"- {stamp_header(stamp)}: {stamp['model']}, medians of {stamp['runs']} runs, "
                f"{load_span(stamp)}."
            )
        for setting in [s for s in ("short", "long") if s in per_runner[runners[0]]]:
            tokens = results["prompt_tokens"][setting]
            at = {r: per_runner[r][setting] for r in runners}
            rows = [
                [label, *(f"{at[r]['median_ms'][label]:.0f}" for r in runners)]
                for label, _, _ in METHODS
            ]
            rows += [
                [f"*{name}*", *(f"{at[r]['ratios'][name]:.2f}x" for r in runners)]
                for name in at[runners[0]]["ratios"]
            ]
            rows.append(["*load after*", *(at[r]["load"][0] for r in runners)])
            lines += [
                "",
                f"### {setting}: {tokens}-token prompt, {threads} thread(s)",
                "",
                table(["method", *runners], rows),
            ]
        steps = [
            [name, *(f"{per_runner[r]['steps'][name]:.1f}" for r in runners)]
            for name in per_runner[runners[0]]["steps"]
        ]
        lines += [
            "",
            f"### decode steps and prefills alone, {threads} thread(s) (ms)",
            "",
            table(["", *runners], steps),
        ]
    return "\n".join(lines + targets(results)) + "\n"


def targets(results: dict[str, Any]) -> list[str]:
    """Issue 7's targets against the one-thread numbers of each fast runner measured."""
    one = results["threads"].get("1", {}).get("runners", {})
    rows = [
        (
            "decode step, batch 1, 512 positions (ms)",
            "<= 20 int4, <= 30 bf16",
            "steps",
            "step batch 1, 512 positions",
        ),
        ("superposed k=3, 15-token prefix (ms)", "<= 300", "short", "superposed k=3"),
        ("superposed k=3 / greedy, short", "<= 1.15x", "short", "superposed k=3 / greedy"),
        ("superposed k=3 / greedy, long", "<= 1.15x", "long", "superposed k=3 / greedy"),
        (
            "nucleus-sequential / superposed k=3, short",
            ">= 2.5x",
            "short",
            "nucleus-sequential k=3 / superposed k=3",
        ),
        ("batched nucleus / superposed k=3, long", "> 1x", "long", "nucleus k=3 / superposed k=3"),
    ]
    runners = [r for r in one if r.startswith("fast-")]
    if not runners:
        return []
    cells = []
    for label, wanted, part, key in rows:
        cells.append([label, wanted])
        for r in runners:
            data = one[r].get(part, {})
            value = data.get(key) if part == "steps" else data.get("ratios", {}).get(key)
            if value is None and part != "steps":
                value = data.get("median_ms", {}).get(key)
            cells[-1].append("-" if value is None else f"{value:.2f}")
    return [
        "",
        "## Issue 7's targets, 1 thread (fast runners; measured under load)",
        "",
        table(["target", "wanted", *runners], cells),
    ]


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="repetitions (medians)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--runners", nargs="+", default=DEFAULT_RUNNERS, choices=RUNNERS)
    parser.add_argument("--settings", nargs="+", default=["short", "long"], choices=SETTINGS)
    parser.add_argument("--out", type=Path, default=RESULTS / "latency")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="the default, or a model directory")
    parser.add_argument("--device", default="auto", help="auto (cuda > mps > cpu), cpu, cuda")
    parser.add_argument(
        "--merge", action="store_true", help="add these thread counts to the existing results"
    )
    return parser


def time_runners(
    loaded: Any, args: argparse.Namespace, texts: dict[str, str], long_ids: list[int]
) -> tuple[dict[str, Any], dict[str, int]]:
    """At the current thread count: each runner's requests per setting and its steps on the
    long prompt; and each setting's prompt tokens."""
    threads = torch.get_num_threads()
    per_runner: dict[str, Any] = {}
    prompt_tokens: dict[str, int] = {}
    for name in args.runners:
        engine = Engine(loaded, runner=make(loaded, name))
        per_runner[name] = {}
        for setting, text in texts.items():
            prompt_tokens[setting] = len(engine.prompt(text, NEW_TOKENS).ids)
            per_runner[name][setting] = time_requests(engine, text, args.runs)
            print(threads, name, setting, per_runner[name][setting]["median_ms"], flush=True)
        per_runner[name]["steps"] = time_steps(engine.runner, long_ids, args.runs)
        print(threads, name, per_runner[name]["steps"], load(), flush=True)
        del engine
    return per_runner, prompt_tokens


def runners_main(args: argparse.Namespace) -> None:
    """The runners side by side at each thread count; results saved after each count (a
    partial run still counts), ``--merge`` adds counts to the saved ones."""
    json_path = args.out.with_suffix(".json")
    results: dict[str, Any] = {"prompt_tokens": {}, "threads": {}}
    if args.merge and json_path.is_file():
        results = json.loads(json_path.read_text())
    loaded = load_model(args.model, args.device)
    texts = {name: code_context(loaded.tokenizer, SETTINGS[name]) for name in args.settings}
    long_ids = loaded.tokenizer.encode(
        code_context(loaded.tokenizer, SETTINGS["long"]), add_special_tokens=False
    )
    for threads in args.threads:
        started = time.perf_counter()
        stamp = Stamp(model=model_label(args.model, loaded.device))
        torch.set_num_threads(threads)
        per_runner, prompt_tokens = time_runners(loaded, args, texts, long_ids)
        results["prompt_tokens"].update(prompt_tokens)
        done = {**stamp.finish(started), "torch_threads": threads, "runs": args.runs}
        done["settings"] = args.settings
        part = results["threads"].setdefault(str(threads), {"runners": {}, "stamps": []})
        for name, data in per_runner.items():  # merge: settings measured now replace old ones
            part["runners"].setdefault(name, {}).update(data)
        part["stamps"].append(done)
        torch.set_num_threads(1)
        write_json(json_path, results)
        args.out.with_suffix(".md").write_text(markdown(results))
    print(markdown(results))


def main(argv: list[str] | None = None) -> None:
    runners_main(parser().parse_args(argv))


if __name__ == "__main__":
    main()
