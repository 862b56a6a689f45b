"""Turn bench/results/*.json into docs/benchmarks.md and its plots: no number typed by hand.

python -m bench.report            # the full-size results where present, else the quick ones
python -m bench.report --quick    # the quick results only
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import RESULTS, ROOT, bootstrap_ci, normalize

DOC = ROOT / "docs" / "benchmarks.md"
IMAGES = ROOT / "docs" / "images"


LABEL = {
    "em1": "EM@1",
    "emk": "EM@k",
    "es1": "ES@1",
    "esk": "ES@k",
    "empty": "empty first draft",
    "pass1": "pass@1",
    "passk": "pass@k",
}

# ----- formatting -----------------------------------------------------------------------------


def pct(ci: dict[str, float]) -> str:
    """A share with its 95% interval, in percent."""
    if ci.get("n", 0) == 0 or math.isnan(ci["mean"]):
        return "n/a"
    return f"{100 * ci['mean']:.1f} [{100 * ci['lo']:.1f}, {100 * ci['hi']:.1f}]"


def num(ci: dict[str, float], digits: int = 2) -> str:
    if ci.get("n", 0) == 0 or math.isnan(ci["mean"]):
        return "n/a"
    return f"{ci['mean']:.{digits}f} [{ci['lo']:.{digits}f}, {ci['hi']:.{digits}f}]"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def verdict(diff: dict[str, float], better: str = "higher") -> str:
    """Supported when the 95% interval of the paired difference excludes 0 in the right way."""
    lo, hi = (diff["lo"], diff["hi"]) if better == "higher" else (-diff["hi"], -diff["lo"])
    if lo > 0:
        return "**supported**"
    if hi < 0:
        return "**contradicted**"
    return "**not shown** (interval includes 0)"


def stamp_line(name: str, s: dict[str, Any]) -> list[Any]:
    return [
        name,
        s["date"],
        s["commit"],
        s["model"],
        s["machine"],
        s.get("runner") or "not recorded: the `Engine.load()` default at that commit",
        f"{s['load_start']} -> {s['load_end']}",
        f"{s['seconds']:.0f}",
        f"`{s['command']}`",
    ]


def load(name: str, quick: bool) -> dict[str, Any] | None:
    """The results of one protocol: full-size unless asked for quick (or only quick exist)."""
    order = [f"{name}-quick.json"] if quick else [f"{name}.json", f"{name}-quick.json"]
    for file in order:
        path = RESULTS / file
        if path.exists():
            data: dict[str, Any] = json.loads(path.read_text())
            data["_file"] = f"bench/results/{file}"
            return data
    return None


# ----- plots ----------------------------------------------------------------------------------


def plot_methods(q: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(q["methods"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, metric, title in zip(
        axes, ("emk", "esk"), ("exact match@k", "edit similarity@k"), strict=True
    ):
        cis = [q["methods"][n][metric] for n in names]
        means = [100 * c["mean"] for c in cis]
        err = [
            [100 * (c["mean"] - c["lo"]) for c in cis],
            [100 * (c["hi"] - c["mean"]) for c in cis],
        ]
        ax.barh(names, means, xerr=err, color="#4878a8", capsize=3)
        ax.invert_yaxis()
        ax.set_xlim(0, max(5.0, *(100 * c["hi"] for c in cis)) * 1.05)
        ax.set_xlabel(f"{title} (%), 95% bootstrap CI")
    axes[1].set_yticklabels([])
    fig.suptitle(f"Next-line completion, {q['n_test']} held-out stdlib positions")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_k(q: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for label, suffix in (("with store", " + store"), ("alpha=0", ", alpha=0")):
        ks, ys, lo, hi = [], [], [], []
        for k in (1, 2, 3, 5, 8):
            ci = q["ablations"].get(f"superposed k={k}{suffix}", {}).get("esk")
            if ci:
                ks.append(k)
                ys.append(100 * ci["mean"])
                lo.append(100 * ci["lo"])
                hi.append(100 * ci["hi"])
        ax.plot(ks, ys, marker="o", label=label)
        ax.fill_between(ks, lo, hi, alpha=0.15)
    ax.set_xlabel("k (drafts)")
    ax.set_ylabel("edit similarity@k (%)")
    ax.set_title(f"Superposed decoding, k sweep ({q['n_ablation']} positions)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_coherence(c: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for name, m in c["methods"].items():
        x = m["self_bleu"]["mean"]
        y = m["ppl_best"]["mean"]
        if math.isnan(x):
            x = 100.0  # one draft: identical to itself
        ax.scatter([x], [y], label=name, s=40)
    ax.set_xlabel("Self-BLEU across drafts (lower = more diverse; greedy drawn at 100)")
    ax.set_ylabel("best-of-k perplexity")
    ax.legend(fontsize=8)
    ax.set_title(f"Coherence vs diversity, {c['n']} prefixes")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----- sections -------------------------------------------------------------------------------


def nextline_section(q: dict[str, Any], images: list[str]) -> str:
    out = ["## 2. Next-line completion on held-out standard-library packages", ""]
    st = q["store"]
    tt = q["target_tokens"]
    fits = sum(1 for t in tt if t <= q["max_new_tokens"]) / len(tt) if tt else float("nan")
    out += [
        f"Source: `{q['_file']}` ({q['size']} run). Library: `{q['stdlib']}` (one version). "
        f"Files per part of the split (hash of the top-level package directory, fixed salt): "
        f"{q['split']}. Test packages: {', '.join(q['test_units'])}. Validation packages: "
        f"{', '.join(q['validation_units'])}. The generated codec tables of `encodings/` are "
        "left out.",
        "",
        f"The n-gram store indexes the training part only: {st['files']} files, "
        f"{st['tokens']:,} tokens, orders {st['orders']}, {st['bytes'] / 2**20:.0f} MiB. "
        f"{q['n_test']} positions (per package: {q.get('positions_per_unit', 'n/a')}; the "
        "cursor after the indentation of a non-blank line of a "
        f"test file; fixed seed), prompt = the last {q['prompt_tokens']} tokens, drafts of at "
        f"most {q['max_new_tokens']} tokens stopped at the end of the line. "
        f"Only {100 * fits:.0f}% of the target lines fit in {q['max_new_tokens']} tokens, which "
        "caps exact match for every method.",
        "",
        "Metrics: EM = exact match (whitespace-normalised); @1 is the first draft, @k the best "
        "of the k drafts; ES = edit similarity (1 - Levenshtein / max length); CS = characters "
        "saved (common prefix / line length); empty = the first draft is empty. Cells are "
        "mean [95% bootstrap interval over positions], in percent. Time: median ms per request "
        "with the prompt already in the KV cache (the editor's steady state while typing).",
        "",
    ]
    t = q["tuning"]
    out += [
        f"### Tuning alpha and tau (validation packages, {t['n']} positions)",
        "",
        f"Chosen by edit similarity@3 (then EM@3): **alpha = {t['alpha']}, tau = {t['tau']}**. "
        "This grid is also the alpha and tau ablation; its numbers are validation numbers.",
        "",
        table(
            ["alpha", "tau", "EM@3", "ES@3", "CS@3", "empty", "median ms"],
            [
                [
                    g["alpha"],
                    g["tau"],
                    pct(g["emk"]),
                    pct(g["esk"]),
                    pct(g["csk"]),
                    pct(g["empty"]),
                    f"{g['ms_median']:.0f}",
                ]
                for g in t["grid"]
            ],
        ),
        "",
        "### Methods (test packages)",
        "",
        table(
            [
                "method",
                "EM@1",
                "EM@k",
                "ES@1",
                "ES@k",
                "CS@k",
                "empty",
                "distinct drafts",
                "median ms",
                "p90 ms",
            ],
            [
                [
                    name,
                    pct(m["em1"]),
                    pct(m["emk"]),
                    pct(m["es1"]),
                    pct(m["esk"]),
                    pct(m["csk"]),
                    pct(m["empty"]),
                    num(distinct_drafts([r["drafts"] for r in q["items"]["rows"][name]])),
                    f"{m['ms_median']:.0f}",
                    f"{m['ms_p90']:.0f}",
                ]
                for name, m in q["methods"].items()
            ],
        ),
        "",
        "distinct drafts = different non-empty drafts per request (whitespace-normalised; "
        "out of k), mean [95% interval].",
        "",
        f"![next-line methods]({images[0]})",
        "",
        "### The hypotheses (paired bootstrap over the same positions)",
        "",
        table(
            ["claim", "difference (points)", "verdict"],
            [
                [
                    f"{c['a']} {LABEL[c['metric_a']]} > {c['b']} {LABEL[c['metric_b']]}",
                    f"{100 * c['mean']:+.1f} [{100 * c['lo']:+.1f}, {100 * c['hi']:+.1f}]",
                    verdict(c),
                ]
                for c in q["comparisons"]
            ],
        ),
        "",
        *(
            healing_part(q)
            if q["healing"]
            else ["Healing ablation: not run (the run stopped before this phase).", ""]
        ),
        "### Examples: the first positions of the sample, every method's drafts",
        "",
        examples(q),
        "",
        *(
            ablation_part(q, images[1])
            if q["ablations"]
            else ["Ablations: not run (the run stopped before this phase).", ""]
        ),
    ]
    return "\n".join(out)


def distinct_drafts(per_request: Sequence[Sequence[str]]) -> dict[str, float]:
    """How many different non-empty drafts each request returned (normalised text)."""
    counts = [len({normalize(d) for d in drafts if d.strip()}) for drafts in per_request]
    return bootstrap_ci(counts)


def healing_part(q: dict[str, Any]) -> list[str]:
    return [
        "### Token healing (issue 8): the same positions with and without it",
        "",
        table(
            ["method", "EM@1", "EM@k", "ES@k", "empty first draft", "any draft empty"],
            [
                [
                    name,
                    pct(m["em1"]),
                    pct(m["emk"]),
                    pct(m["esk"]),
                    pct(m["empty"]),
                    pct(m["empty_any"]),
                ]
                for name, m in [
                    *[(n, q["methods"][n]) for n in list(q["methods"])[:3:2]],
                    *q["healing"].items(),
                ]
            ],
        ),
        "",
        table(
            ["healing vs none", "metric", "difference (points)"],
            [
                [
                    f"{c['a']} vs no healing",
                    LABEL[c["metric"]],
                    f"{100 * c['mean']:+.1f} [{100 * c['lo']:+.1f}, {100 * c['hi']:+.1f}]",
                ]
                for c in q["healing_comparisons"]
            ],
        ),
        "",
    ]


def ablation_part(q: dict[str, Any], image: str) -> list[str]:
    return [
        f"### Ablations: k, n-gram orders, store vs none (first {q['n_ablation']} test positions)",
        "",
        table(
            ["configuration", "EM@1", "EM@k", "ES@k", "CS@k", "median ms", "n-gram lookup share"],
            [
                [
                    name,
                    pct(m["em1"]),
                    pct(m["emk"]),
                    pct(m["esk"]),
                    pct(m["csk"]),
                    f"{m['ms_median']:.0f}",
                    f"{100 * m['lookup_share']:.0f}%",
                ]
                for name, m in sorted(q["ablations"].items())
            ],
        ),
        "",
        "Orders 2..4 use the paper's weights for 2, 3 and 4, rescaled to the same total weight "
        "as 2..6; both read the same store (a 2..6 store holds the 2..4 counts). The k=3 rows "
        "reuse the methods phase's runs on the same positions, so their times were taken under "
        "another machine load: compare times within a phase only.",
        "",
        f"![k sweep]({image})",
        "",
    ]


def examples(q: dict[str, Any], n: int = 4) -> str:
    """The target and every method's drafts at the first n positions."""
    out = []
    tasks = q["items"]["tasks"][:n]
    for i, t in enumerate(tasks):
        out.append(f"- `{t['source']}` line {t['line'] + 1}, target: {code(t['target'])}")
        for name, rows in q["items"]["rows"].items():
            drafts = " · ".join(code(d) if d.strip() else "(empty)" for d in rows[i]["drafts"])
            out.append(f"  - {name}: {drafts}")
    return "\n".join(out)


