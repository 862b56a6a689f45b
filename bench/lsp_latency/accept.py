"""The next draft after an accept (issue 24): with and without triggerOnAccept, side by side."""

from __future__ import annotations

import random
import statistics
from typing import Any

from bench.lsp_latency.client import ENTER_S, Bench, summary
from bench.tables import table

ACCEPT_MODES = {"without (asked only)": False, "triggerOnAccept": True}


async def accept_case(bench: Bench, text: str, requests: int) -> dict[str, Any]:
    """Issue 24: the next draft after an accept, asked at once or after Enter, with and
    without the accept's position (decoding ahead), alternating per file, same server."""
    rows = text.split("\n")
    lines = [i for i in range(200, len(rows) - 200) if rows[i].strip()]  # far from both ends
    pick = random.Random(0)
    out: dict[str, Any] = {"requests": requests, "enter_s": ENTER_S, "cases": {}}
    for enter, case in ((False, "at once"), (True, "after Enter")):
        runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in ACCEPT_MODES}
        for i in range(requests):
            line = pick.choice(lines)
            for j, (mode, ahead) in enumerate(ACCEPT_MODES.items()):
                name = f"accept-{int(enter)}-{i}-{j}"
                if (one := await bench.after_accept(name, text, line, ahead, enter)) is not None:
                    runs[mode].append(one)
        modes = {
            mode: {
                "request": summary([r["ms"] for r in results]),
                "model_calls_mean": statistics.mean(r["model_calls"] for r in results),
                "per_request": results,
            }
            for mode, results in runs.items()
            if results
        }
        old, new = (modes[mode]["request"] for mode in ACCEPT_MODES)
        out["cases"][case] = {
            "modes": modes,
            "ratio_p50": new["p50_ms"] / old["p50_ms"],
            "ratio_p95": new["p95_ms"] / old["p95_ms"],
        }
    return out


def accept_table(result: dict[str, Any]) -> list[str]:
    case = result.get("accept")
    if not case:
        return []
    rows = [
        [name, mode, m["request"]["n"], f"{m['request']['p50_ms']:.0f}"]
        + [f"{m['request']['p95_ms']:.0f}", f"{m['model_calls_mean']:.2f}"]
        for name, c in case["cases"].items()
        for mode, m in c["modes"].items()
    ]
    ratios = "; ".join(
        f"{name}: p50 {c['ratio_p50']:.2f}x, p95 {c['ratio_p95']:.2f}x"
        for name, c in case["cases"].items()
    )
    return [
        "",
        "## The next draft after an accept (issue 24)",
        "",
        "The long file opened under a new name with a random line emptied to its indentation, "
        "a request there, and its first draft accepted as an editor does (the item's command, "
        "then the insertion). Then the next draft is asked at once at the cursor after the "
        f"accepted text, or after Enter and the indentation typed {case['enter_s']:.1f} s "
        "later. Time: that request to its response. Modes alternate per file in one server: "
        "the accept says where the draft went in (the server decodes the next one at once, "
        "`triggerOnAccept`), or not (nothing is decoded until the editor asks). Model calls: "
        "per trial after the accept, the job's included.",
        "",
        table(
            ["asked", "mode", "n", "p50 ms", "p95 ms", "model calls"],
            rows,
            align="llrrrr",
        ),
        "",
        f"Ratios (triggerOnAccept over without): {ratios}.",
    ]
