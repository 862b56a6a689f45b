"""Fidelity of the fast runner at each precision against the reference transformers runner.

Issue 7's quality guard at scale: on next-line positions of the held-out standard-library
packages (the quality benchmark's test split; the last ``--prompt-tokens`` tokens before the
cursor, no healing, so both runners read the same ids), for each precision:

- agreement: teacher-forced greedy, both runners read the reference's greedy tokens and each
  of the ``--new-tokens`` positions compares their argmax (the target: >= 95%);
- perplexity change: the reference model's perplexity of the fast runner's own drafts
  against that of the reference runner's drafts, over all draft tokens (the target: < 2%),
  for greedy drafts and for the product's superposed k=3 drafts (no n-gram store), with a
  bootstrap interval over positions of the per-position NLL difference.

    python -m bench.fidelity --n 64            # about 10 minutes on one thread
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import Any

import torch

from bench.common import fast_runner
from bench.measure import Stamp
from bench.metrics import bootstrap_ci
from bench.pipeline import Benchmark, run, size_of
from bench.split import library_files, read_text, sample_tasks, stdlib_root
from bench.tables import stamp_header, table
from superposed.api import Engine
from superposed.options import PRECISIONS
from superposed.prompt import Prompt
from superposed.request import DecodeRequest
from superposed.runner import HFRunner, ModelRunner
from superposed.superposed import superposed_decode
from superposed.types import DecodeConfig

SIZES = {"quick": 12, "medium": 64, "full": 200}
# The fast runner at each precision, and int4 through its compiled step (what a server serves).
VARIANTS = [*PRECISIONS, "int4-compiled"]


def greedy(
    runner: ModelRunner, prompt: list[int], n: int, forced: list[int] | None = None
) -> list[int]:
    """The argmax at each of ``n`` positions after ``prompt``; the next input is ``forced``'s
    token when given (teacher forcing), else the argmax (free-running greedy)."""
    logits = runner.prefill(prompt)[None]  # [1, V]
    argmaxes: list[int] = []
    for i in range(n):
        argmaxes.append(int(logits.argmax(-1)))
        token = argmaxes[-1] if forced is None else forced[i]
        if i < n - 1:
            logits = runner.step(runner.embed(torch.tensor([[token]])))
    runner.rewind(0)
    return argmaxes


def nll(model: Any, prompt: Sequence[int], continuation: Sequence[int]) -> float:
    """The reference model's negative log-likelihood (nats) of ``continuation`` after ``prompt``."""
    if not continuation:
        return 0.0
    ids = torch.tensor([[*prompt, *continuation]])
    with torch.inference_mode():
        logp = model(ids).logits[0, len(prompt) - 1 : -1].float().log_softmax(-1)  # [N, V]
    return -float(logp.gather(-1, torch.tensor(continuation)[:, None]).sum())


def superposed(runner: ModelRunner, engine: Engine, prompt: list[int], n: int) -> list[list[int]]:
    """The product's k=3 drafts (token ids) after ``prompt``, no n-gram store."""
    cfg = DecodeConfig(k=3, max_new_tokens=n)
    drafts = superposed_decode(DecodeRequest(runner, engine.vocab, Prompt(ids=prompt), cfg))
    runner.rewind(0)
    return [d.token_ids for d in drafts]


def perplexity_change(
    nll_fast: list[float], nll_ref: list[float], tokens: list[int]
) -> dict[str, Any]:
    """exp(mean NLL per token, fast) / exp(same, reference) - 1, with a bootstrap interval
    over positions of the per-token NLL difference (mapped through exp - 1)."""
    per_token = [(f - r) / max(t, 1) for f, r, t in zip(nll_fast, nll_ref, tokens, strict=True)]
    ci = bootstrap_ci(per_token)
    change = math.exp((sum(nll_fast) - sum(nll_ref)) / max(sum(tokens), 1)) - 1
    return {
        "change": change,
        "per_position_mean": math.exp(ci["mean"]) - 1,
        "lo": math.exp(ci["lo"]) - 1,
        "hi": math.exp(ci["hi"]) - 1,
        "n": ci["n"],
    }


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--precisions", nargs="+", default=VARIANTS, choices=VARIANTS)


def reference_drafts(engine: Any, prompts: list[list[int]], n: int) -> dict[str, Any]:
    """The reference runner's greedy and superposed drafts, and the model's NLL of each."""
    model = engine.loaded.model
    reference = HFRunner(model)
    with torch.inference_mode():
        greedy_ = [greedy(reference, p, n) for p in prompts]
        super_ = [superposed(reference, engine, p, n) for p in prompts]
        return {
            "greedy": greedy_,
            "superposed": super_,
            "greedy_nll": [nll(model, p, g) for p, g in zip(prompts, greedy_, strict=True)],
            "superposed_nll": [
                sum(nll(model, p, d) for d in drafts)
                for p, drafts in zip(prompts, super_, strict=True)
            ],
        }