def code(text: str) -> str:
    """Inline code that survives backticks and newlines (shown as ⏎) inside the text."""
    text = text.replace("\n", "⏎")
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def humaneval_section(h: dict[str, Any]) -> str:
    out = [
        "## 3. HumanEval single-line infilling (left to right)",
        "",
        f"Source: `{h['_file']}` ({h['size']} run, {h['n']} of 1,033 items, fixed seed). The "
        "prompt is the code before the removed line plus its indentation; the engine sees no "
        "code after the cursor. pass = `prompt + line + suffix + test + check(entry_point)` exits "
        f"0 in a fresh interpreter within {h['timeout_s']:.0f} s; the canonical lines pass in "
        f"{100 * h['canonical_pass']:.0f}% of items. Store: the stdlib training part plus the 974 "
        f"MBPP solutions ({h['store']['files']} files, {h['store']['tokens']:,} tokens). alpha = "
        f"{h['alpha']}, tau = {h['tau']} from {h['tuning_from']}. HumanEval is widely seen in "
        "pretraining data: a sanity check, not the headline.",
        "",
        table(
            ["method", "EM@1", "EM@k", "pass@1", "pass@k", "ES@k", "empty", "distinct drafts"],
            [
                [
                    name,
                    pct(m["em1"]),
                    pct(m["emk"]),
                    pct(m["pass1"]),
                    pct(m["passk"]),
                    pct(m["esk"]),
                    pct(m["empty"]),
                    num(distinct_drafts(h["items"]["drafts"][name])),
                ]
                for name, m in h["methods"].items()
            ],
        ),
        "",
        table(
            ["comparison", "metric", "difference (points)", "verdict"],
            [
                [
                    f"{c['a']} vs {c['b']}",
                    LABEL[c["metric"]],
                    f"{100 * c['mean']:+.1f} [{100 * c['lo']:+.1f}, {100 * c['hi']:+.1f}]",
                    verdict(c),
                ]
                for c in h["comparisons"]
            ],
        ),
        "",
    ]
    return "\n".join(out)


