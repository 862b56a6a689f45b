"""One server's full run: the short file, the long file, typing along (and the 1,500-token typing
target), with the other cases on the same server."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.lsp_latency.client import (
    COMPILE_WAIT_S,
    LONG_SOURCE,
    SERVER,
    SHORT,
    Bench,
    server,
    summary,
)
from bench.lsp_latency.cursor_rest import cursor_rest_case
from bench.lsp_latency.first_request import first_request_case

TYPING_1500 = "inline k=3, typing along with a 1,500-token prompt (model calls)"


def prompt_1500_line(rows: list[str]) -> int:
    """The first line whose preceding text is about 1,500 tokens (3.6 characters a token)."""
    chars = 0
    for i, row in enumerate(rows):
        chars += len(row) + 1
        if chars >= 1500 * 3.6:
            return i + 1
    raise ValueError("the long file is too short")


def typing_target(calls: list[tuple[float, dict[str, float]]]) -> dict[str, Any]:
    """p50 request-to-response over p50 of the same calls' decoding steps (target <= 1.3)."""
    elapsed = [e for e, _ in calls]
    steps = [t["steps"] for _, t in calls]
    prefill = [t["prefill"] for _, t in calls]
    return {
        "calls": len(calls),
        "p50_request_ms": statistics.median(elapsed),
        "p50_steps_ms": statistics.median(steps),
        "p50_prefill_ms": statistics.median(prefill),
        "ratio_p50": statistics.median(elapsed) / statistics.median(steps),
        "per_call": [{"request_ms": e, **t} for e, t in calls],
    }


async def run(
    model: str,
    requests: int,
    k: int,
    settings: dict[str, Any] | None = None,
    sources: Path | None = None,
    command: Sequence[str] = SERVER,
) -> dict[str, Any]:
    """The latency cases on one server; ``settings``: server settings over the defaults;
    ``sources``: the server's code from there (an earlier commit's), not this checkout;
    ``command``: another server (a test's fake)."""
    long_text = LONG_SOURCE.read_text()
    with tempfile.TemporaryDirectory(prefix="lsp-latency-") as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        started = time.perf_counter()
        options = {"model": model, "k": k, "userStore": False, **(settings or {})}
        # A fresh, empty user store under tmp/data.
        async with server(
            workspace, Path(tmp) / "data", options, sources, command=command
        ) as client:
            bench = Bench(client, workspace)
            await bench.wait_ready()
            ready_s = time.perf_counter() - started
            loaded = await bench.stats()  # the model loaded, no request yet
            # every case's settings but the last's (the 1,500-token prompt changes them)
            run_settings, loaded_memory = loaded["settings"], loaded["residentMb"]
            compiled_state = await bench.wait_compiled(COMPILE_WAIT_S)
            # Warm-up: the first request pays one-time costs (allocations, lazy imports).
            await bench.walk("warmup", SHORT, [len(SHORT.split("\n")) - 2])
            short_lines = len(SHORT.split("\n"))
            short = await bench.walk(
                "short", SHORT, [short_lines - 1 - (i % (short_lines - 2)) for i in range(requests)]
            )
            long_rows = len(long_text.split("\n"))
            step = 7  # lines apart: a different prompt each time, as when moving through a file
            long = await bench.walk(
                "long", long_text, [long_rows - 40 - step * i for i in range(requests)]
            )
            typing: list[float] = []
            rows = long_text.split("\n")
            first_cases, first_requests = await first_request_case(bench, long_text, requests)
            rest_cases, cursor_rest = await cursor_rest_case(bench, long_text, requests)
            typed_lines = [
                i for i in range(long_rows - 120, long_rows) if len(rows[i].strip()) >= 40
            ]
            for i in typed_lines[-4:]:  # four long lines near the end of the long file
                typing += [
                    elapsed for elapsed, _ in await bench.type_line(f"typing-{i}", long_text, i)
                ]
            # Issue 7's typing target: a prompt of about 1,500 tokens (the window widened to
            # hold it), typed a few characters at a time; each model call's time against the
            # drafts' own decoding steps in the server, for the same calls. firstPromptTokens 0:
            # each line starts on a cold cache and is typed without a pause, so with the default
            # the prompts would be the short window, not the 1,500 tokens this case is about.
            typing_1500 = {**options, "maxPromptTokens": 2048}
            await bench.configure({**typing_1500, "firstPromptTokens": 0})
            along_1500: list[tuple[float, dict[str, float]]] = []
            first = prompt_1500_line(rows)
            for n, i in enumerate(
                j for j in range(first, first + 60) if len(rows[j].strip()) >= 30
            ):
                if n == 6:
                    break
                along_1500 += await bench.type_line(f"typing-1500-{i}", long_text, i, chunk=3)
            stats = await bench.stats()
    return {
        "model": stats["model"],
        "k": k,
        "settings": run_settings,
        "server_ready_s": ready_s,
        "short_file_lines": short_lines,
        "long_file": {"path": str(LONG_SOURCE), "lines": long_rows},
        "cases": {
            "inline k=3, short file": summary(short["model"]),
            "inline k=3, long file": summary(long["model"]),
            "inline k=3, long file, typing a line (model calls)": summary(typing),
            "typed along (no model call)": summary(short["along"] + long["along"]),
            TYPING_1500: summary([elapsed for elapsed, _ in along_1500]),
            **first_cases,
            **rest_cases,
        },
        "typing_1500": typing_target(along_1500),
        "first_request": first_requests,
        "cursor_rest": cursor_rest,
        "compiled_step": compiled_state,
        # resident MiB: after loading the model, after every request, and the peak
        "memory_mb": {
            "loaded": loaded_memory["rss"],
            "end": stats["residentMb"]["rss"],
            "peak": stats["residentMb"]["peak"],
        },
        "drafts_per_request_mean": statistics.mean(short["drafts"] + long["drafts"]),
        "counters": stats["counters"],
        "loadavg_after": os.getloadavg(),
    }
