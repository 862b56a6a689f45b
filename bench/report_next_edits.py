"""Issue 35's section of docs/benchmarks.md: next edits on real edit history.

Reads bench/results/next_edits.json (the test split: flask, black), next_edits-test2.json
(the second test split: click, httpx, issue 55 item 3) and next_edits-validation.json (rich,
where the patterns were tuned), all from ``python -m bench.next_edits``, and applies issue
35's targets and issue 55's rule for the default: ``nextEdits`` is on by default only if, on
both test splits, precision is at least 90%, false alarms at most 2 per 100 ordinary changes
and recall@3 of the later sites at least 35%.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from bench.measure import RESULTS
from bench.tables import load_file, pct, say, table

TEST = RESULTS / "next_edits.json"
TEST2 = RESULTS / "next_edits-test2.json"
VALIDATION = RESULTS / "next_edits-validation.json"
RECALL = 0.60  # issue 35's targets: recall of the later sites, with precision at least
PRECISION = 0.85
FALSE_ALARMS = 2.0  # per 100 ordinary changes
READY_MS = 100.0  # proposals after a change ends, no model (p50)
DEFAULT_PRECISION = 0.90  # issue 55's rule for the default, on each test split
DEFAULT_RECALL = 0.35  # recall@3 of the later sites (and FALSE_ALARMS)


def per100(ci: Mapping[str, float]) -> str:
    """A rate per 100 changes with its interval."""
    if not ci.get("n"):
        return "n/a"
    return f"{ci['mean']:.1f} [{ci['lo']:.1f}, {ci['hi']:.1f}]"


def ms(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.0f}"


def split_row(name: str, result: Mapping[str, Any]) -> list[Any]:
    s = result["summary"]
    rep, o, lat = s["repetitive"], s["ordinary"], s["latency"]
    return [
        f"{name} ({', '.join(r.split('/')[1] for r in result['data']['repos'])})",
        f"{rep['tasks']} ({rep['later_sites']})",
        pct(rep["recall1"]),
        pct(rep["recall3"]),
        f"{pct(s['precision'])} ({s['proposed']})",
        o["changes"],
        per100(o["false_alarms_per_100"]),
        per100(o["false_proposals_per_100"]),
        f"{ms(lat['change_end_p50_ms'])} / {ms(lat['change_end_p95_ms'])} ({lat['notified']})",
        f"{ms(lat['request_p50_ms'])} / {ms(lat['request_p95_ms'])}",
    ]


def rewrite_rows(result: Mapping[str, Any]) -> list[list[Any]]:
    return [
        [kind, c["tasks"], pct(c["recall3"]), pct(c["precision"])]
        for kind, c in result["summary"]["by_rewrite"].items()
    ]


def verdicts(s: Mapping[str, Any]) -> dict[str, bool]:
    """The issue's targets and item 6's rule on a split's summary."""
    precision = s["precision"]["mean"]
    precise = not math.isnan(precision) and precision >= PRECISION
    quiet = s["ordinary"]["false_alarms_per_100"]["mean"] <= FALSE_ALARMS
    p50 = s["latency"]["change_end_p50_ms"]
    recall = s["repetitive"]["recall3"]["mean"]
    return {
        "recall": recall >= RECALL and precise,
        "precision": precise,
        "false_alarms": quiet,
        "latency": not math.isnan(p50) and p50 <= READY_MS,
        "default_on": precise
        and precision >= DEFAULT_PRECISION
        and quiet
        and recall >= DEFAULT_RECALL,
    }


def default_on(summaries: list[Mapping[str, Any]]) -> bool:
    """Issue 55's rule: on by default when every test split's summary meets it."""
    return bool(summaries) and all(verdicts(s)["default_on"] for s in summaries)


def yes(ok: bool) -> str:
    return "met" if ok else "**not met**"


def next_edits_section() -> str | None:
    """The section, or None before the test split's results exist."""
    test, test2, validation = load_file(TEST), load_file(TEST2), load_file(VALIDATION)
    if test is None:
        return None
    rows = [split_row("test", test)]
    if test2 is not None:
        rows.append(split_row("test 2", test2))
    if validation is not None:
        rows.append(split_row("validation", validation))
    header = ["split", "repetitive tasks (later sites)", "recall@1", "recall@3"]
    header += ["precision (proposals)", "ordinary changes", "false alarms / 100"]
    header += ["false proposals / 100", "change end -> proposals p50 / p95 ms (n)"]
    header += ["request p50 / p95 ms"]
    s = test["summary"]
    v = verdicts(s)
    tests = [r["summary"] for r in (test, test2) if r is not None]
    return say(
        "next_edits",
        data_file=test["data"]["file"],
        command=test["stamp"]["command"],
        commit=(test.get("server_commit") or test["stamp"]["commit"])[:10],
        table=table(header, rows, "lrrrrrrrrr"),
        rewrites=table(["rewrite", "tasks", "recall@3", "precision"], rewrite_rows(test), "lrrr"),
        recall=pct(s["repetitive"]["recall3"]),
        precision=pct(s["precision"]),
        false_alarms=per100(s["ordinary"]["false_alarms_per_100"]),
        p50=ms(s["latency"]["change_end_p50_ms"]),
        met_recall=yes(v["recall"]),
        met_false=yes(v["false_alarms"]),
        met_latency=yes(v["latency"]),
        rule=rule_lines(tests),
        default="on" if default_on(tests) else "off",
    )


def rule_lines(summaries: list[Mapping[str, Any]]) -> str:
    """Issue 55's rule per test split: each measure against its bar."""
    out = []
    for name, s in zip(("test", "test 2"), summaries, strict=False):
        precision, recall = s["precision"]["mean"], s["repetitive"]["recall3"]["mean"]
        alarms = s["ordinary"]["false_alarms_per_100"]["mean"]
        out.append(
            f"{name}: precision {pct(s['precision'])} (>= {DEFAULT_PRECISION:.0%}: "
            f"{yes(not math.isnan(precision) and precision >= DEFAULT_PRECISION)}), false alarms "
            f"{alarms:.1f} / 100 (<= {FALSE_ALARMS:.0f}: {yes(alarms <= FALSE_ALARMS)}), recall@3 "
            f"{pct(s['repetitive']['recall3'])} (>= {DEFAULT_RECALL:.0%}: "
            f"{yes(recall >= DEFAULT_RECALL)})"
        )
    return "; ".join(out)