def coherence_section(c: dict[str, Any], image: str) -> str:
    nucleus = next((x for x in c["comparisons"] if x["b"].startswith("nucleus")), None)
    out = [
        "## 4. Coherence (the paper's protocol, on code)",
        "",
        f"Source: `{c['_file']}` ({c['size']} run): {c['n']} prefixes of 15 tokens from the "
        "held-out test packages (fixed seed), 10-token drafts without a line stop or healing. "
        "Perplexity of each draft under the model itself (one forward of prefix + draft); "
        "best-of-k = the draft with the lowest perplexity; Self-BLEU (sacrebleu, 13a "
        "tokenisation) of each draft against the other drafts, 0..100, lower = more diverse; "
        "distinct-n = unique token n-grams / all n-grams in a draft (1 = no repetition). "
        f"alpha = {c['alpha']}, tau = {c['tau']} from {c['tuning_from']}.",
        "",
        table(
            [
                "method",
                "best-of-k ppl",
                "median best",
                "mean ppl per draft",
                "Self-BLEU",
                "distinct-1",
                "distinct-2",
                "distinct-3",
            ],
            [
                [
                    name,
                    num(m["ppl_best"]),
                    f"{m['ppl_best_median']:.2f}",
                    num(m["ppl_mean"]),
                    num(m["self_bleu"], 1),
                    num(m["distinct1"]),
                    num(m["distinct2"]),
                    num(m["distinct3"]),
                ]
                for name, m in c["methods"].items()
            ],
        ),
        "",
        table(
            ["comparison", "best-of-k ppl difference", "superposed lower?"],
            [
                [
                    f"{x['a']} - {x['b']}",
                    f"{x['mean']:+.2f} [{x['lo']:+.2f}, {x['hi']:+.2f}]",
                    verdict(x, better="lower"),
                ]
                for x in c["comparisons"]
            ],
        ),
        "",
    ]
    if nucleus is not None:
        no_worse = nucleus["lo"] <= 0  # contradicted only when superposed is clearly worse
        out += [
            "Hypothesis: superposed best-of-3 perplexity is no worse than nucleus: "
            + ("**consistent with the data**" if no_worse else "**contradicted**")
            + f" (difference {nucleus['mean']:+.2f} [{nucleus['lo']:+.2f}, {nucleus['hi']:+.2f}]).",
            "",
        ]
    out += [f"![coherence]({image})", ""]
    return "\n".join(out)


