"""What next edits cost the server (no model): a keystroke in the edit log, and an ended
change to its proposals (pattern, sites in the open documents, privacy verdicts), in-process.

Issue 35's target: proposals ready <= 100 ms after a change ends. The documents are this
repository's own Python sources, concatenated to ``--lines`` lines each, ``--documents`` of
them open; the edits are made on the first one's real lines (a rename of a name used in
several files, an argument added to a call, a changed string). The time through a real
server over stdio (a notification's arrival after the pause) is bench/next_edits.py's.

    flock /tmp/bench.lock python -m bench.next_edits_speed   # bench/results/next_edits_speed.json
"""

from __future__ import annotations

import argparse
import re
import time
from typing import Any

from bench.measure import ROOT, Stamp, median_ms, percentile
from bench.pipeline import Benchmark, run
from lsp_server.next_edits.log import EditLog
from lsp_server.next_edits.proposals import Doc, NextEdits

# (kind, a line's text that the sample holds, the same line edited)
EDITS = [
    ("rename", r"^(\s*def )(_doc_key)(\(.*)$", "document_key"),
    ("argument", r"^(.*\bassert_pattern\(.*?)(\))(.*)$", None),
    ("string", r"^(.*)(\"superposed/status\")(.*)$", '"superposed/state"'),
]


def sample_files(lines: int, count: int) -> list[str]:
    """``count`` texts of ``lines`` lines each, from this repository's Python sources (the
    first one from lsp_server, where the edits' lines are)."""
    rows: list[str] = []
    for path in sorted((ROOT / "lsp_server").rglob("*.py")):
        rows.extend(path.read_text().split("\n"))
    for path in sorted((ROOT / "tests").rglob("*.py")):
        rows.extend(path.read_text().split("\n"))
    step = max(1, (len(rows) - lines) // max(1, count))
    return ["\n".join(rows[i * step : i * step + lines]) + "\n" for i in range(count)]


def edited(text: str, pattern: str, new: str | None) -> tuple[str, str] | None:
    """``text`` with the first line matching ``pattern`` edited (its group 2 replaced by
    ``new``; None: an argument added before its closing bracket), and the kind's label."""
    found = re.search(pattern, text, re.MULTILINE)
    if found is None:
        return None
    replacement = new if new is not None else ", None)"
    return text[: found.start(2)] + replacement + text[found.end(2) :], found.group(2)


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    stamp = Stamp(model="none (next edits need no model)")
    texts = sample_files(args.lines, args.documents)
    texts[0] = texts[0].replace("\n\n\n", "\n\ndef _doc_key(uri):\n    return uri\n\n\n", 1)
    texts[0] += 'STATUS = "superposed/status"\nassert_pattern(x)\n' * 3
    docs = {f"file:///ws/doc{i}.py": Doc(t, 1, "python") for i, t in enumerate(texts)}
    first = "file:///ws/doc0.py"
    rows = []
    for kind, pattern, new in EDITS:
        made = edited(texts[0], pattern, new)
        if made is None:
            raise SystemExit(f"the sample has no line for the {kind} edit: {pattern}")
        times, sites = [], 0
        for i in range(args.runs):
            # a new text each run, as each change makes: the edited document is parsed
            # again (the other open ones, unchanged, are not: tokens.prose_of keeps them)
            before, after = texts[0] + f"# run {i}\n", made[0] + f"# run {i}\n"
            edits = NextEdits()
            edits.log.open(first, before)
            edits.log.changed(first, after, 2)
            change = edits.log.end(first)
            assert change is not None
            began = time.perf_counter()
            edits.ended(change, "python")
            now = {**docs, first: Doc(after, 2, "python")}
            row = after.count("\n", 0, change.start)
            proposals = edits.propose(first, row, now, "open", lambda u, t: True)
            times.append((time.perf_counter() - began) * 1000)
            sites = len(proposals)
        rows.append({"kind": kind, "proposals": sites, "p50_ms": round(percentile(times, 50), 2),
                     "max_ms": round(max(times), 2)})  # fmt: skip
    log = EditLog()
    log.open(first, texts[0])
    text = texts[0]
    middle = len(text) // 2

    def keystroke() -> None:
        nonlocal text
        text = text[:middle] + "x" + text[middle:]
        log.changed(first, text, 2)

    key_ms = median_ms(keystroke, args.runs)
    result = {"lines": args.lines, "documents": args.documents, "runs": args.runs,
              "chars": len(texts[0]), "keystroke_ms": round(key_ms, 3), "ended": rows}  # fmt: skip
    return result, stamp


def report(result: dict[str, Any]) -> list[str]:
    n, d = result["lines"], result["documents"]
    lines = [f"{d} open documents of {n} lines; a keystroke in the log: "
             f"{result['keystroke_ms']:.3f} ms"]  # fmt: skip
    for r in result["ended"]:
        lines.append(f"{r['kind']:9} {r['proposals']:3} proposals  p50 {r['p50_ms']:7.2f} ms"
                     f"  max {r['max_ms']:7.2f} ms")  # fmt: skip
    return lines


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lines", type=int, default=2_000, help="of each open document")
    parser.add_argument("--documents", type=int, default=5, help="open documents")
    parser.add_argument("--runs", type=int, default=20, help="timings per kind")
    parser.add_argument("--out", help="results file (default bench/results/next_edits_speed.json)")


BENCH = Benchmark("next_edits_speed", __doc__.splitlines()[0], options=options)


def main(argv: list[str] | None = None) -> None:
    run(BENCH, measure, report, argv)


if __name__ == "__main__":
    main()
