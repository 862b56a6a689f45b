"""Where a cold request's time goes (issue 54): the first request where the cursor arrives in
a file, by phase, on the real model over stdio (not a timed test).

Two cases, the cursor where the cache holds nothing of the prompt (as bench.lsp_latency's):

- open: the long file (argparse.py) opened under a new name, a request at once at the end of a
  line in its middle (lines 600, 660, ...);
- jump: opened under a new name, a request near its end answered, then one at once at the
  end of a line in its middle (as open's lines): the cache holds the other place, and the
  memory has indexed the file already (a file just opened is indexed while its first
  request runs);
- rest: opened under a new name, the cursor resting 1 s at the end of a random line
  (``superposed/cursorRest``, as the plugins send it: the server warms the cache there), then
  a request there.

For each request, from the server's own account of its model call (``superposed.stats``:
``lastTimingMs`` and ``lastPrompt``): the tokens prefilled and their ms, the decode forwards
run and their ms, the most tokens a shown draft holds (the steps the request needed at least),
and the overhead (request to response, less the model call's phases). Medians per case, the
machine's load before and after.

    .venv/bin/python -m bench.cold_request [--requests 8] [--settings JSON] [--out PATH]
        [--before REF [--rounds 2]]

``--before REF``: the server of commit REF side by side with the checkout's, ABBA.
``--versus JSON``: the checkout's server with these settings too, side by side, ABBA (issue
54 item 4: ``{"answerWithinMs": 250}``, the rows then also say how long the drafts shown are).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import tempfile
from pathlib import Path
from typing import Any

from lsprotocol import types

from bench.lsp_latency import save
from bench.lsp_latency.client import (
    COMPILE_WAIT_S,
    LONG_SOURCE,
    REST_S,
    SHORT,
    Bench,
    server,
    sources_at,
)
from bench.measure import RESULTS
from bench.tables import table

CASES = ("open", "jump", "rest")


FIELDS = {  # a request's row -> the table's column
    "ms": "request ms",
    "prefilled": "tokens prefilled",
    "prefill_ms": "prefill ms",
    "forwards": "decode forwards",
    "steps_ms": "decode ms",
    "shown_tokens": "tokens shown (most)",
    "first_chars": "first draft chars",
    "overhead_ms": "overhead ms",
}


async def request_at(bench: Bench, uri: str, line: int, column: int) -> dict[str, Any]:
    """A request at (line, column) and what its model call did (None fields: no call)."""
    calls = (await bench.stats())["counters"].get("model_calls", 0)
    ms, drafts = await bench.inline(uri, types.Position(line=line, character=column))
    stats = await bench.stats()
    timing, prompt = stats["lastTimingMs"], stats["lastPrompt"]
    called = stats["counters"].get("model_calls", 0) > calls
    phases = timing.get("total", 0.0) + timing.get("wellformed", 0.0)
    return {
        "ms": ms,
        "model_call": called,
        "line": line,
        "prompt_tokens": prompt.get("tokens"),
        "short_window": prompt.get("short"),
        "prefilled": prompt.get("tokens", 0) - prompt.get("reused", 0),
        "prefill_ms": timing.get("prefill", 0.0),
        "forwards": timing.get("forwards"),
        "steps_ms": timing.get("steps", 0.0),
        "shown_tokens": timing.get("shown_tokens"),
        "first_chars": len(drafts[0]) if drafts else 0,
        "overhead_ms": ms - phases,
        "timing_ms": timing,
        "drafts": drafts,
    }


def middle_line(rows: list[str], i: int) -> int:
    """The ``i``-th request's line in the middle of the file: from line 600 + 60 i, the first
    that is not blank and follows one that is not."""
    line = 600 + 60 * i
    while not (rows[line].strip() and rows[line - 1].strip()):
        line += 1
    return line


async def open_case(bench: Bench, text: str, requests: int) -> list[dict[str, Any]]:
    """The file opened under a new name, a request at once at the end of a line in its middle."""
    rows, out = text.split("\n"), []
    for i in range(requests):
        line = middle_line(rows, i)
        uri = bench.open(f"open-{i}.py", text)
        out.append(await request_at(bench, uri, line, len(rows[line])))
        bench.close(uri)
    return out


async def jump_case(bench: Bench, text: str, requests: int) -> list[dict[str, Any]]:
    """The file opened under a new name and a request near its end answered, then a request at
    once at the end of a line in its middle (``middle_line``, as open_case's)."""
    rows, out = text.split("\n"), []
    end = next(i for i in range(len(rows) - 50, 0, -1) if rows[i].strip())
    for i in range(requests):
        line = middle_line(rows, i)
        uri = bench.open(f"jump-{i}.py", text)
        await request_at(bench, uri, end, len(rows[end]))
        out.append(await request_at(bench, uri, line, len(rows[line])))
        bench.close(uri)
    return out


async def rest_case(bench: Bench, text: str, requests: int) -> list[dict[str, Any]]:
    """The file opened under a new name, the cursor resting REST_S at a random line's end (the
    server told so), then a request there."""
    rows = text.split("\n")
    lines = [i for i in range(200, len(rows) - 200) if rows[i].strip()]
    pick, out = random.Random(0), []
    for i in range(requests):
        line = pick.choice(lines)
        uri = bench.open(f"rest-{i}.py", text)
        where = {"line": line, "character": len(rows[line])}
        bench.client.protocol.notify(
            "superposed/cursorRest", {"textDocument": {"uri": uri}, "position": where}
        )
        await asyncio.sleep(REST_S)
        out.append(await request_at(bench, uri, line, len(rows[line])))
        bench.close(uri)
    return out


def medians(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Each field's median over the requests that made a model call."""
    called = [r for r in rows if r["model_call"]]
    result = {f: statistics.median(r[f] for r in called) for f in FIELDS} if called else {}
    if called:
        ratios = [r["forwards"] / max(1, r["shown_tokens"]) for r in called]
        result["forwards_per_shown_token"] = statistics.median(ratios)
    return {"n": len(called), **result}


async def run(
    model: str, requests: int, settings: dict[str, Any], sources: Path | None = None
) -> dict[str, Any]:
    """Both cases on one server (``sources``: its code from there, an earlier commit's)."""
    text = LONG_SOURCE.read_text()
    with tempfile.TemporaryDirectory(prefix="cold-request-") as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        options = {"model": model, "userStore": False, **settings}
        async with server(workspace, Path(tmp) / "data", options, sources) as client:
            bench = Bench(client, workspace)
            await bench.wait_ready()
            compiled = await bench.wait_compiled(COMPILE_WAIT_S)
            await bench.walk("warmup", SHORT, [len(SHORT.split("\n")) - 2])  # one-time costs
            cases = {
                "open": await open_case(bench, text, requests),
                "jump": await jump_case(bench, text, requests),
                "rest": await rest_case(bench, text, requests),
            }
            stats = await bench.stats()
    return {
        "model": model,
        "settings": stats["settings"],
        "compiled_step": compiled,
        "requests": requests,
        "cases": {name: medians(rows) for name, rows in cases.items()},
        "per_request": cases,
    }


async def side_by_side(
    model: str,
    requests: int,
    settings: dict[str, Any],
    ref: str | None,
    rounds: int,
    versus: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The checkout's server and the server of commit ``ref`` (or the checkout's with the
    ``versus`` settings), ``rounds`` runs each in the order ABBA... (a drift of the load
    falls on both alike); each side's requests pooled."""
    other = ref or json.dumps(versus)
    sides: dict[str, list[dict[str, Any]]] = {"this": [], other: []}
    order = [w for r in range(rounds) for w in (("this", other) if r % 2 == 0 else (other, "this"))]
    with tempfile.TemporaryDirectory(prefix="cold-before-") as tmp:
        then = sources_at(ref, Path(tmp) / "before") if ref else None
        for which in order:
            if which == "this":
                sides[which].append(await run(model, requests, settings))
            else:
                sides[which].append(
                    await run(model, requests, {**settings, **(versus or {})}, then)
                )
    result = {**sides["this"][0], "order": order, "before": other}
    result["per_request"] = {
        side: {case: [r for run in runs for r in run["per_request"][case]] for case in CASES}
        for side, runs in (("this", sides["this"]), ("before", sides[other]))
    }
    result["sides"] = {
        side: {case: medians(rows) for case, rows in cases.items()}
        for side, cases in result["per_request"].items()
    }
    result["cases"] = result["sides"]["this"]
    return result


def markdown(result: dict[str, Any]) -> str:
    settings = result["settings"]
    sides = result.get("sides", {"this": result["cases"]})
    rows = [
        [f"{name}{'' if side == 'this' else ', ' + result['before']}", c["n"]]
        + [*(f"{c[f]:.0f}" for f in FIELDS), f"{c['forwards_per_shown_token']:.2f}"]
        for name in CASES
        for side, cases in sides.items()
        if (c := cases[name])["n"]
    ]
    order = ""
    if "before" in result:
        other = (
            f"the same server with the settings {result['before']}"
            if result["before"].startswith("{")
            else f"the server of commit {result['before']}"
        )
        order = (
            f" Side by side with {other} (its rows name it), "
            f"runs in the order {', '.join(result['order'])}, each side's requests pooled."
        )
    return "\n".join(
        [
            "# Where a cold request's time goes (issue 54)",
            "",
            f"Model {result['model']}, k={settings['k']}, maxNewTokens="
            f"{settings['maxNewTokens']}, firstPromptTokens={settings.get('firstPromptTokens')}, "
            f"compiled step: {result['compiled_step']}. Machine: {result['machine']}; load "
            f"average before {result['loadavg_before'][0]:.2f}, after "
            f"{result['loadavg_after'][0]:.2f} (shared: noisy). Medians over the requests that "
            "made a model call. open: the long file opened under a new name, a request at "
            "once; jump: a request near its end answered first, then one there at once; rest: "
            "the cursor rested 1 s there first (`cursorRest`). Overhead: request to "
            "response less the model call's phases (prompt, prefill, decode, ranking)." + order,
            "",
            table(
                ["case", "n", *FIELDS.values(), "forwards / token shown"],
                rows,
                align="lr" + "r" * (len(FIELDS) + 1),
            ),
            "",
            f"Command: `{result['command']}`",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.cold_request", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--requests", type=int, default=8, help="requests per case")
    parser.add_argument("--settings", type=json.loads, default={}, metavar="JSON")
    parser.add_argument("--out", type=Path, default=RESULTS / "cold_request")
    parser.add_argument("--before", metavar="REF", help="also the server at this commit, ABBA")
    parser.add_argument("--versus", type=json.loads, metavar="JSON", help="also these settings")
    parser.add_argument("--rounds", type=int, default=2, help="with --before: runs per side")
    args = parser.parse_args(argv)
    before = os.getloadavg()
    if args.before or args.versus:
        both = side_by_side(
            args.model, args.requests, args.settings, args.before, args.rounds, args.versus
        )
        result = asyncio.run(both)
    else:
        result = asyncio.run(run(args.model, args.requests, args.settings))
    result["loadavg_after"] = os.getloadavg()
    save(result, before, args.out, "cold_request.py", argv, markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
