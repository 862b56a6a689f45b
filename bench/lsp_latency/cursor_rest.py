"""The request after the cursor rests (issue 24): without and with superposed/cursorRest, side by
side."""

from __future__ import annotations

import random
import statistics
from typing import Any

from bench.lsp_latency.client import REST_S, Bench, summary
from bench.tables import table

REST_MODES = {"no cursorRest (today)": False, "cursorRest": True}


REST_TARGET_MS = 300  # issue 24: p50 of the request after the rest, default CPU path


async def cursor_rest_case(bench: Bench, text: str, requests: int) -> dict[str, Any]:
    """Issue 24: the request after the cursor rested at a random line, with and without the
    server told (alternating per file, same server)."""
    rows = text.split("\n")
    lines = [i for i in range(200, len(rows) - 200) if rows[i].strip()]  # far from both ends
    pick = random.Random(0)
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in REST_MODES}
    for i in range(requests):
        for j, (mode, tell) in enumerate(REST_MODES.items()):
            line = pick.choice(lines)
            runs[mode].append(await bench.after_rest(f"rest-{i}-{j}", text, line, tell))
    out: dict[str, Any] = {"requests": requests, "rest_s": REST_S, "modes": {}}
    for mode, results in runs.items():
        out["modes"][mode] = {
            "request": summary([r["ms"] for r in results]),
            "prefilled_tokens_p50": statistics.median(
                r["prompt"]["tokens"] - r["prompt"]["reused"] for r in results
            ),
            "per_request": results,
        }
    old, new = (out["modes"][mode]["request"] for mode in REST_MODES)
    out["ratio_p50"] = new["p50_ms"] / old["p50_ms"]
    out["ratio_p95"] = new["p95_ms"] / old["p95_ms"]
    return out


def cursor_rest_table(result: dict[str, Any]) -> list[str]:
    case = result.get("cursor_rest")
    if not case:
        return []
    return [
        "",
        "## The request after the cursor rests (issue 24)",
        "",
        f"The long file opened under a new name, the cursor resting {case['rest_s']:.0f} s at "
        "the end of a random line far from both ends, then a request there; the two modes "
        "alternate file by file in the same server. Without `superposed/cursorRest` the server "
        "warms only the document's end (on open); with it, the place where the cursor rests. "
        f"Target: p50 <= {REST_TARGET_MS} ms.",
        "",
        table(
            ["mode", "n", "p50 ms", "p95 ms", "prefilled tokens (p50)"],
            [
                [mode, m["request"]["n"], f"{m['request']['p50_ms']:.0f}"]
                + [f"{m['request']['p95_ms']:.0f}", f"{m['prefilled_tokens_p50']:.0f}"]
                for mode, m in case["modes"].items()
            ],
            align="lrrrr",
        ),
        "",
        f"Ratios (cursorRest over today): p50 {case['ratio_p50']:.2f}x, "
        f"p95 {case['ratio_p95']:.2f}x.",
    ]
