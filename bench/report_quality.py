"""The quality benchmarks' part of docs/benchmarks.md: next-line completion (bench.quality),
HumanEval infilling (bench.humaneval) and coherence (bench.coherence), their plots, and the
evaluation issue's hypotheses read from those runs (bench.report assembles the document)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import spec_key
from bench.measure import ROOT
from bench.metrics import bootstrap_ci, normalize
from bench.tables import code, diff_text, num, pct, points, say, table, verdict

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


def run_of(data: dict[str, Any]) -> dict[str, Any]:
    """What a section says of its results file: the file and the size of the run."""
    return {"file": data["_file"], "size": data["size"]}


def tuned_as(data: dict[str, Any]) -> dict[str, Any]:
    """The alpha and tau a run used, and where they were tuned."""
    return {key: data[key] for key in ("alpha", "tau", "tuning_from")}


def comparison(data: dict[str, Any], against: str, metric: str) -> dict[str, Any] | None:
    """The run's comparison of its first method with the method ``against`` (a ``spec_key``:
    "greedy", "nostore", "nucleus", ...) in ``metric`` (the first method's metric). Only the
    main methods count (the specs also list ablations and healing variants)."""
    names = {spec_key(s): s["name"] for s in data["specs"] if s["name"] in data["methods"]}
    return next(
        (
            c
            for c in data["comparisons"]
            if c["b"] == names.get(against) and c.get("metric_a", c.get("metric")) == metric
        ),
        None,
    )


# ----- plots ----------------------------------------------------------------------------------


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (files only, no display); imported on use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(plt: Any, fig: Any, path: Path) -> None:
    """``fig`` laid out and written to ``path`` (110 dpi), then closed."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_methods(q: dict[str, Any], path: Path) -> None:
    plt = pyplot()
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
    save(plt, fig, path)


def plot_k(q: dict[str, Any], path: Path) -> None:
    plt = pyplot()
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
    save(plt, fig, path)


def plot_coherence(c: dict[str, Any], path: Path) -> None:
    plt = pyplot()
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
    save(plt, fig, path)


# ----- sections -------------------------------------------------------------------------------


def nextline_section(q: dict[str, Any], images: list[str]) -> str:
    st, t, tt = q["store"], q["tuning"], q["target_tokens"]
    fits = sum(1 for n in tt if n <= q["max_new_tokens"]) / len(tt) if tt else float("nan")
    tuning_table = table(
        ["alpha", "tau", "EM@3", "ES@3", "CS@3", "empty", "median ms"],
        [
            [g["alpha"], g["tau"], pct(g["emk"]), pct(g["esk"]), pct(g["csk"]), pct(g["empty"])]
            + [f"{g['ms_median']:.0f}"]
            for g in t["grid"]
        ],
    )
    methods_table = table(
        ["method", "EM@1", "EM@k", "ES@1", "ES@k", "CS@k", "empty", "distinct drafts"]
        + ["median ms", "p90 ms"],
        [
            [name, *(pct(m[x]) for x in ("em1", "emk", "es1", "esk", "csk", "empty"))]
            + [num(distinct_drafts([r["drafts"] for r in q["items"]["rows"][name]]))]
            + [f"{m['ms_median']:.0f}", f"{m['ms_p90']:.0f}"]
            for name, m in q["methods"].items()
        ],
    )
    hypotheses_table = table(
        ["claim", "difference (points)", "verdict"],
        [
            [
                f"{c['a']} {LABEL[c['metric_a']]} > {c['b']} {LABEL[c['metric_b']]}",
                points(c),
                verdict(c),
            ]
            for c in q["comparisons"]
        ],
    )
    return say(
        "nextline",
        **run_of(q),
        stdlib=q["stdlib"],
        split=q["split"],
        test_units=", ".join(q["test_units"]),
        validation_units=", ".join(q["validation_units"]),
        store_files=st["files"],
        store_tokens=f"{st['tokens']:,}",
        store_orders=st["orders"],
        store_mib=f"{st['bytes'] / 2**20:.0f}",
        n_test=q["n_test"],
        per_unit=q.get("positions_per_unit", "n/a"),
        prompt_tokens=q["prompt_tokens"],
        max_new_tokens=q["max_new_tokens"],
        fits=f"{100 * fits:.0f}",
        tuning_n=t["n"],
        alpha=t["alpha"],
        tau=t["tau"],
        tuning_table=tuning_table,
        methods_table=methods_table,
        methods_image=images[0],
        hypotheses_table=hypotheses_table,
        healing=(healing_part(q) if q["healing"] else say("healing_not_run")) + "\n\n",
        examples=examples(q),
        ablations=ablation_part(q, images[1]) if q["ablations"] else say("ablations_not_run"),
    )


def distinct_drafts(per_request: Sequence[Sequence[str]]) -> dict[str, float]:
    """How many different non-empty drafts each request returned (normalised text)."""
    counts = [len({normalize(d) for d in drafts if d.strip()}) for drafts in per_request]
    return bootstrap_ci(counts)


def healing_part(q: dict[str, Any]) -> str:
    first_and_third = [(n, q["methods"][n]) for n in list(q["methods"])[:3:2]]
    metrics = ("em1", "emk", "esk", "empty", "empty_any")
    methods_table = table(
        ["method", "EM@1", "EM@k", "ES@k", "empty first draft", "any draft empty"],
        [
            [name, *(pct(m[x]) for x in metrics)]
            for name, m in [*first_and_third, *q["healing"].items()]
        ],
    )
    differences_table = table(
        ["healing vs none", "metric", "difference (points)"],
        [
            [f"{c['a']} vs no healing", LABEL[c["metric"]], points(c)]
            for c in q["healing_comparisons"]
        ],
    )
    return say("healing", methods_table=methods_table, differences_table=differences_table)


def ablation_part(q: dict[str, Any], image: str) -> str:
    rows = [
        [name, *(pct(m[x]) for x in ("em1", "emk", "esk", "csk"))]
        + [f"{m['ms_median']:.0f}", f"{100 * m['lookup_share']:.0f}%"]
        for name, m in sorted(q["ablations"].items())
    ]
    header = ["configuration", "EM@1", "EM@k", "ES@k", "CS@k", "median ms", "n-gram lookup share"]
    return say("ablations", n=q["n_ablation"], table=table(header, rows), image=image)


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


def humaneval_section(h: dict[str, Any]) -> str:
    metrics = ("em1", "emk", "pass1", "passk", "esk", "empty")
    methods_table = table(
        ["method", "EM@1", "EM@k", "pass@1", "pass@k", "ES@k", "empty", "distinct drafts"],
        [
            [name, *(pct(m[x]) for x in metrics), num(distinct_drafts(h["items"]["drafts"][name]))]
            for name, m in h["methods"].items()
        ],
    )
    comparisons_table = table(
        ["comparison", "metric", "difference (points)", "verdict"],
        [
            [f"{c['a']} vs {c['b']}", LABEL[c["metric"]], points(c), verdict(c)]
            for c in h["comparisons"]
        ],
    )
    return say(
        "humaneval",
        **run_of(h),
        n=h["n"],
        timeout_s=f"{h['timeout_s']:.0f}",
        canonical=f"{100 * h['canonical_pass']:.0f}",
        store_files=h["store"]["files"],
        store_tokens=f"{h['store']['tokens']:,}",
        **tuned_as(h),
        methods_table=methods_table,
        comparisons_table=comparisons_table,
    )


def no_worse_than_nucleus(c: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """Coherence's hypothesis, if the run compared nucleus: the verdict and the difference."""
    nucleus = comparison(c, "nucleus", "ppl_best")
    if nucleus is None:
        return None
    worse = nucleus["lo"] > 0  # contradicted only when superposed is clearly worse
    return ("**contradicted**" if worse else "**consistent with the data**"), nucleus


def coherence_section(c: dict[str, Any], image: str) -> str:
    metrics = ("ppl_mean", "self_bleu", "distinct1", "distinct2", "distinct3")
    methods_table = table(
        ["method", "best-of-k ppl", "median best", "mean ppl per draft", "Self-BLEU"]
        + ["distinct-1", "distinct-2", "distinct-3"],
        [
            [name, num(m["ppl_best"]), f"{m['ppl_best_median']:.2f}"]
            + [num(m[x], 1 if x == "self_bleu" else 2) for x in metrics]
            for name, m in c["methods"].items()
        ],
    )
    comparisons_table = table(
        ["comparison", "best-of-k ppl difference", "superposed lower?"],
        [
            [f"{x['a']} - {x['b']}", points(x, 1.0, 2), verdict(x, better="lower")]
            for x in c["comparisons"]
        ],
    )
    nucleus = no_worse_than_nucleus(c)
    hypothesis = ""
    if nucleus is not None:
        said, d = nucleus
        hypothesis = say("coherence_hypothesis", verdict=said, diff=points(d, 1.0, 2)) + "\n\n"
    return say(
        "coherence",
        **run_of(c),
        n=c["n"],
        **tuned_as(c),
        methods_table=methods_table,
        comparisons_table=comparisons_table,
        hypothesis=hypothesis,
        image=image,
    )


def hypotheses(q: dict[str, Any] | None, h: dict[str, Any] | None, c: dict[str, Any] | None) -> str:
    """The hypotheses of the evaluation issue, each with its measured difference and verdict."""
    out = []
    if q is not None:
        h1, h2 = comparison(q, "greedy", "emk"), comparison(q, "nostore", "emk")
        h2e = comparison(q, "nostore", "esk")
        assert h1 and h2 and h2e, f"{q['_file']} lacks the comparisons of the hypotheses"
        out.append(say("h1", a=h1["a"], verdict=verdict(h1), diff=diff_text(h1)))
        es = {"verdict_es": verdict(h2e), "diff_es": diff_text(h2e)}
        out.append(say("h2", verdict=verdict(h2), diff=diff_text(h2), **es))
    nucleus = no_worse_than_nucleus(c) if c is not None else None
    if nucleus is not None:
        out.append(say("h3", verdict=nucleus[0], diff=diff_text(nucleus[1], 1.0, "")))
    hb = comparison(h, "greedy", "passk") if h is not None else None
    if hb is not None:
        out.append(say("h4", a=hb["a"], verdict=verdict(hb), diff=diff_text(hb)))
    return "\n".join([*out, ""])


def quality_sections(
    runs: dict[str, dict[str, Any] | None], tag: str, plots: bool = True
) -> list[str]:
    """Next-line, HumanEval and coherence, with their plots (``tag``: -quick for the quick
    report, which never overwrites the full one's images; ``plots`` False: the text only)."""
    q, h, c = (runs[n] for n in ("quality", "humaneval", "coherence"))
    sections = []
    if q is not None:
        images = [f"images/bench-nextline{tag}.png", f"images/bench-ksweep{tag}.png"]
        if plots:
            plot_methods(q, ROOT / "docs" / images[0])
        if plots and q["ablations"]:
            plot_k(q, ROOT / "docs" / images[1])
        sections.append(nextline_section(q, images))
    if h is not None:
        sections.append(humaneval_section(h))
    if c is not None:
        if plots:
            plot_coherence(c, IMAGES / f"bench-coherence{tag}.png")
        sections.append(coherence_section(c, f"images/bench-coherence{tag}.png"))
    return sections
