"""End-to-end latency of the language server over stdio, default model (not a timed test).

A real client (pytest-lsp's, outside pytest) starts ``superposed-lsp``, opens documents and
times each ``textDocument/inlineCompletion`` request from send to response, k=3:

- short file: a 20-line module, the cursor at the end of successive lines (the user moves
  down the file; each request is a new prompt);
- long file: a 2,000+ line standard-library module, the cursor at the ends of lines near
  its end (the prompt is the last ``maxPromptTokens`` tokens);
- typed along: after each answer, the user types the next 1..3 characters of the first
  draft and asks again; the answer comes from the drafts already shown (no model call);
- first request in a freshly opened file (issue 14): the whole long file opened under a new
  name, a request at once at the end of a line in its middle (1,000+ tokens before it; the
  cache holds nothing of it), then 2.5 s later (the user reads, the server warms up) the user
  moves to the end of the line above and asks again (a model call); the server's defaults;
- the cursor resting (issue 24): the long file opened under a new name, the cursor rests at
  the end of a random line in it for 1 s, the server told so as the plugins tell it
  (``superposed/cursorRest``), then a request there.

The side-by-side runs that chose those defaults (``firstPromptTokens`` 0 against the
warm-up; without and with ``cursorRest``; the next draft after an accept without and with
``triggerOnAccept``) are in history with their results: bench/results/README.md.

Resident memory (issue 14): besides the run above (after loading, at the end, its peak), a
footprint case as the issue measures it: a server of its own loads the model and its compiled
decode step, answers one request and shuts down; its peak and steady (after the request)
resident memory against the target of 600 MB peak. ``--before REF`` runs the same case on
the server of a git commit (its sources extracted with ``git archive``) in the same run;
``--after REF`` puts another commit's server on this side instead of the checkout's.

The package: client.py (the server, its requests and waits), a module per case (walks.py:
short file, long file, typed along, the 1,500-token typing target; first_request.py,
cursor_rest.py, footprint.py; before.py: side by side with another commit's server), and
this driver (the command line, the markdown, save).

Prints and writes p50/p95 (and min/max) per case, with the machine's load average:
bench/results/lsp_latency.json and .md.

    .venv/bin/python -m bench.lsp_latency [--requests 12] [--model smollm2-135m]
        [--before REF [--rounds 2] [--after REF]]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.lsp_latency.before import before_table, pooled, side_by_side
from bench.lsp_latency.client import LONG_SOURCE, Bench, capabilities, server, sources_at, summary
from bench.lsp_latency.cursor_rest import cursor_rest_text
from bench.lsp_latency.first_request import first_request_text
from bench.lsp_latency.footprint import footprint_cases, footprint_table
from bench.lsp_latency.walks import prompt_1500_line, run, typing_target
from bench.measure import RESULTS, git_commit, machine_description
from bench.tables import table

__all__ = [  # what other scripts and the tests use of the cases' modules
    "LONG_SOURCE", "Bench", "before_table", "capabilities", "markdown", "pooled",
    "prompt_1500_line", "save", "server", "sources_at", "summary", "typing_target",
]  # fmt: skip


def markdown(result: dict[str, Any]) -> str:
    t = result["typing_1500"]
    title = "# Language server latency, request to response over stdio"
    if result.get("after"):  # a change's side-by-side run: its own section in the report
        title += f": the server of {result['after']} against {result['before']['ref']}"
    lines = [
        title,
        "",
        f"Model {result['model']}, k={result['k']}, "
        f"maxPromptTokens={result['settings']['maxPromptTokens']}, "
        f"maxNewTokens={result['settings']['maxNewTokens']}, "
        f"prefillCopy={str(result['settings'].get('prefillCopy', False)).lower()}, method "
        f"{result['settings']['method']}, an empty codebase store (lookups run, nothing "
        f"matches), no user store. Machine: {result['machine']}; "
        f"load average before {result['loadavg_before'][0]:.2f}, after "
        f"{result['loadavg_after'][0]:.2f} (the machine is shared: treat as noisy).",
        "",
        table(
            ["case", "n", "p50 ms", "p95 ms", "min ms", "max ms"],
            [
                [name, s["n"], f"{s['p50_ms']:.0f}", f"{s['p95_ms']:.0f}"]
                + [f"{s['min_ms']:.0f}", f"{s['max_ms']:.1f}"]
                for name, s in result["cases"].items()
            ],
            align="lrrrrr",
        ),
    ]
    lines += [
        "",
        f"Short file: {result['short_file_lines']} lines; long file: "
        f"{result['long_file']['lines']} lines ({Path(result['long_file']['path']).name}), "
        "cursor at the end of a different line per request, 7 lines apart (moving up the "
        "file). Typing a line: four lines (40+ characters) near the end of the long file "
        "typed 4 characters at a time, a request after each (only the answers that needed "
        "a model call). Typed along: after each answer the user types up to 3 characters "
        "of the first draft and asks again (a draft of 1 character cannot be typed along: "
        "the max is a model call).",
        f"Server start to model ready: {result['server_ready_s']:.1f} s. "
        f"Mean drafts per answer: {result['drafts_per_request_mean']:.2f}. "
        f"Compiled decode step: {result['compiled_step']} (waited for before measuring).",
        "Server resident memory (MiB): {loaded} after loading the model, {end} after all "
        "requests, {peak} at the peak (issue 14's target: at most 600 peak).".format(
            **result.get("memory_mb", {"loaded": "-", "end": "-", "peak": "-"})
        ),
        "",
        "## Typing along with a 1,500-token prompt (issue 7)",
        "",
        "Six lines after the first ~1,500 tokens of the long file, typed 3 characters at a "
        "time with `maxPromptTokens` 2048; for the requests that needed a model call, the "
        "time from request to response against the server's own time for the drafts' "
        "decoding steps in the same calls (`lastTimingMs.steps`; the prefill of what the "
        "cache lacked is apart). `firstPromptTokens` 0 here: with the default, a line typed "
        "without a pause on a cold cache would be decoded from the short window. "
        "Target: p50 request <= 1.3x p50 steps.",
        "",
        table(
            ["calls", "p50 request ms", "p50 decoding steps ms", "p50 prefill ms", "ratio"],
            [
                [t["calls"], f"{t['p50_request_ms']:.0f}", f"{t['p50_steps_ms']:.0f}"]
                + [f"{t['p50_prefill_ms']:.0f}", f"{t['ratio_p50']:.2f}x"]
            ],
            align="rrrrr",
        ),
        *first_request_text(result),
        *cursor_rest_text(result),
        *footprint_table(result),
        *before_table(result),
        "",
        f"Command: `{result['command']}`",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.lsp_latency", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--requests", type=int, default=12, help="requests per file")
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "lsp_latency")
    parser.add_argument(
        "--before", metavar="REF", help="also measure the server at this commit, side by side"
    )
    parser.add_argument("--rounds", type=int, default=1,
                        help="with --before: each server this many times, ABBA")  # fmt: skip
    parser.add_argument("--after", metavar="REF",
                        help="with --before: this side is the server at this commit, not "
                        "the checkout (uncommitted edits there may be half-done)")  # fmt: skip
    parser.add_argument(
        "--settings",
        type=json.loads,
        default={},
        metavar="JSON",
        help="server settings over the defaults, e.g. '{\"prefillCopy\": true}'",
    )
    parser.add_argument(
        "--report", action="store_true", help="rewrite the markdown from the saved JSON only"
    )
    args = parser.parse_args(argv)
    if args.report:
        saved = json.loads(args.out.with_suffix(".json").read_text())
        args.out.with_suffix(".md").write_text(markdown(saved))
        return 0
    before = os.getloadavg()
    if args.before:
        both = side_by_side(
            args.model, args.requests, args.k, args.settings, args.before, args.rounds, args.after
        )
        result = asyncio.run(both)
    else:
        if args.after:
            parser.error("--after compares with --before: give both")
        result = asyncio.run(run(args.model, args.requests, args.k, args.settings))
    result["footprint"] = asyncio.run(footprint_cases(args.model, args.k, args.before, args.after))
    save(result, before, args.out, "lsp_latency.py", argv, markdown)
    return 0


def save(
    result: dict[str, Any],
    loadavg_before: tuple[float, float, float],
    out: Path,
    script: str,
    argv: list[str] | None,
    markdown: Callable[[dict[str, Any]], str],
) -> None:
    """Stamp ``result`` (load, machine, command), write it as JSON and markdown, print it."""
    result["loadavg_before"] = loadavg_before
    result["machine"] = machine_description()
    result["command"] = f"python -m bench.{Path(script).stem} " + " ".join(argv or sys.argv[1:])
    # When and at which commit (the report's first page names both; ``after`` where the run
    # measured another commit's server).
    result["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    result["commit"] = git_commit()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    report = markdown(result)
    out.with_suffix(".md").write_text(report)
    print(report)
