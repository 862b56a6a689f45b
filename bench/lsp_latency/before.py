"""Side by side with the server of another commit (--before): runs pooled request by request, the
ratios' table."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from bench.lsp_latency.client import sources_at, summary
from bench.lsp_latency.walks import run
from bench.tables import table


def pooled(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One server's runs as one: every case summarised over all the runs' requests (the rest,
    its memory, counters and the cases' details among them, as the first run gave them)."""

    def pool(case: str) -> dict[str, Any]:
        return summary([ms for r in runs for ms in r["cases"][case]["values_ms"]])

    return {**runs[0], "cases": {case: pool(case) for case in runs[0]["cases"]}}


async def side_by_side(model: str, requests: int, k: int, settings: dict[str, Any], ref: str,
                       rounds: int, after: str | None = None) -> dict[str, Any]:  # fmt: skip
    """This server (the checkout's, or commit ``after``'s) and the server of commit ``ref``,
    ``rounds`` times each, in the order ABBA ABBA... (a drift of the machine's load during
    the run falls on both alike); each server's cases pooled over its runs. A change's
    latency against the code before it."""
    runs: dict[str, list[dict[str, Any]]] = {"this": [], ref: []}
    order = [
        which for r in range(rounds) for which in (("this", ref) if r % 2 == 0 else (ref, "this"))
    ]
    with tempfile.TemporaryDirectory(prefix="lsp-before-") as tmp:
        then = sources_at(ref, Path(tmp) / "before")
        now = None if after is None else sources_at(after, Path(tmp) / "after")
        for which in order:
            sources = now if which == "this" else then
            runs[which].append(await run(model, requests, k, settings, sources))
    result = pooled(runs["this"])
    before = pooled(runs[ref])
    result["after"] = after
    result["before"] = {
        "ref": ref,
        "cases": before["cases"],
        "rounds": rounds,
        "order": order,
    }
    return result


def before_table(result: dict[str, Any]) -> list[str]:
    """This commit's cases beside the same cases on the server of ``--before``."""
    if "before" not in result:
        return []
    ref = result["before"]["ref"]
    now, then = result["cases"], result["before"]["cases"]
    rows = [
        [case, f"{then[case]['p50_ms']:.0f}", f"{now[case]['p50_ms']:.0f}",
         f"{now[case]['p50_ms'] / then[case]['p50_ms']:.2f}x",
         f"{then[case]['p95_ms']:.0f}", f"{now[case]['p95_ms']:.0f}"]
        for case in now if case in then
    ]  # fmt: skip
    return [
        "",
        f"## Against the server of {ref}",
        "",
        f"The same cases on the server of commit {ref} (its code extracted with `git archive`, "
        f"driven by this script), in the same run, {_order(result['before'])}: a ratio near 1 "
        "is within noise."
        + (f" This: the server of commit {result['after']}." if result.get("after") else ""),
        "",
        table(["case", f"p50 ms ({ref})", "p50 ms (this)", "ratio", f"p95 ms ({ref})",
               "p95 ms (this)"], rows, align="lrrrrr"),  # fmt: skip
    ]


def _order(before: dict[str, Any]) -> str:
    rounds = before.get("rounds", 1)
    if rounds == 1:
        return "after this commit's"
    return (f"each server {rounds} times, in the order {' '.join(before['order'])}, "
            "its requests pooled")  # fmt: skip
