"""Side by side with the server of another commit (--before): runs pooled request by request, the
ratios' table."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from bench.lsp_latency.client import sources_at, summary
from bench.lsp_latency.first_request import first_request_cases
from bench.lsp_latency.walks import run
from bench.tables import table


def pooled(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One server's runs as one: every case summarised over all the runs' requests (the rest,
    its memory and counters among them, as the first run gave them)."""

    def pool(summaries: list[dict[str, Any]]) -> dict[str, Any]:
        return summary([ms for one in summaries for ms in one["values_ms"]])

    result = dict(runs[0])
    result["cases"] = {case: pool([r["cases"][case] for r in runs]) for case in runs[0]["cases"]}
    if runs[0].get("cursor_rest"):
        result["cursor_rest"] = pooled_modes([r["cursor_rest"] for r in runs])
    if runs[0].get("accept"):
        cases = [r["accept"]["cases"] for r in runs]
        result["accept"] = {
            **runs[0]["accept"],
            "cases": {name: pooled_modes([c[name] for c in cases]) for name in cases[0]},
        }
    if runs[0]["first_request"]:
        modes = [r["first_request"]["modes"] for r in runs]
        result["first_request"] = {
            **runs[0]["first_request"],
            "modes": {
                mode: {
                    **settings,
                    "first": pool([m[mode]["first"] for m in modes]),
                    "later": pool([m[mode]["later"] for m in modes]),
                }
                for mode, settings in modes[0].items()
            },
        }
    return result


def pooled_modes(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """A rest or accept case of several runs as one: each mode's requests pooled, its ratios
    again from the pooled p50 and p95 (the rest as the first run gave it)."""
    def values(mode: str) -> list[float]:
        return [ms for c in cases for ms in c["modes"][mode]["request"]["values_ms"]]

    modes = {
        mode: {**cases[0]["modes"][mode], "request": summary(values(mode))}
        for mode in cases[0]["modes"]
    }
    old, new = (modes[mode]["request"] for mode in modes)
    return {
        **cases[0],
        "modes": modes,
        "ratio_p50": new["p50_ms"] / old["p50_ms"],
        "ratio_p95": new["p95_ms"] / old["p95_ms"],
    }


def mode_cases(result: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The rest and accept cases' summaries as cases, one per mode (and asked moment)."""
    out: dict[str, dict[str, float]] = {}
    if rest := result.get("cursor_rest"):
        out |= {f"after a cursor rest, {m}": v["request"] for m, v in rest["modes"].items()}
    if accept := result.get("accept"):
        out |= {
            f"after an accept, asked {asked}, {m}": v["request"]
            for asked, case in accept["cases"].items()
            for m, v in case["modes"].items()
        }
    return out


async def side_by_side(model: str, requests: int, k: int, settings: dict[str, Any], ref: str,
                       rounds: int, after: str | None = None,
                       accept: int = 0) -> dict[str, Any]:  # fmt: skip
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
            runs[which].append(await run(model, requests, k, settings, sources, accept))
    result = pooled(runs["this"])
    before = pooled(runs[ref])
    result["after"] = after
    result["before"] = {
        "ref": ref,
        "cases": before["cases"],
        "first_request": before["first_request"],
        "cursor_rest": before.get("cursor_rest"),
        "accept": before.get("accept"),
        "rounds": rounds,
        "order": order,
    }
    return result


def before_table(result: dict[str, Any]) -> list[str]:
    """This commit's cases beside the same cases on the server of ``--before``."""
    if "before" not in result:
        return []
    ref = result["before"]["ref"]
    now = {
        **result["cases"], **first_request_cases(result["first_request"]), **mode_cases(result)
    }
    then = {
        **result["before"]["cases"],
        **first_request_cases(result["before"]["first_request"]),
        **mode_cases(result["before"]),
    }  # fmt: skip
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