def precision_fidelity(
    engine: Any, precision: str, prompts: list[list[int]], n: int, ref: dict[str, Any]
) -> dict[str, Any]:
    """One precision's agreement with the reference and the perplexity change of its drafts."""
    model = engine.loaded.model
    fast = fast_runner(engine.loaded, precision)
    with torch.inference_mode():
        forced = [greedy(fast, p, n, r) for p, r in zip(prompts, ref["greedy"], strict=True)]
        free = [greedy(fast, p, n) for p in prompts]
        drafts = [superposed(fast, engine, p, n) for p in prompts]
        free_nll = [nll(model, p, g) for p, g in zip(prompts, free, strict=True)]
        super_nll = [
            sum(nll(model, p, d) for d in ds) for p, ds in zip(prompts, drafts, strict=True)
        ]
    pairs = [
        ab for f, r in zip(forced, ref["greedy"], strict=True) for ab in zip(f, r, strict=True)
    ]
    lengths = [
        max(sum(map(len, ds)), sum(map(len, rs)))
        for ds, rs in zip(drafts, ref["superposed"], strict=True)
    ]
    return {
        "agreement": sum(a == b for a, b in pairs) / len(pairs),
        "greedy_drafts_identical": sum(f == r for f, r in zip(free, ref["greedy"], strict=True))
        / len(prompts),
        "greedy_perplexity": perplexity_change(free_nll, ref["greedy_nll"], [n] * len(prompts)),
        "superposed_perplexity": perplexity_change(super_nll, ref["superposed_nll"], lengths),
    }


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    torch.set_num_threads(args.threads)
    engine = Engine.load(threads=args.threads, runner="hf")
    stamp = Stamp(model=engine.name, runner="hf (reference) against fast at each precision")
    root = stdlib_root()
    test = {str(f): read_text(root / f) for f in library_files(root)["test"]}
    tasks = sample_tasks(test, args.n or SIZES[size_of(args)], args.seed)
    n, limit = args.new_tokens, args.prompt_tokens
    prompts = [engine.prompt(t.prompt, n, heal=False, max_prompt_tokens=limit).ids for t in tasks]
    ref = reference_drafts(engine, prompts, n)
    results: dict[str, Any] = {
        "protocol": "stdlib held-out next-line positions; reference = transformers runner, fp32",
        "size": size_of(args),
        "positions": len(prompts),
        "new_tokens": n,
        "prompt_tokens": args.prompt_tokens,
        "precisions": {},
    }
    for precision in args.precisions:
        results["precisions"][precision] = precision_fidelity(engine, precision, prompts, n, ref)
        print(precision, results["precisions"][precision], flush=True)
    return results, stamp


def main(argv: list[str] | None = None) -> None:
    run(BENCH, measure, lambda results: [markdown(results)], argv)


def markdown(results: dict[str, Any]) -> str:
    """The fidelity table (embedded in docs/benchmarks.md by bench/report.py)."""

    def change(c: dict[str, Any]) -> str:
        return f"{100 * c['change']:+.1f}% [{100 * c['lo']:+.1f}, {100 * c['hi']:+.1f}]"

    s = results["stamp"]
    lines = [
        "# Fast runner fidelity (bench/fidelity.py)",
        "",
        f"{stamp_header(s)}. "
        f"{results['positions']} next-line positions of the held-out standard-library packages, "
        f"{results['prompt_tokens']}-token prompts, {results['new_tokens']} new tokens; the "
        "reference is the transformers runner in fp32. Agreement: teacher-forced greedy "
        "argmax equal to the reference's (target >= 95%). Perplexity change: the reference "
        "model's perplexity of this runner's drafts against that of the reference runner's "
        "drafts (target < 2%), with a 95% bootstrap interval over positions.",
        "",
        table(
            ["precision", "agreement", "greedy drafts identical"]
            + ["perplexity change, greedy drafts", "perplexity change, superposed k=3 drafts"],
            [
                [precision, f"{100 * r['agreement']:.1f}%"]
                + [f"{100 * r['greedy_drafts_identical']:.0f}%", change(r["greedy_perplexity"])]
                + [change(r["superposed_perplexity"])]
                for precision, r in results["precisions"].items()
            ],
            align="lrrrr",
        ),
    ]
    return "\n".join(lines) + "\n"


BENCH = Benchmark("fidelity", __doc__.splitlines()[0], SIZES, options, markdown)


if __name__ == "__main__":
    main()