def generic(data: Any, depth: int = 0) -> str:
    """Render someone else's results file: tables for lists of flat dicts, else key: value."""
    if isinstance(data, list) and data and all(isinstance(r, dict) for r in data):
        keys = list(dict.fromkeys(k for r in data for k in r))
        flat = [k for k in keys if not any(isinstance(r.get(k), dict | list) for r in data)]
        return table(flat, [[fmt(r.get(k, "")) for k in flat] for r in data])
    if isinstance(data, dict):
        parts = []
        scalars = {k: v for k, v in data.items() if not isinstance(v, dict | list)}
        if scalars:
            parts.append(table(["key", "value"], [[k, fmt(v)] for k, v in scalars.items()]))
        for k, v in data.items():
            if isinstance(v, dict | list) and depth < 2:
                parts.append(f"\n**{k}**\n\n{generic(v, depth + 1)}")
        return "\n".join(parts)
    return f"`{json.dumps(data)[:500]}`"


def fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def embed(markdown: str) -> str:
    """Another script's markdown inside section 5: its headings two levels down."""
    return "\n".join(
        "##" + line if line.startswith("#") else line for line in markdown.splitlines()
    )


def other_results(name: str, script: str) -> list[str]:
    """bench/results/<name>.md (or its JSON, rendered plainly) from another benchmark script."""
    md, js = RESULTS / f"{name}.md", RESULTS / f"{name}.json"
    if md.exists():
        return [embed(md.read_text()), ""]
    if js.exists():
        return [f"### `bench/results/{name}.json`", "", generic(json.loads(js.read_text())), ""]
    return [f"`bench/results/{name}.json` is not present: run `python -m bench.{script}`.", ""]


