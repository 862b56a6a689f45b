"""Protocol 2: HumanEval single-line infilling, left to right, checked by execution.

The prompt is the code before the removed line and the line's indentation (the engine sees
no code after the cursor). A draft passes when ``prompt + line + suffix + test +
check(entry_point)`` exits 0 in a fresh interpreter within the time limit. The n-gram store
holds the standard library's training split plus the MBPP reference solutions.

    python -m bench.humaneval --quick
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.common import (
    build_store,
    load_engine,
    main_specs,
    run_spec,
    store_dir,
    warm_cache,
)
from bench.measure import DATA, RESULTS, Stamp, progress
from bench.metrics import compare_first, line_metrics, summarize
from bench.pipeline import Benchmark, run, size_of
from bench.split import LineTask, library_files, read_text, stdlib_root
from bench.tables import method_lines

SIZES = {"quick": 8, "medium": 60, "full": 1033}
TIMEOUT_S = 10.0


def load_items(path: Path = DATA / "HumanEval-SingleLineInfilling.jsonl.gz") -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def task_of(item: dict[str, Any]) -> LineTask:
    """The cursor after the removed line's indentation."""
    line = item["canonical_solution"].rstrip("\n")
    target = line.strip()
    indent = line[: len(line) - len(line.lstrip())]
    return LineTask(item["task_id"], 0, item["prompt"] + indent, target)


def program(item: dict[str, Any], task: LineTask, draft: str) -> str:
    """The whole test program with ``draft`` as the missing line."""
    return (
        f"{task.prompt}{draft.rstrip()}\n{item['suffix']}\n{item['test']}\n"
        f"check({item['entry_point']})\n"
    )


def passes(source: str, timeout: float = TIMEOUT_S) -> bool:
    """Does the program exit 0 in a fresh, isolated interpreter within ``timeout`` seconds?"""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "candidate.py"
        path.write_text(source, encoding="utf-8")
        try:
            done = subprocess.run(
                [sys.executable, "-I", str(path)], cwd=tmp, capture_output=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0


def run_all(sources: Sequence[str], workers: int = 2) -> dict[str, bool]:
    """Execute each distinct program once."""
    unique = list(dict.fromkeys(sources))
    with ThreadPoolExecutor(workers) as pool:
        return dict(zip(unique, pool.map(passes, unique), strict=True))


def tuned(quick: bool) -> tuple[float, float, str]:
    """alpha and tau as tuned on the validation split by bench.quality (else the paper's)."""
    path = RESULTS / ("quality-tuning-quick.json" if quick else "quality-tuning.json")
    if path.exists():
        t = json.loads(path.read_text())
        return float(t["alpha"]), float(t["tau"]), f"{path.name} (validation split, n={t['n']})"
    return 0.54, 0.06, "paper defaults (no tuning file found)"


def humaneval_store(engine: Any) -> tuple[Any, dict[str, Any]]:
    """The stdlib training split plus MBPP's reference solutions (built on the stdlib store)."""
    root = stdlib_root()
    train = [(str(f), read_text(root / f)) for f in library_files(root)["train"]]
    build_store("stdlib-train", engine.tokenizer, train)[0].close()
    with open(DATA / "mbpp.jsonl", encoding="utf-8") as f:
        mbpp = [json.loads(line) for line in f if line.strip()]
    extra = [(f"mbpp/{m['task_id']}.py", m["code"]) for m in mbpp]
    return build_store(
        "stdlib-train-mbpp", engine.tokenizer, train + extra, base=store_dir() / "stdlib-train.db"
    )


def all_drafts(
    engine: Any, specs: Sequence[Any], tasks: Sequence[LineTask], sources: Any, prompt_tokens: int
) -> tuple[dict[str, list[list[str]]], dict[str, list[float]]]:
    """Every method's drafts and milliseconds on every task."""
    drafts: dict[str, list[list[str]]] = {s.name: [] for s in specs}
    times: dict[str, list[float]] = {s.name: [] for s in specs}
    with progress("humaneval", len(tasks) * len(specs)) as bar:
        for task in tasks:
            warm_cache(engine, task.prompt, 10, prompt_tokens)
            for spec in specs:
                run = run_spec(engine, spec, task.prompt, sources, max_prompt_tokens=prompt_tokens)
                drafts[spec.name].append(run.drafts)
                times[spec.name].append(run.total_ms)
                bar.update(1)
    return drafts, times


def scored_rows(
    items: Sequence[dict[str, Any]], tasks: Sequence[LineTask], drafts: dict[str, list[list[str]]]
) -> tuple[dict[str, list[dict[str, float]]], float]:
    """Each method's line metrics and pass@1/pass@k on each task (every program run once), and
    the share of canonical solutions that pass (the harness's own check)."""
    canonical = [program(i, t, t.target) for i, t in zip(items, tasks, strict=True)]
    candidates = [
        program(i, t, d)
        for name in drafts
        for i, t, ds in zip(items, tasks, drafts[name], strict=True)
        for d in ds
    ]
    verdict = run_all(canonical + candidates)
    rows: dict[str, list[dict[str, float]]] = {}
    for name, per_item in drafts.items():
        rows[name] = []
        for i, t, ds in zip(items, tasks, per_item, strict=True):
            ok = [verdict[program(i, t, d)] for d in ds]
            row = line_metrics(ds, t.target)
            row.update(pass1=float(bool(ok[:1] and ok[0])), passk=float(any(ok)))
            rows[name].append(row)
    return rows, sum(verdict[c] for c in canonical) / len(canonical)


METRICS = ("em1", "emk", "pass1", "passk", "esk", "empty")


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    engine, stamp = load_engine(args)
    store, store_stats = humaneval_store(engine)
    items = load_items()
    random.Random(args.seed).shuffle(items)
    items = items[: args.n or SIZES[size_of(args)]]
    tasks = [task_of(i) for i in items]
    alpha, tau, tuning_from = tuned(args.quick)
    specs = main_specs(3, alpha, tau)
    drafts, times = all_drafts(engine, specs, tasks, {"codebase": store}, args.prompt_tokens)
    rows, canonical_pass = scored_rows(items, tasks, drafts)
    results = {
        "protocol": "HumanEval single-line infilling (left to right), pass by execution",
        "size": size_of(args),
        "n": len(tasks),
        "alpha": alpha,
        "tau": tau,
        "tuning_from": tuning_from,
        "store": store_stats,
        "prompt_tokens": args.prompt_tokens,
        "timeout_s": TIMEOUT_S,
        "canonical_pass": canonical_pass,
        "specs": [asdict(s) for s in specs],
        "methods": summarize(rows, METRICS),
        "comparisons": compare_first(rows, "passk", greedy_pass1),
        "items": {"task_ids": [t.source for t in tasks], "drafts": drafts, "ms": times},
    }
    return results, stamp


def greedy_pass1(name: str) -> str:
    """Greedy has one draft: the first method's pass@k is compared with its pass@1."""
    return "pass1" if name == "greedy" else "passk"


def report(results: dict[str, Any]) -> list[str]:
    columns = {"EM@k": "emk", "pass@1": "pass1", "pass@k": "passk"}
    return method_lines(results["methods"], columns)


def prompt_tokens_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prompt-tokens", type=int, default=512)


BENCH = Benchmark("humaneval", __doc__.splitlines()[0], SIZES, prompt_tokens_option)


def main(argv: list[str] | None = None) -> None:
    run(BENCH, measure, report, argv)


if __name__ == "__main__":
    main()
