"""Memory given back (issue 51 item 7): a server's resident memory after documents close and
requests end, against its level once the model loaded.

    python -m bench.memory_back [--docs 300] [--model smollm2-135m] [--before REF]
        [--server-env NAME=VALUE ...]

One server (compile off: the compiled step's load would move the baseline) loads the model;
then documents are opened a few at a time, each asked for drafts at two places (one asked
twice at once, the first cancelled by the second, as fast typing does), typed in, saved
every tenth, and closed. Resident MiB (``superposed.stats``' residentMb) is read once the
model is in, at the workload's end with every document closed, and after IDLE_S of quiet.
The target: after the quiet, within TARGET_MB of the level once loaded. ``--before REF``
runs the same on the server of commit REF, side by side; ``--server-env`` runs the servers
with more environment (an allocator or library setting under trial).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types

from bench.lsp_latency.client import LONG_SOURCE, Bench, server, sources_at
from bench.measure import RESULTS, Stamp, write_results
from bench.tables import table

TARGET_MB = 50  # issue 51: back to within this much of the level once the model loaded
IDLE_S = 3.0  # quiet after the last document closed, before the last reading
OPEN_AT_ONCE = 4  # documents open at a time
LINES = 300  # lines of LONG_SOURCE in each document


def documents(count: int) -> list[str]:
    """``count`` documents: windows of LINES lines over a long real module, each different."""
    rows = LONG_SOURCE.read_text().split("\n")
    step = max(1, (len(rows) - LINES) // max(1, count))
    return ["\n".join(rows[(i * step) % (len(rows) - LINES) :][:LINES]) for i in range(count)]


async def workload(bench: Bench, texts: list[str]) -> int:
    """Open, ask, type, save and close every text; the requests sent."""
    sent = 0
    for first in range(0, len(texts), OPEN_AT_ONCE):
        uris = []
        for n, text in enumerate(texts[first : first + OPEN_AT_ONCE], start=first):
            (bench.workspace / f"doc{n}.py").write_text(text)
            uri = bench.open(f"doc{n}.py", text)
            uris.append(uri)
            rows = text.split("\n")
            line = len(rows) // 2
            at = types.Position(line=line, character=len(rows[line]))
            # Fast typing: a request, and a newer one at once that cancels it.
            older = asyncio.ensure_future(bench.inline(uri, at))
            await bench.inline(uri, at)
            await older
            bench.type_text(uri, at, " x")
            await bench.inline(uri, types.Position(line=line, character=at.character + 2))
            sent += 3
            if n % 10 == 0:
                bench.client.text_document_did_save(
                    types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri=uri))
                )
        for uri in uris:
            bench.close(uri)
    return sent


async def one_server(
    model: str, docs: int, sources: Path | None, env: dict[str, str]
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memory-back-") as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        options = {"model": model, "compile": "off", "userStore": False}
        async with server(workspace, Path(tmp) / "data", options, sources, env) as client:
            bench = Bench(client, workspace)
            await bench.wait_ready()
            loaded = (await bench.stats())["residentMb"]["rss"]
            start = time.perf_counter()
            sent = await workload(bench, documents(docs))
            seconds = time.perf_counter() - start
            stats = await bench.stats()
            closed = stats["residentMb"]["rss"]
            await asyncio.sleep(IDLE_S)  # quiet: what an idle server holds
            idle = (await bench.stats())["residentMb"]
    return {
        "documents": docs,
        "requests": sent,
        "model_calls": stats["counters"].get("model_calls", 0),
        "workload_s": round(seconds, 1),
        "loaded_mb": loaded,
        "closed_mb": closed,
        "idle_mb": idle["rss"],
        "peak_mb": idle["peak"],
        "held_mb": round(idle["rss"] - loaded, 1),
        "meets_target": idle["rss"] - loaded <= TARGET_MB,
    }


def markdown(result: dict[str, Any]) -> str:
    stamp = result["stamp"]
    rows = [
        [
            name,
            str(case["documents"]),
            str(case["requests"]),
            f"{case['loaded_mb']:.0f}",
            f"{case['closed_mb']:.0f}",
            f"{case['idle_mb']:.0f}",
            f"{case['held_mb']:+.0f}",
            f"{case['peak_mb']:.0f}",
            "yes" if case["meets_target"] else "no",
        ]
        for name, case in result["cases"].items()
    ]
    header = [
        "server",
        "documents",
        "requests",
        "loaded MiB",
        "all closed MiB",
        f"after {IDLE_S:.0f} s quiet MiB",
        "held MiB",
        "peak MiB",
        f"held <= {TARGET_MB}",
    ]
    return "\n".join(
        [
            "# Memory given back (bench/memory_back.py, issue 51 item 7)",
            "",
            f"{stamp['command']} at {stamp['commit']}, {stamp['date']}, {stamp['machine']} "
            f"(load {stamp['load_start']} -> {stamp['load_end']}), model {stamp['model']}.",
            "",
            "Resident memory of one server (`superposed.stats`' residentMb) once the model "
            "loaded, after documents were opened a few at a time, asked for drafts (one "
            "request of each pair cancelled by the next), typed in, saved and closed, and "
            f"after {IDLE_S:.0f} s of quiet. Held: the last reading less the first; the "
            f"target is at most {TARGET_MB} MiB.",
            "",
            table(header, rows, "lrrrrrrrl"),
            "",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.memory_back")
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--before", default=None, metavar="REF")
    parser.add_argument("--server-env", nargs="*", default=[], metavar="NAME=VALUE")
    parser.add_argument("--out", type=Path, default=RESULTS / "memory_back")
    args = parser.parse_args(argv)
    env = dict(item.split("=", 1) for item in args.server_env)
    started, stamp = time.perf_counter(), Stamp(model=args.model)
    said = "".join(f" {name}={value}" for name, value in env.items())
    cases = {f"this commit{said}": asyncio.run(one_server(args.model, args.docs, None, env))}
    if args.before is not None:
        with tempfile.TemporaryDirectory(prefix="memory-back-before-") as tmp:
            then = sources_at(args.before, Path(tmp) / "before")
            run = one_server(args.model, args.docs, then, env)
            cases[f"before ({args.before}){said}"] = asyncio.run(run)
    result = {"stamp": stamp.finish(started), "cases": cases}
    write_results(args.out, result, markdown)


if __name__ == "__main__":
    main()