def speed_section(q: dict[str, Any] | None) -> str:
    out = ["## 5. Speed", ""]
    out += other_results("latency", "latency")
    out += other_results("kernels", "kernels")
    out += other_results("fidelity", "fidelity")
    out += other_results("lsp_latency", "lsp_latency")
    if q is not None:
        main = next(iter(q["methods"].values()))
        name = next(iter(q["methods"]))
        st = q["store"]
        out += [
            "### N-gram lookup share of the decode time (bench/quality.py)",
            "",
            f"In the next-line run, {name} spent {100 * main['lookup_share']:.1f}% of its "
            "decode time (prompt cached) in n-gram lookups against the SQLite store "
            f"({st['tokens']:,} tokens, {st['bytes'] / 2**20:.0f} MiB); the ablation table of "
            "section 2 gives the share for every k.",
            "",
        ]
        if st.get("tokens_per_second"):
            out += [
                f"Building that store from scratch (tokenise + count + write) ran at "
                f"{st['tokens_per_second']:,.0f} tokens/s ({st['build_seconds']:.0f} s).",
                "",
            ]
    out += other_results("ngram", "ngram")
    return "\n".join(out)


def diff_text(d: dict[str, float], scale: float = 100.0, unit: str = " points") -> str:
    return (
        f"{scale * d['mean']:+.1f}{unit} [{scale * d['lo']:+.1f}, {scale * d['hi']:+.1f}], "
        f"n = {d['n']}"
    )


