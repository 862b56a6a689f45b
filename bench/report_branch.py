"""Issue 38 item 1's section of docs/benchmarks.md: drafts branched into their own rows
(bench/results/replay_branch.json, its validation run, and bench/results/branch_cost.json)."""

from __future__ import annotations

from typing import Any

from bench.metrics import paired_metric
from bench.tables import diff_text, load, met, say, table

NAME = "replay_branch"
GAP_AT_LEAST = 0.08  # the target: EM@3 - EM@1
P50_AT_MOST = 1.3  # request p50, branched over the default


def _paired(r: dict[str, Any], metric: str, keep: Any = lambda row: True) -> dict[str, float]:
    """Paired difference branch - default of one metric over the same line-start targets."""
    rows = sorted(r["rows"], key=lambda x: x["task"])  # the tasks in order, as they were paired
    return paired_metric(rows, "branch", "default", metric, keep)


def _malformed(r: dict[str, Any], config: str) -> str:
    rows = [x for x in r["rows"] if x["config"] == config]
    bad, shown = sum(x["malformed"] for x in rows), sum(x["shown"] for x in rows)
    return f"{bad} of {shown} ({100 * bad / shown:.1f}%)" if shown else "none shown"


def _row(r: dict[str, Any], config: str) -> list[Any]:
    s = r["summary"][config]["line-start"]
    a, v = s["all"], s["verbatim"]
    branch = r["configs"][config]["options"].get("branch", "off")
    return [
        config,
        branch,
        f"{100 * a['em1']['mean']:.0f}",
        f"{100 * a['emk']['mean']:.0f}",
        f"{100 * (a['emk']['mean'] - a['em1']['mean']):+.0f}",
        f"{100 * a['esk']['mean']:.1f}",
        f"{100 * v['emk']['mean']:.0f} (n = {v['n']})",
        f"{a['distinct']['mean']:.2f}",
        _malformed(r, config),
        f"{a['p50_ms']:.0f}",
    ]


def _validation() -> str:
    v = load(f"{NAME}_validation", False)
    if v is None:
        return "Validation run: not committed."
    cells = []
    for config in v["configs"]:
        s = v["summary"][config]["line-start"]["all"]
        cells.append(
            f"*{config}* EM@1 {100 * s['em1']['mean']:.0f}%, EM@3 {100 * s['emk']['mean']:.0f}%, "
            f"ES@3 {100 * s['esk']['mean']:.1f}%, distinct {s['distinct']['mean']:.2f}, "
            f"p50 {s['p50_ms']:.0f} ms"
        )
    return (
        f"Validation split (`{v['_file']}`, {v['data']['targets']} line starts, the tuning run "
        f"that chose what the test split compares): " + "; ".join(cells) + "."
    )


def _cost() -> str:
    c = load("branch_cost", False)
    if c is None:
        return "Step cost: not committed (`python -m bench.branch_cost`)."
    st, rq = c["step_ms_p50"], c["request_ms_p50"]
    ratio, rqr = c["step_ratio_to_rows1"], c["request_ratio_to_off"]
    rows = [[k, f"{st[k]:.1f}", f"{ratio[k]:.2f}x"] for k in ("rows1", "rows3", "superposed3")]
    rows += [[f"request, branch {k}", f"{rq[k]:.0f}", f"{rqr[k]:.2f}x"] for k in rq]
    stamp = c["stamp"]
    return (
        f"Cost (`{c['_file']}`, {c['prompts']} prompts, {stamp['runner']}, "
        f"{stamp['date']}, one run, interleaved):\n\n"
        + table(["median of", "ms", "ratio"], rows, "lrr")
    )


def branch_section() -> str | None:
    """The section, or None before its results exist."""
    r = load(NAME, False)
    if r is None:
        return None
    header = ["configuration", "branch", "EM@1 %", "EM@3 %", "EM@3 - EM@1", "ES@3 %"]
    header += ["verbatim EM@3 %", "distinct of 3", "malformed shown", "p50 ms"]
    rows = [_row(r, config) for config in r["configs"]]
    new_esk = _paired(r, "esk", lambda x: not x["verbatim"])
    em1, emk = _paired(r, "em1"), _paired(r, "emk")
    verbatim = _paired(r, "emk", lambda x: x["verbatim"])
    b = r["summary"]["branch"]["line-start"]["all"]
    d = r["summary"]["default"]["line-start"]["all"]
    ratio = b["p50_ms"] / d["p50_ms"]
    targets = [
        f"- EM@3 - EM@1 at least +{100 * GAP_AT_LEAST:.0f} points: "
        f"{met(b['emk']['mean'] - b['em1']['mean'] >= GAP_AT_LEAST)} "
        f"({100 * (b['emk']['mean'] - b['em1']['mean']):+.0f} branched, "
        f"{100 * (d['emk']['mean'] - d['em1']['mean']):+.0f} default).",
        f"- new lines (not verbatim in the snapshot), ES@3 +5 points with its interval above 0: "
        f"{met(new_esk['mean'] >= 0.05 and new_esk['lo'] > 0)} ({diff_text(new_esk)}).",
        f"- no loss of EM@1: {met(em1['mean'] >= 0)} ({diff_text(em1)}); EM@3 {diff_text(emk)}.",
        f"- no loss of verbatim-line EM@3: {met(verbatim['mean'] >= 0)} ({diff_text(verbatim)}).",
        f"- request p50 at most {P50_AT_MOST}x: {met(ratio <= P50_AT_MOST)} "
        f"({b['p50_ms']:.0f} / {d['p50_ms']:.0f} ms = {ratio:.2f}x).",
    ]
    return say(
        "replay_branch",
        file=r["_file"],
        split=r["data"]["split"],
        targets=r["data"]["targets"],
        table=table(header, rows, "llrrrrrrrr"),
        targets_met="\n".join(targets),
        validation=_validation(),
        cost=_cost(),
    )
