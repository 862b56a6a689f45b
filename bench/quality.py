"""Protocol 1: next-line completion on held-out standard-library packages.

The cursor sits after the indentation of a line of a held-out file; every method gets the
same prompt (the last ``--prompt-tokens`` tokens before the cursor) and returns single-line
drafts of at most 10 tokens. alpha and tau are tuned on the validation packages (never on
test), then the methods, the healing ablation and the k / orders ablations run on test.

    python -m bench.quality --quick     # fixed small subsets, minutes
    python -m bench.quality             # full sizes (>= 1,000 positions), hours on 2 cores
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import (
    Spec,
    build_store,
    load_engine,
    main_specs,
    run_spec,
    warm_cache,
)
from bench.measure import RESULTS, Stamp, progress, write_json
from bench.metrics import bootstrap_ci, line_metrics, paired_diff_ci
from bench.pipeline import Benchmark, run, save, size_of
from bench.split import LineTask, library_files, read_text, sample_tasks, stdlib_root
from superposed.ngram import DEFAULT_LAMBDAS

METRICS = ("em1", "emk", "es1", "esk", "cs1", "csk", "empty", "empty_any")
SIZES = {
    # test positions, validation positions, ablation positions, alpha grid, tau grid
    "quick": (12, 6, 4, (0.3, 0.54, 0.8), (0.06,)),
    "medium": (120, 30, 30, (0.2, 0.54, 0.8), (0.06, 0.3)),
    "full": (1000, 200, 300, (0.0, 0.2, 0.4, 0.54, 0.7, 0.85), (0.03, 0.06, 0.2, 0.5)),
}
K_SWEEP = (1, 2, 3, 5, 8)


def orders_2to4() -> dict[int, float]:
    """Orders 2..4 with the paper's weights, rescaled to the same total weight as 2..6."""
    low = {n: w for n, w in DEFAULT_LAMBDAS.items() if n <= 4}
    scale = sum(DEFAULT_LAMBDAS.values()) / sum(low.values())
    return {n: w * scale for n, w in low.items()}


def evaluate(
    engine: Any,
    specs: Sequence[Spec],
    tasks: Sequence[LineTask],
    sources: dict[str, Any],
    label: str,
    prompt_tokens: int,
    keep_drafts: bool = False,
) -> dict[str, list[dict[str, Any]]]:
    """Per spec, per task: the metrics of its drafts (and the drafts if asked)."""
    rows: dict[str, list[dict[str, Any]]] = {s.name: [] for s in specs}
    with progress(label, len(tasks) * len(specs)) as bar:
        for task in tasks:
            warm_cache(engine, task.prompt, 10, prompt_tokens)
            for spec in specs:
                run = run_spec(engine, spec, task.prompt, sources, max_prompt_tokens=prompt_tokens)
                row: dict[str, Any] = line_metrics(run.drafts, task.target)
                row.update(ms=run.total_ms, lookup_ms=run.lookup_ms)
                if keep_drafts:
                    row["drafts"] = run.drafts
                rows[spec.name].append(row)
                bar.update(1)
    return rows


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Bootstrap CIs of every metric, and timing medians."""
    out: dict[str, Any] = {m: bootstrap_ci([r[m] for r in rows]) for m in METRICS}
    ms = np.array([r["ms"] for r in rows])
    lookup = np.array([r["lookup_ms"] for r in rows])
    out["ms_median"] = float(np.median(ms)) if len(ms) else float("nan")
    out["ms_p90"] = float(np.percentile(ms, 90)) if len(ms) else float("nan")
    out["lookup_share"] = float(lookup.sum() / ms.sum()) if ms.sum() > 0 else 0.0
    return out


def tune(
    engine: Any,
    tasks: Sequence[LineTask],
    sources: dict[str, Any],
    alphas: Sequence[float],
    taus: Sequence[float],
    prompt_tokens: int,
) -> dict[str, Any]:
    """Grid over alpha x tau on validation tasks; the best by mean edit similarity@3."""
    specs = [
        Spec(f"alpha={a} tau={t}", "superposed", 3, a, t, "codebase" if a > 0 else None)
        for a in alphas
        for t in taus
    ]
    rows = evaluate(engine, specs, tasks, sources, "tune (validation)", prompt_tokens)
    grid = []
    for spec in specs:
        s = summarize(rows[spec.name])
        grid.append({"alpha": spec.alpha, "tau": spec.temperature, **s})
    best = max(grid, key=lambda g: (g["esk"]["mean"], g["emk"]["mean"]))
    return {"grid": grid, "alpha": best["alpha"], "tau": best["tau"], "n": len(tasks)}


def comparisons(rows: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Paired bootstrap intervals of the differences the hypotheses are about."""
    names = list(rows)
    main, no_ngram, greedy = names[0], names[1], names[2]
    pairs = [
        (main, "emk", greedy, "em1"),
        (main, "emk", no_ngram, "emk"),
        (main, "esk", greedy, "es1"),
        (main, "esk", no_ngram, "esk"),
    ]
    pairs += [(main, "emk", other, "emk") for other in names[3:5]]
    out = []
    for a, ma, b, mb in pairs:
        diff = paired_diff_ci([r[ma] for r in rows[a]], [r[mb] for r in rows[b]])
        out.append({"a": a, "metric_a": ma, "b": b, "metric_b": mb, **diff})
    return out


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--val", type=int, help="validation positions for tuning")
    parser.add_argument("--ablate", type=int, help="test positions of the ablations")
    parser.add_argument("--tuning", type=Path, help="reuse this quality-tuning.json")
    parser.add_argument("--prompt-tokens", type=int, default=512)


