"""Which ``debounceMs`` default: a typing burst against the server, per debounce value.

A client (bench/lsp_latency.py's) types lines of a real module one character at a time, a
keystroke every ``--interval-ms`` ms, and asks for inline drafts after every keystroke
without waiting for the answer, as VS Code does. For each debounce value, in one run:

- model calls started per typed line (each a prefill and decoding steps on the one engine
  thread; a superseded call is stopped at its next step, but its work so far is spent);
- the wait after the last keystroke of a line for its answer (what the user waits for);
- the wait for a lone request after a pause (debounce adds to it in full).

Prints and writes bench/results/lsp_debounce.json and .md.

    .venv/bin/python -m bench.lsp_debounce [--values 0,50,100,150] [--lines 3] [--interval-ms 100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types

from bench.lsp_latency import LONG_SOURCE, RESULTS, Bench, save, server
from bench.tables import table


async def burst(bench: Bench, name: str, rows: list[str], line: int, interval_s: float) -> float:
    """Type line ``line`` a character at a time, a request per keystroke; the last one's wait."""
    uri = bench.open(f"{name}.py", "\n".join(rows[:line]) + "\n")
    at = types.Position(line=line, character=0)
    pending: list[asyncio.Task[tuple[float, list[str]]]] = []
    for char in rows[line]:
        bench.type_text(uri, at, char)
        at = types.Position(line=line, character=at.character + 1)
        pending.append(asyncio.create_task(bench.inline(uri, at)))
        await asyncio.sleep(interval_s)
    last_key = time.perf_counter() - interval_s
    await asyncio.gather(*pending)
    # The last request was sent right after the last keystroke and answered last.
    return (time.perf_counter() - last_key) * 1e3


async def measure(
    bench: Bench, model: str, value: int, rows: list[str], lines: list[int], interval_s: float
) -> dict[str, Any]:
    # The whole section: a setting left out returns to its default (compile would reload).
    await bench.configure(
        {"model": model, "compile": "off", "userStore": False, "debounceMs": value}
    )
    before = (await bench.stats())["counters"]
    last_waits = [await burst(bench, f"d{value}-{i}", rows, i, interval_s) for i in lines]
    after = (await bench.stats())["counters"]
    lone = []
    for i in lines:  # after a pause: one request at the end of a line, a new prompt each
        uri = bench.open(f"lone-{value}-{i}.py", "\n".join(rows[: i + 1]))
        elapsed, _ = await bench.inline(uri, types.Position(line=i, character=len(rows[i])))
        lone.append(elapsed)
    calls = after.get("model_calls", 0) - before.get("model_calls", 0)
    keys = sum(len(rows[i]) for i in lines)
    return {
        "debounce_ms": value,
        "keystrokes": keys,
        "model_calls": calls,
        "model_calls_per_line": calls / len(lines),
        "last_key_to_answer_p50_ms": statistics.median(last_waits),
        "last_key_to_answer_ms": last_waits,
        "lone_request_p50_ms": statistics.median(lone),
    }


async def run(model: str, values: list[int], n_lines: int, interval_ms: float) -> dict[str, Any]:
    rows = LONG_SOURCE.read_text().split("\n")
    # Lines of 30-60 characters near the end: ~1,000-token prompts, as in lsp_latency.py.
    lines = [i for i in range(len(rows) - 200, len(rows)) if 30 <= len(rows[i].strip()) <= 60]
    lines = lines[-n_lines:]
    with tempfile.TemporaryDirectory(prefix="lsp-debounce-") as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        options = {"model": model, "userStore": False, "compile": "off"}
        async with server(workspace, Path(tmp) / "data", options) as client:
            bench = Bench(client, workspace)
            await bench.wait_ready()
            await burst(bench, "warmup", rows, lines[0] - 1, interval_ms / 1000)
            results = [
                await measure(bench, model, v, rows, lines, interval_ms / 1000) for v in values
            ]
            stats = await bench.stats()
    return {
        "model": stats["model"],
        "interval_ms": interval_ms,
        "lines": lines,
        "results": results,
        "loadavg_after": os.getloadavg(),
    }


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# debounceMs: a typing burst against the server",
        "",
        f"Model {result['model']}, compile off, lines {result['lines']} of "
        f"{LONG_SOURCE.name} typed one character every {result['interval_ms']:.0f} ms, an "
        "inline request after every keystroke (not awaited, as VS Code sends them). "
        f"Machine: {result['machine']}; load average before {result['loadavg_before'][0]:.2f}, "
        f"after {result['loadavg_after'][0]:.2f} (shared: noisy).",
        "",
        table(
            ["debounceMs", "keystrokes", "model calls", "calls per line"]
            + ["p50 last key to answer ms", "p50 lone request ms"],
            [
                [r["debounce_ms"], r["keystrokes"], r["model_calls"]]
                + [f"{r['model_calls_per_line']:.1f}", f"{r['last_key_to_answer_p50_ms']:.0f}"]
                + [f"{r['lone_request_p50_ms']:.0f}"]
                for r in result["results"]
            ],
            align="rrrrrr",
        ),
        "",
        f"Command: `{result['command']}`",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument(
        "--values", default="0,50,100,150", help="debounceMs values, comma-separated"
    )
    parser.add_argument("--lines", type=int, default=3, help="lines typed per value")
    parser.add_argument("--interval-ms", type=float, default=100.0, help="between keystrokes")
    parser.add_argument("--out", type=Path, default=RESULTS / "lsp_debounce")
    args = parser.parse_args(argv)
    values = [int(v) for v in args.values.split(",")]
    before = os.getloadavg()
    result = asyncio.run(run(args.model, values, args.lines, args.interval_ms))
    save(result, before, args.out, "lsp_debounce.py", argv, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