def summary(q: dict[str, Any] | None, h: dict[str, Any] | None, c: dict[str, Any] | None) -> str:
    """The hypotheses of the evaluation issue, each with its measured difference and verdict."""
    out = ["## The hypotheses, in short", ""]
    if q is not None:
        comps = q["comparisons"]
        h1 = next(x for x in comps if x["metric_a"] == "emk" and x["b"] == "greedy")
        h2 = next(x for x in comps if x["metric_a"] == "emk" and "alpha=0" in x["b"])
        h2e = next(x for x in comps if x["metric_a"] == "esk" and "alpha=0" in x["b"])
        out += [
            f"1. Next line: {h1['a']} EM@3 beats greedy EM@1: {verdict(h1)} ({diff_text(h1)}).",
            f"2. Next line: the codebase store beats no n-grams (alpha=0) at EM@3: {verdict(h2)} "
            f"({diff_text(h2)}); at edit similarity@3: {verdict(h2e)} ({diff_text(h2e)}).",
        ]
    if c is not None:
        nuc = next((x for x in c["comparisons"] if x["b"].startswith("nucleus")), None)
        if nuc is not None:
            worse = nuc["lo"] > 0
            out.append(
                "3. Coherence: superposed best-of-3 perplexity is no worse than nucleus: "
                + ("**contradicted**" if worse else "**consistent with the data**")
                + f" (difference {diff_text(nuc, 1.0, '')})."
            )
    if h is not None:
        hb = next((x for x in h["comparisons"] if x["b"] == "greedy"), None)
        if hb is not None:
            out.append(
                f"4. HumanEval infilling (sanity check): {hb['a']} pass@3 vs greedy pass@1: "
                f"{verdict(hb)} ({diff_text(hb)})."
            )
    return "\n".join([*out, ""])


def methods_note() -> str:
    """What each method is, read from the engine's defaults (not typed here)."""
    from lsp_server.engine.types import DecodeConfig

    d = DecodeConfig()
    return (
        "Methods: *superposed* = one batched pass drafting k continuations (Shen et al., 2024), "
        "re-scored with the n-gram store (*+ store*) or without n-grams (*alpha=0*); *greedy* = "
        f"one draft; *nucleus k* = k samples in one batch (top-p {d.top_p}, temperature "
        f"{d.nucleus_temperature}, seed {d.seed}); *beam k* = beam search of width k. All methods "
        "use token healing unless a row says otherwise, and the runner `Engine.load()` picks "
        "(1 thread): the reference transformers runner (float32) before commit 8b27e50, the "
        "fast runner (int4 on CPU) from it on; see the runner column below. The store is the "
        "project's SQLite "
        "n-gram store (`ngram_db.NgramStore`, orders 2..6).\n"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="report the quick results only")
    args = parser.parse_args(argv)
    from bench.report_models import models_section  # these import this module's helpers
    from bench.report_replay import replay_section

    q, h, c = (load(n, args.quick) for n in ("quality", "humaneval", "coherence"))
    r = load("replay", args.quick)
    tag = "-quick" if args.quick else ""  # the quick report never overwrites the full one
    IMAGES.mkdir(parents=True, exist_ok=True)
    doc = [
        "# Benchmarks",
        "",
        "Generated by `python -m bench.report` from `bench/results/*.json`; every number below "
        "comes from the scripts in `bench/` (do not edit by hand). `make bench-quick` reruns "
        "small fixed subsets in minutes; `make bench` runs the full sizes (hours on 2 cores). "
        "Intervals are 95% percentile bootstrap intervals over items (2,000 resamples). alpha "
        "and tau are tuned on separate validation packages, never on the test packages.",
        "",
        "Small runs give wide intervals: read a difference as shown only when its interval "
        "excludes 0.",
        "",
        summary(q, h, c),
        methods_note(),
        "## Where and when",
        "",
        table(
            [
                "results",
                "date",
                "commit",
                "model",
                "machine",
                "runner",
                "load avg (1/5/15 min)",
                "seconds",
                "command",
            ],
            [stamp_line(d["_file"], d["stamp"]) for d in (r, q, h, c) if d is not None],
        ),
        "",
    ]
    if r is not None:
        doc.append(replay_section(r))
    models = None if args.quick else models_section()  # both embedded models; the default
    if models is not None:
        doc.append(models)
    if q is not None:
        images = [f"images/bench-nextline{tag}.png", f"images/bench-ksweep{tag}.png"]
        plot_methods(q, ROOT / "docs" / images[0])
        if q["ablations"]:
            plot_k(q, ROOT / "docs" / images[1])
        doc.append(nextline_section(q, images))
    if h is not None:
        doc.append(humaneval_section(h))
    if c is not None:
        plot_coherence(c, IMAGES / f"bench-coherence{tag}.png")
        doc.append(coherence_section(c, f"images/bench-coherence{tag}.png"))
    doc.append(speed_section(q))
    out = DOC.with_name(f"benchmarks{tag}.md")
    out.write_text("\n".join(doc).rstrip() + "\n")
    print(f"report: {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
