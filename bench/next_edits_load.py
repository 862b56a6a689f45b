"""Next edits under load (issue 51 item 5): big documents' memory, and a burst of changes.

Each case runs a server of its own over stdio (``lsp_server.cli``, the tiny model,
``SUPERPOSED_TEST_TINY_MODEL=1``: next edits read no model; completions are timed for their
wait only), with ``nextEdits`` on, scope ``open``:

- **big documents**: a small document holding a rename's sites and ``--big`` documents of
  ``--big-kb`` KB (Python, each its own, with sites of the rename every ~40 lines) are
  opened; the rename is typed in the small one and its proposals awaited; then the big
  documents close. Resident MiB (``superposed.stats``) once loaded, after opening, after the
  proposals, after closing; ``--big-kb`` above ``maxFileBytes`` (1,000 KB) or below it;
- **burst**: in a document of ``--burst-kb`` KB, ``--changes`` keystrokes typed at two lines
  in turn within ``--seconds`` (each ends the change before it: a jump), an inline
  completion asked every half second meanwhile in another document; then one keystroke in a
  comment. The time from that keystroke until the server has computed its change (its
  ``next edits: in a comment`` counter, polled; the pause that ends the change, 0.3 s,
  included): what a user who stops typing waits for the last proposals; the changes the
  server computed (its ``next edits: *`` counters); the completions' round trips.

``--before REF`` runs every case on the server of a git commit too (``git archive``);
``--after REF`` puts another commit's server in place of the checkout's.

    python -m bench.next_edits_load --out /tmp/load.json [--before HEAD~3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench.lsp_latency.client import LONG_SOURCE, SERVER, sources_at, summary
from bench.measure import Stamp
from bench.next_edits import Editor, session
from bench.pipeline import Benchmark, run
from bench.tables import table

OPTIONS = {"userStore": False, "nextEdits": True, "nextEditsScope": "open"}
RENAME = "def get_user(uid):\n    return uid\n\n\nfirst = get_user(1)\nsecond = get_user(2)\n"
BURST = RENAME + "alpha = 1\nbeta = 2\n# a comment\n"  # rows 6 and 7 typed in turn, then 8
DRAIN_CAP_S = 600.0  # the longest wait for the burst's last proposals
COMPLETION_EVERY_S = 0.5


def big_text(kb: int) -> str:
    """About ``kb`` KB of real Python (argparse's source over and over), a call of
    ``get_user`` every ~40 lines: sites of the rename everywhere."""
    lines = LONG_SOURCE.read_text(encoding="utf-8").split("\n")
    out: list[str] = []
    size, n = 0, 0
    while size < kb * 1000:
        line = lines[n % len(lines)]
        if n % 40 == 0 and not line.startswith((" ", "\t")):
            line = f"user_{n} = get_user({n})"
        out.append(line)
        size, n = size + len(line) + 1, n + 1
    return "\n".join(out) + "\n"


@contextlib.asynccontextmanager
async def editor_for(tmp: Path, name: str, sources: Path | None) -> AsyncIterator[Editor]:
    """A server of its own (the checkout's, or ``sources``'), its model loaded."""
    workspace = tmp / name / "ws"
    workspace.mkdir(parents=True)
    async with session(workspace, tmp / name / "data", SERVER, OPTIONS, sources) as editor:
        while not (await editor.stats()).get("ready"):
            await asyncio.sleep(0.2)
        yield editor


async def resident(editor: Editor) -> float:
    return float((await editor.stats())["residentMb"]["rss"])


async def rename(editor: Editor, uri: str) -> float:
    """``get_user`` -> ``fetch_user`` at line 0 in one change: ms to its proposals."""
    sent = editor.change(uri, 0, 4, 7, "fetch")
    key = (uri, editor.versions[uri])
    while key not in editor.ready and time.perf_counter() < sent + DRAIN_CAP_S:
        editor.heard.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(editor.heard.wait(), 1.0)
    heard = editor.ready.get(key)
    return (heard[0] - sent) * 1e3 if heard is not None else float("nan")


async def big_documents(tmp: Path, sources: Path | None, big: int, kb: int) -> dict[str, Any]:
    """The big-documents case (see the module)."""
    async with editor_for(tmp, f"big-{kb}", sources) as editor:
        loaded = await resident(editor)
        small = editor.open(editor.workspace / "users.py", RENAME)
        text = big_text(kb)
        # each its own text (a cache keyed by text would parse identical ones once)
        uris = [
            editor.open(editor.workspace / f"big{i}.py", f"# document {i}\n{text}")
            for i in range(big)
        ]
        opened = await resident(editor)
        proposals_ms = await rename(editor, small)
        proposed = await resident(editor)
        for uri in uris:
            editor.close(uri)
        await editor.stats()  # after the closes (one stream, in order)
        closed = await resident(editor)
        peak = float((await editor.stats())["residentMb"]["peak"])
    return {
        "documents": big,
        "document_kb": kb,
        "loaded_mb": loaded,
        "opened_mb": opened,
        "proposed_mb": proposed,
        "closed_mb": closed,
        "peak_mb": peak,
        "proposals_ms": proposals_ms,
    }


async def computed(editor: Editor, sent: float) -> float:
    """ms from ``sent`` until the server has computed the change made in a comment."""
    while time.perf_counter() < sent + DRAIN_CAP_S:
        counters = (await editor.stats()).get("counters") or {}
        if counters.get("next edits: in a comment"):
            return (time.perf_counter() - sent) * 1e3
        await asyncio.sleep(0.05)
    return float("nan")


async def completion_ms(editor: Editor, uri: str, line: int) -> float:
    """One inline completion (invoked) at the end of ``line`` of RENAME: its round trip."""
    from lsprotocol import types

    params = types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line, character=len(RENAME.split("\n")[line])),
        context=types.InlineCompletionContext(
            trigger_kind=types.InlineCompletionTriggerKind.Invoked
        ),
    )
    start = time.perf_counter()
    await editor.client.text_document_inline_completion_async(params)
    return (time.perf_counter() - start) * 1e3


async def completions(editor: Editor, uri: str, stop: asyncio.Event, times: list[float]) -> None:
    """A completion every COMPLETION_EVERY_S until ``stop`` (the last one answered)."""
    while not stop.is_set():
        times.append(await completion_ms(editor, uri, 4))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), COMPLETION_EVERY_S)


async def burst(
    tmp: Path, sources: Path | None, kb: int, changes: int, seconds: float
) -> dict[str, Any]:
    """The burst case (see the module)."""
    async with editor_for(tmp, f"burst-{kb}-{changes}", sources) as editor:
        text = BURST + big_text(kb)
        uri = editor.open(editor.workspace / "edited.py", text)
        other = editor.open(editor.workspace / "other.py", RENAME)
        await completion_ms(editor, other, 4)  # the first model call (warm-up): not counted
        times: list[float] = []
        stop = asyncio.Event()
        asking = asyncio.get_running_loop().create_task(completions(editor, other, stop, times))
        began = time.perf_counter()
        for n in range(changes):  # "alpha" and "beta" grow by a letter, in turn
            row, column = (6, 5 + n // 2) if n % 2 == 0 else (7, 4 + n // 2)
            editor.change(uri, row, column, column, "x")
            await asyncio.sleep(max(0.0, began + seconds * (n + 1) / changes - time.perf_counter()))
        typed_s = time.perf_counter() - began
        during = len(times)
        drained_ms = await computed(editor, editor.change(uri, 8, 11, 11, " x "))
        await asyncio.sleep(2 * COMPLETION_EVERY_S)  # a completion or two after the burst
        stop.set()
        await asking
        counters = (await editor.stats()).get("counters") or {}
    derived = sum(v for k, v in counters.items() if k.startswith("next edits: "))
    return {
        "document_kb": kb,
        "changes": changes,
        "typed_s": typed_s,
        "drained_ms": drained_ms,
        "changes_computed": derived,
        "completions": summary(times) if times else None,
        "completions_during_burst": during,
    }


async def cases(args: argparse.Namespace, sources: Path | None, tmp: Path) -> dict[str, Any]:
    return {
        "big": [await big_documents(tmp, sources, args.big, kb) for kb in args.big_kb],
        "burst": [
            await burst(tmp, sources, args.burst_kb, args.changes, args.seconds),
            await burst(tmp, sources, args.small_kb, args.small_changes, args.small_seconds),
        ],
    }


async def measure_all(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="next-edits-load-") as name:
        tmp = Path(name)
        now = sources_at(args.after, tmp / "src-after") if args.after else None
        servers = {args.after or "this": await cases(args, now, tmp / "this")}
        if args.before:
            then = sources_at(args.before, tmp / "src")
            servers[f"before ({args.before})"] = await cases(args, then, tmp / "before")
    return servers


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, help="results JSON (default: bench/results/)")
    parser.add_argument("--before", metavar="REF", help="also the server of this commit")
    parser.add_argument("--after", metavar="REF", help="this commit's server, not the checkout's")
    parser.add_argument("--big", type=int, default=6, help="big documents opened")
    parser.add_argument("--big-kb", type=int, nargs="+", default=[1250, 900])
    parser.add_argument("--burst-kb", type=int, default=380)
    parser.add_argument("--changes", type=int, default=127)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--small-kb", type=int, default=20)
    parser.add_argument("--small-changes", type=int, default=349)
    parser.add_argument("--small-seconds", type=float, default=10.0)


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    stamp = Stamp(model="none (next edits read no model; the server runs the tiny one)")
    return {"settings": OPTIONS, "servers": asyncio.run(measure_all(args))}, stamp


def report(result: dict[str, Any]) -> list[str]:
    big_rows, burst_rows = [], []
    for server, found in result["servers"].items():
        for b in found["big"]:
            big_rows.append(
                [server, f"{b['documents']} x {b['document_kb']} KB"]
                + [f"{b[k]:.0f}" for k in ("loaded_mb", "opened_mb", "proposed_mb", "closed_mb")]
                + [f"{b['closed_mb'] - b['loaded_mb']:+.0f}", f"{b['proposals_ms']:.0f}"]
            )
        for b in found["burst"]:
            c = b["completions"] or {}
            burst_rows.append(
                [server, f"{b['changes']} in {b['typed_s']:.1f} s, {b['document_kb']} KB"]
                + [f"{b['drained_ms']:.0f}", b["changes_computed"]]
                + [f"{c.get('p50_ms', 0):.0f}", f"{c.get('max_ms', 0):.0f}", c.get("n", 0)]
            )
    return [
        table(
            [
                "server",
                "big documents",
                "loaded MiB",
                "opened MiB",
                "proposed MiB",
                "closed MiB",
                "closed - loaded",
                "keystroke -> proposals ms (pause included)",
            ],
            big_rows,
        ),
        "",
        table(
            [
                "server",
                "burst",
                "last keystroke -> computed ms",
                "changes computed",
                "completion p50 ms",
                "completion max ms",
                "completions",
            ],
            burst_rows,
        ),
    ]


BENCH = Benchmark("next_edits_load", __doc__.splitlines()[0], options=options)


def main(argv: list[str] | None = None) -> int:
    run(BENCH, measure, report, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
