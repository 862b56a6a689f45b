"""The first request in a freshly opened file (issue 14), with the server's defaults: a short window
answers at once while the cache warms to the full one in the background
(lsp_server/runtime/warmup.py)."""

from __future__ import annotations

import statistics
from typing import Any

from bench.lsp_latency.client import LATER_S, Bench, summary
from bench.tables import met

FIRST = "first request in a freshly opened file"
LATER = f"the next request there, {LATER_S} s later (model calls)"
FIRST_TARGET_MS = 500  # issue 14: p50 of the first request


async def first_request_case(
    bench: Bench, text: str, requests: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The whole long file opened under a new name per request, a request at once at the end of
    a line in its middle, then the next one later: the two cases' summaries, and the details
    (the prompts' tokens, each request)."""
    rows = text.split("\n")
    results = []
    for i in range(requests):
        # A line of its own per request, 60 apart (a different window each time), past the
        # first 600 lines (20,000+ characters, 5,000+ tokens before the cursor).
        line = 600 + 60 * i
        while not (rows[line].strip() and rows[line - 1].strip()):
            line += 1
        results.append(await bench.first_request(f"first-{i}", text, line))
    later = [r for r in results if r["later_model_call"]]
    cases = {
        FIRST: summary([r["first_ms"] for r in results]),
        LATER: summary([r["later_ms"] for r in later]),
    }
    details = {
        "later_s": LATER_S,
        "first_prompt_tokens_p50": statistics.median(r["first_prompt"]["tokens"] for r in results),
        "later_prefilled_tokens_p50": statistics.median(
            r["later_prompt"]["tokens"] - r["later_prompt"]["reused"] for r in later
        ),
        "per_request": results,
    }
    return cases, details


def first_request_text(result: dict[str, Any]) -> list[str]:
    case, cases = result.get("first_request"), result["cases"]
    if not case or FIRST not in cases:
        return []
    p50 = cases[FIRST]["p50_ms"]
    return [
        "",
        "## First request in a freshly opened file (issue 14)",
        "",
        "The whole long file opened under a new name, a request at once at the end of a line in "
        f"its middle (5,000+ tokens before it), then {case['later_s']} s later the cursor moves "
        "to the end of the line above and asks again (the table's two cases; the later one "
        "counts the requests that needed a model call). The server's defaults: a cold cache "
        "answers from the last `firstPromptTokens` tokens and warms to the full window in the "
        f"background. Prompt tokens of the first request, p50: "
        f"{case['first_prompt_tokens_p50']:.0f}; tokens the later request had to prefill, p50: "
        f"{case['later_prefilled_tokens_p50']:.0f}. Target: p50 first request <= "
        f"{FIRST_TARGET_MS} ms: {met(p50 <= FIRST_TARGET_MS)} ({p50:.0f} ms).",
    ]
