"""Protocol 3: the paper's coherence protocol on code.

15-token prefixes drawn from the held-out standard-library packages, 10-token drafts (no
stop at the end of a line, no healing: the prefix ends on a token boundary). Per draft:
its perplexity under the model itself (one forward of prefix + draft, no cache), and the
share of unique 1/2/3-grams of its tokens (1 = no repetition); per prompt: the best draft's
perplexity and Self-BLEU across the k drafts (high = the drafts are alike).

    python -m bench.coherence --quick
"""

from __future__ import annotations

import argparse
import math
import random
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

import numpy as np
import torch

from bench.common import build_store, load_engine, main_specs, run_spec, warm_cache
from bench.humaneval import tuned
from bench.measure import Stamp, progress
from bench.metrics import compare_first, distinct_ratio, self_bleu, summarize
from bench.pipeline import Benchmark, run, size_of
from bench.split import library_files, read_text, stdlib_root
from bench.tables import method_lines

SIZES = {"quick": 8, "medium": 40, "full": 500}
PREFIX_TOKENS = 15
DRAFT_TOKENS = 10


def sample_prefixes(token_files: Sequence[Sequence[int]], n: int, seed: int = 0) -> list[list[int]]:
    """n prefixes of PREFIX_TOKENS tokens, each followed by at least DRAFT_TOKENS more tokens;
    files drawn in proportion to their length, fixed seed."""
    rng = random.Random(seed)
    usable = [f for f in token_files if len(f) >= PREFIX_TOKENS + DRAFT_TOKENS]
    weights = [len(f) for f in usable]
    out = []
    for f in rng.choices(usable, weights=weights, k=n):
        start = rng.randrange(0, len(f) - PREFIX_TOKENS - DRAFT_TOKENS + 1)
        out.append(list(f[start : start + PREFIX_TOKENS]))
    return out


@torch.inference_mode()
def perplexity(model: Any, prefix: Sequence[int], draft: Sequence[int]) -> float:
    """exp(mean negative log-likelihood of the draft's tokens after the prefix); nan if empty."""
    if not draft:
        return float("nan")
    ids = torch.tensor([list(prefix) + list(draft)])  # [1, P + D]
    logits = model(input_ids=ids).logits[0, :-1].float()  # [P + D - 1, V]
    logp = torch.log_softmax(logits, dim=-1)
    targets = ids[0, 1:]  # [P + D - 1]
    nll = -logp.gather(1, targets[:, None])[:, 0][len(prefix) - 1 :]  # [D]
    return math.exp(float(nll.mean()))


METRICS = (
    "ppl_mean",
    "ppl_best",
    "log_ppl_mean",
    "self_bleu",
    "distinct1",
    "distinct2",
    "distinct3",
)


def draft_row(model: Any, prompt_ids: Sequence[int], run: Any) -> dict[str, float]:
    """One prompt's metrics for one method: its drafts' perplexities and repetition."""
    ppl = [perplexity(model, prompt_ids, t) for t in run.token_ids]
    finite = [p for p in ppl if not math.isnan(p)]
    nan = float("nan")
    return {
        "ppl_mean": float(np.mean(finite)) if finite else nan,
        "ppl_best": min(finite) if finite else nan,
        "log_ppl_mean": float(np.mean(np.log(finite))) if finite else nan,
        "self_bleu": self_bleu(run.drafts) if len(run.drafts) > 1 else nan,
        **{
            f"distinct{n}": float(
                np.nanmean([distinct_ratio(t, n) for t in run.token_ids] or [np.nan])
            )
            for n in (1, 2, 3)
        },
        "ms": run.total_ms,
    }


def draft_rows(
    engine: Any, specs: Sequence[Any], prefixes: Sequence[Sequence[int]], sources: Any
) -> dict[str, list[dict[str, float]]]:
    """Every method's row on every prefix (the prefix's cache warmed first)."""
    tok = engine.tokenizer
    rows: dict[str, list[dict[str, float]]] = {s.name: [] for s in specs}
    with progress("coherence", len(prefixes) * len(specs)) as bar:
        for prefix in prefixes:
            text = tok.decode(prefix)
            warm_cache(engine, text, DRAFT_TOKENS, None)
            prompt_ids = engine.prompt(text, DRAFT_TOKENS, heal=False).ids
            for spec in specs:
                run = run_spec(
                    engine, spec, text, sources, DRAFT_TOKENS, False, max_prompt_tokens=None
                )
                rows[spec.name].append(draft_row(engine.loaded.model, prompt_ids, run))
                bar.update(1)
    return rows


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    engine, stamp = load_engine(args)
    tok = engine.tokenizer
    root = stdlib_root()
    parts = library_files(root)
    train = [(str(f), read_text(root / f)) for f in parts["train"]]
    store, store_stats = build_store("stdlib-train", tok, train)
    test_ids = [tok.encode(read_text(root / f), add_special_tokens=False) for f in parts["test"]]
    prefixes = sample_prefixes(test_ids, args.n or SIZES[size_of(args)], args.seed)
    alpha, tau, tuning_from = tuned(args.quick)
    specs = [replace(s, heal=False) for s in main_specs(3, alpha, tau)]
    rows = draft_rows(engine, specs, prefixes, {"codebase": store})
    methods = summarize(rows, METRICS)
    for name, r_ in rows.items():
        methods[name]["ppl_best_median"] = float(np.nanmedian([r["ppl_best"] for r in r_]))
    results: dict[str, Any] = {
        "protocol": "coherence: 15-token prefixes from held-out stdlib packages, 10-token drafts",
        "size": size_of(args),
        "n": len(prefixes),
        "alpha": alpha,
        "tau": tau,
        "tuning_from": tuning_from,
        "store": store_stats,
        "specs": [asdict(s) for s in specs],
        "methods": methods,
        "comparisons": compare_first(rows, "ppl_best"),
        "items": {"prefixes": prefixes, "rows": rows},
    }
    return results, stamp


def report(results: dict[str, Any]) -> list[str]:
    return method_lines(
        results["methods"],
        {"best-of-k ppl": "ppl_best", "mean ppl": "ppl_mean", "self-BLEU": "self_bleu"},
    )


BENCH = Benchmark("coherence", __doc__.splitlines()[0], SIZES)


def main(argv: list[str] | None = None) -> None:
    run(BENCH, measure, report, argv)


if __name__ == "__main__":
    main()
