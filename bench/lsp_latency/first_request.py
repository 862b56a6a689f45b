"""The first request in a freshly opened file (issue 14): firstPromptTokens 0 against the warm-up,
side by side."""

from __future__ import annotations

import statistics
from typing import Any

from bench.lsp_latency.client import LATER_S, Bench, summary
from bench.tables import table

FIRST_MODES = {"firstPromptTokens 0 (old)": 0, "firstPromptTokens 256 (warm-up)": 256}


def first_request_cases(case: dict[str, Any] | None) -> dict[str, dict[str, float]]:
    """The first-request case's summaries as cases: the first and later request per setting."""
    if not case:
        return {}
    return {
        f"{which} request, {mode}": case["modes"][mode][which]
        for mode in case["modes"]
        for which in ("first", "later")
    }


async def first_request_case(
    bench: Bench, base: dict[str, Any], text: str, requests: int
) -> dict[str, Any]:
    """Issue 14: the first request in a freshly opened file, warm-up off and on, alternating."""
    rows = text.split("\n")
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in FIRST_MODES}
    for i in range(requests):
        for j, (mode, first) in enumerate(FIRST_MODES.items()):
            # A line of its own per request, 60 apart (a different window each time), past
            # the first 600 lines (20,000+ characters, 5,000+ tokens before the cursor).
            line = 600 + 60 * (2 * i + j)
            while not (rows[line].strip() and rows[line - 1].strip()):
                line += 1
            await bench.configure({**base, "firstPromptTokens": first})
            runs[mode].append(await bench.first_request(f"first-{i}-{j}", text, line))
    out: dict[str, Any] = {"requests": requests, "later_s": LATER_S, "modes": {}}
    for mode, results in runs.items():
        out["modes"][mode] = {
            "first": summary([r["first_ms"] for r in results]),
            "later": summary([r["later_ms"] for r in results if r["later_model_call"]]),
            "first_prompt_tokens_p50": statistics.median(
                r["first_prompt"]["tokens"] for r in results
            ),
            "later_prefilled_tokens_p50": statistics.median(
                r["later_prompt"]["tokens"] - r["later_prompt"]["reused"]
                for r in results
                if r["later_model_call"]
            ),
            "per_request": results,
        }
    old, new = (out["modes"][mode] for mode in FIRST_MODES)
    out["ratio_first_p50"] = new["first"]["p50_ms"] / old["first"]["p50_ms"]
    out["ratio_later_p50"] = new["later"]["p50_ms"] / old["later"]["p50_ms"]
    return out


def first_request_table(result: dict[str, Any]) -> list[str]:
    case = result.get("first_request")
    if not case:
        return []
    lines = [
        "",
        "## First request in a freshly opened file (issue 14)",
        "",
        f"The whole long file opened under a new name, a request at once at the end of a line "
        f"in its middle (5,000+ tokens before it), then {case['later_s']} s later the cursor "
        "moves to the end of the line above and asks again (later: the requests "
        "that needed a model call; prefilled: prompt tokens the cache lacked). The two "
        "settings alternate file by file in the same server run. `firstPromptTokens` 0 "
        "prefills the whole window on the request path (the old behaviour); 256 answers a "
        "cold cache from the last 256 tokens and warms the cache to the full window in the "
        "background (lsp_server/warmup.py). "
        "Target: p50 first request <= 500 ms, later requests unchanged.",
        "",
        table(
            ["setting", "n", "first p50 ms", "first p95 ms", "first prompt tokens (p50)"]
            + ["later p50 ms", "later p95 ms", "later prefilled tokens (p50)"],
            [
                [mode, m["first"]["n"], f"{m['first']['p50_ms']:.0f}"]
                + [f"{m['first']['p95_ms']:.0f}", f"{m['first_prompt_tokens_p50']:.0f}"]
                + [f"{m['later']['p50_ms']:.0f}", f"{m['later']['p95_ms']:.0f}"]
                + [f"{m['later_prefilled_tokens_p50']:.0f}"]
                for mode, m in case["modes"].items()
            ],
            align="l" + "r" * 7,
        ),
    ]
    lines += [
        "",
        f"Ratios (warm-up over old), p50: first request {case['ratio_first_p50']:.2f}x, "
        f"later request {case['ratio_later_p50']:.2f}x.",
    ]
    return lines
