"""What ``lineMode: auto`` costs a request: the syntax decision (lsp_server/syntax.py) on a
2,000-line Python file, a full tree-sitter parse each time, at a few cursors.

    python -m bench.syntax_cost        # writes bench/results/syntax_cost.json
"""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

from bench.measure import ROOT, Stamp, median_ms
from bench.pipeline import Benchmark, run
from lsp_server import syntax

LINES = 2_000
RUNS = 50


def sample_file(lines: int = LINES) -> str:
    """This repository's own Python sources, concatenated to ``lines`` lines."""
    rows: list[str] = []
    for path in sorted((ROOT / "lsp_server").rglob("*.py")):
        rows.extend(path.read_text().split("\n"))
        if len(rows) >= lines:
            break
    return "\n".join(rows[:lines]) + "\n"


def decisions(text: str, lines: int, runs: int) -> list[dict[str, Any]]:
    """The decision and its median ms at the end of a line a tenth, half and 9/10 in, with the
    grammar and with the text-only rules: a parse each."""
    rows = []
    for fraction in (0.1, 0.5, 0.9):
        line = int(lines * fraction)
        offset = sum(len(r) + 1 for r in text.split("\n")[: line + 1]) - 1
        before, following = text[:offset], text[offset:]
        for language in ("python", ""):
            ms = median_ms(partial(syntax.decide, before, following, language), runs)
            rows.append(
                {
                    "cursor": f"line {line}",
                    "language": language or "(none: text rules)",
                    "median_ms": round(ms, 3),
                    "decision": syntax.decide(before, following, language),
                }
            )
    return rows


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    stamp = Stamp(model="none (tree-sitter only)")
    text = sample_file(args.lines)
    data = text.encode()
    parser = syntax._parser("python")
    return {
        "lines": args.lines,
        "bytes": len(data),
        "runs": args.runs,
        "whole_file_parse_ms": round(median_ms(lambda: parser.parse(data), args.runs), 3),
        "decide": decisions(text, args.lines, args.runs),
    }, stamp


def report(result: dict[str, Any]) -> list[str]:
    lines = []
    for r in result["decide"]:
        language = "python" if r["language"] == "python" else "text"
        lines.append(f"{r['cursor']:10} {language:7} {r['median_ms']:7.3f} ms  {r['decision']}")
    parse_ms, n, size = result["whole_file_parse_ms"], result["lines"], result["bytes"]
    return [*lines, f"a whole-file parse: {parse_ms:.3f} ms for {n} lines, {size} bytes"]


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lines", type=int, default=LINES, help="of the sample file")
    parser.add_argument("--runs", type=int, default=RUNS, help="timings per median")
    parser.add_argument("--out", help="results file (default bench/results/syntax_cost.json)")


BENCH = Benchmark("syntax_cost", __doc__.splitlines()[0], options=options)


def main(argv: list[str] | None = None) -> None:
    run(BENCH, measure, report, argv)


if __name__ == "__main__":
    main()