BENCH = Benchmark("quality", __doc__.splitlines()[0], SIZES, options)


def stdlib_sources(engine: Any) -> tuple[Path, dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The stdlib's root, its split, the texts of each part, and the training store (all
    orders, and orders 2..4 for the ablation) with its stats."""
    root = stdlib_root()
    parts = library_files(root)
    texts = {p: {str(f): read_text(root / f) for f in files} for p, files in parts.items()}
    store, store_stats = build_store("stdlib-train", engine.tokenizer, list(texts["train"].items()))
    sources: dict[str, Any] = {"codebase": store, "codebase-2to4": store.source(orders_2to4())}
    print(f"store: {store_stats['files']} files, {store_stats['tokens']} tokens")
    return root, parts, texts, {"sources": sources, "stats": store_stats}


def tuning_of(args: argparse.Namespace, engine: Any, texts: Any, sources: Any) -> dict[str, Any]:
    """alpha and tau tuned on validation positions, or an earlier tuning reused (``--tuning``)."""
    if args.tuning is not None:  # the same split and grid as before
        tuning: dict[str, Any] = json.loads(args.tuning.read_text())
    else:
        _, n_val, _, alphas, taus = SIZES[size_of(args)]
        val_tasks = sample_tasks(texts["validation"], args.val or n_val, args.seed)
        tuning = tune(engine, val_tasks, sources, alphas, taus, args.prompt_tokens)
        tuned_path = RESULTS / f"quality-tuning{'-quick' if args.quick else ''}.json"
        write_json(tuned_path, {**tuning, "size": size_of(args)})
    print(
        f"tuned on {tuning['n']} validation positions: alpha={tuning['alpha']} tau={tuning['tau']}"
    )
    return tuning


def methods_phase(results: dict[str, Any], rows: dict[str, Any], tasks: Sequence[LineTask]) -> None:
    """The main methods on every test position, their drafts kept."""
    results["methods"] = {name: summarize(r) for name, r in rows.items()}
    results["comparisons"] = comparisons(rows)
    results["items"] = {
        "tasks": [{"source": t.source, "line": t.line, "target": t.target} for t in tasks],
        "rows": rows,
    }


def healing_phase(run_: Any, results: dict[str, Any], specs: Sequence[Spec], rows: Any) -> None:
    """The store method and greedy again without prompt healing, paired with the main runs."""
    heal_specs = [replace(s, name=f"{s.name}, no healing", heal=False) for s in specs[:3:2]]
    heal_rows = run_(heal_specs, "no healing")
    results["specs"] += [asdict(s) for s in heal_specs]
    results["healing"] = {name: summarize(r) for name, r in heal_rows.items()}
    results["healing_comparisons"] = [
        {
            "a": s.name,
            "b": h.name,
            "metric": m,
            **paired_diff_ci([r[m] for r in rows[s.name]], [r[m] for r in heal_rows[h.name]]),
        }
        for s, h in zip(specs[:3:2], heal_specs, strict=True)
        for m in ("emk", "empty")
    ]


def ablation_specs(best: Spec) -> list[Spec]:
    """The k sweep with and without the store, and the store at orders 2..4."""
    k_specs = [replace(best, name=f"superposed k={k} + store", k=k) for k in K_SWEEP if k != 3]
    k_specs += [
        replace(best, name=f"superposed k={k}, alpha=0", k=k, alpha=0.0, store=None)
        for k in K_SWEEP
        if k != 3
    ]
    k_specs.append(replace(best, name="superposed k=3 + store, orders 2..4", store="codebase-2to4"))
    return k_specs


def ablation_phase(
    run_: Any, results: dict[str, Any], specs: Sequence[Spec], rows: Any, n: int
) -> None:
    """The ablations on the first ``n`` test positions (the k=3 rows are the main runs')."""
    k_specs = ablation_specs(specs[0])
    ablation_rows = run_(k_specs, "ablations", n)
    for spec in specs[:2]:
        ablation_rows[spec.name] = rows[spec.name][:n]
    results["specs"] += [asdict(s) for s in k_specs]
    results["ablations"] = {name: summarize(r) for name, r in ablation_rows.items()}
    results["n_ablation"] = n


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    started = time.perf_counter()
    n_test, _, n_ablate, _, _ = SIZES[size_of(args)]
    engine, stamp = load_engine(args)
    root, parts, texts, store = stdlib_sources(engine)
    sources = store["sources"]
    tuning = tuning_of(args, engine, texts, sources)
    tasks = sample_tasks(texts["test"], args.n or n_test, args.seed)
    specs = main_specs(3, tuning["alpha"], tuning["tau"])
    results = header(args, engine, root, parts, store["stats"], tuning, specs, tasks)

    def run_(specs_: Sequence[Spec], label: str, n: int | None = None, keep: bool = False) -> Any:
        return evaluate(engine, specs_, tasks[:n], sources, label, args.prompt_tokens, keep)

    def checkpoint() -> None:  # a run stopped between phases still counts
        save(results, stamp, started, BENCH.output(args))

    rows = run_(specs, "methods", keep=True)
    methods_phase(results, rows, tasks)
    checkpoint()
    print("\n".join(report(results)))
    healing_phase(run_, results, specs, rows)
    checkpoint()
    ablation_phase(run_, results, specs, rows, min(args.ablate or n_ablate, len(tasks)))
    return results, stamp


def header(
    args: argparse.Namespace,
    engine: Any,
    root: Path,
    parts: dict[str, Any],
    store_stats: dict[str, Any],
    tuning: dict[str, Any],
    specs: Sequence[Spec],
    tasks: Sequence[LineTask],
) -> dict[str, Any]:
    """What the run is: its protocol, split, store, tuning, specs and positions."""
    return {
        "protocol": "next-line completion, CPython stdlib held-out packages",
        "size": size_of(args),
        "stdlib": str(root),
        "split": {p: len(f) for p, f in parts.items()},
        "test_units": sorted({f.parts[0] for f in parts["test"]}),
        "validation_units": sorted({f.parts[0] for f in parts["validation"]}),
        "store": store_stats,
        "prompt_tokens": args.prompt_tokens,
        "max_new_tokens": 10,
        "tuning": tuning,
        "specs": [asdict(s) for s in specs],
        "n_test": len(tasks),
        "positions_per_unit": dict(Counter(Path(t.source).parts[0] for t in tasks).most_common()),
        "target_tokens": [
            len(engine.tokenizer.encode(t.target, add_special_tokens=False)) for t in tasks
        ],
        "healing": {},
        "healing_comparisons": [],
        "ablations": {},
        "n_ablation": 0,
    }


def report(results: dict[str, Any]) -> list[str]:
    return [
        f"{name:32s} EM@1 {m['em1']['mean']:.3f} EM@k {m['emk']['mean']:.3f} "
        f"ES@k {m['esk']['mean']:.3f} median {m['ms_median']:.0f} ms"
        for name, m in results["methods"].items()
    ]


def main(argv: list[str] | None = None) -> None:
    run(BENCH, measure, lambda results: [], argv)


if __name__ == "__main__":
    main()
