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

import math
import time
from collections.abc import Sequence
from typing import Any

import torch

from bench.common import fast_runner, run_parser
from bench.measure import RESULTS, Stamp, write_json
from bench.metrics import bootstrap_ci
from bench.split import library_files, read_text, sample_tasks, stdlib_root
from bench.tables import table
from superposed.api import Engine
from superposed.fast_runner import PRECISIONS
from superposed.prompt import Prompt
from superposed.runner import HFRunner, ModelRunner
from superposed.superposed import superposed_decode
from superposed.types import DecodeConfig, DecodeRequest

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


def main(argv: list[str] | None = None) -> None:
    parser = run_parser(__doc__.splitlines()[0], SIZES)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--precisions", nargs="+", default=VARIANTS, choices=VARIANTS)
    args = parser.parse_args(argv)
    size = "quick" if args.quick else args.size
    n_tasks = args.n or SIZES[size]
    started = time.perf_counter()
    torch.set_num_threads(args.threads)
    engine = Engine.load(threads=args.threads, runner="hf")
    stamp = Stamp(model=engine.name, runner="hf (reference) against fast at each precision")
    model = engine.loaded.model
    root = stdlib_root()
    test = {str(f): read_text(root / f) for f in library_files(root)["test"]}
    tasks = sample_tasks(test, n_tasks, args.seed)
    prompts = [
        engine.prompt(
            t.prompt, args.new_tokens, heal=False, max_prompt_tokens=args.prompt_tokens
        ).ids
        for t in tasks
    ]
    n = args.new_tokens
    reference = HFRunner(model)
    with torch.inference_mode():
        ref_greedy = [greedy(reference, p, n) for p in prompts]
        ref_super = [superposed(reference, engine, p, n) for p in prompts]
        ref_greedy_nll = [nll(model, p, g) for p, g in zip(prompts, ref_greedy, strict=True)]
        ref_super_nll = [
            sum(nll(model, p, d) for d in drafts)
            for p, drafts in zip(prompts, ref_super, strict=True)
        ]
    results: dict[str, Any] = {
        "protocol": "stdlib held-out next-line positions; reference = transformers runner, fp32",
        "size": size,
        "positions": len(prompts),
        "new_tokens": n,
        "prompt_tokens": args.prompt_tokens,
        "precisions": {},
    }
    for precision in args.precisions:
        fast = fast_runner(engine.loaded, precision)
        with torch.inference_mode():
            forced = [greedy(fast, p, n, r) for p, r in zip(prompts, ref_greedy, strict=True)]
            free = [greedy(fast, p, n) for p in prompts]
            drafts = [superposed(fast, engine, p, n) for p in prompts]
            free_nll = [nll(model, p, g) for p, g in zip(prompts, free, strict=True)]
            super_nll = [
                sum(nll(model, p, d) for d in ds) for p, ds in zip(prompts, drafts, strict=True)
            ]
        pairs = [
            ab for f, r in zip(forced, ref_greedy, strict=True) for ab in zip(f, r, strict=True)
        ]
        results["precisions"][precision] = {
            "agreement": sum(a == b for a, b in pairs) / len(pairs),
            "greedy_drafts_identical": sum(f == r for f, r in zip(free, ref_greedy, strict=True))
            / len(prompts),
            "greedy_perplexity": perplexity_change(free_nll, ref_greedy_nll, [n] * len(prompts)),
            "superposed_perplexity": perplexity_change(
                super_nll,
                ref_super_nll,
                [
                    max(sum(map(len, ds)), sum(map(len, rs)))
                    for ds, rs in zip(drafts, ref_super, strict=True)
                ],
            ),
        }
        print(precision, results["precisions"][precision], flush=True)
    results["stamp"] = stamp.finish(started)
    name = f"fidelity{'-quick' if args.quick else ''}"
    write_json(RESULTS / f"{name}.json", results)
    (RESULTS / f"{name}.md").write_text(markdown(results))
    print(markdown(results))


def markdown(results: dict[str, Any]) -> str:
    """The fidelity table (embedded in docs/benchmarks.md by bench/report.py)."""

    def change(c: dict[str, Any]) -> str:
        return f"{100 * c['change']:+.1f}% [{100 * c['lo']:+.1f}, {100 * c['hi']:+.1f}]"

    s = results["stamp"]
    lines = [
        "# Fast runner fidelity (bench/fidelity.py)",
        "",
        f"`{s['command']}`: {s['date']}, commit {s['commit']}, {s['machine']}. "
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


if __name__ == "__main__":
    main()
