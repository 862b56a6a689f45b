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


def sample_file(lines: int) -> str:
    """This repository's own Python sources, concatenated to ``lines`` lines."""
    rows: list[str] = []
    for path in sorted((ROOT / "lsp_server").rglob("*.py")):
        rows.extend(path.read_text().split("\n"))
        if len(rows) >= lines:
            break
    return "\n".join(rows[:lines]) + "\n"


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    stamp = Stamp(model="none (tree-sitter only)")
    text, rows = sample_file(args.lines), []
    for fraction in (0.1, 0.5, 0.9):  # at the end of a line a tenth..9/10 in: a parse each
        line = int(args.lines * fraction)
        offset = sum(len(r) + 1 for r in text.split("\n")[: line + 1]) - 1
        before, following = text[:offset], text[offset:]
        for language in ("python", ""):  # the grammar, and the text-only rules
            ms = median_ms(partial(syntax.decide, before, following, language), args.runs)
            decision = syntax.decide(before, following, language)
            label = language or "(none: text rules)"
            rows.append({"cursor": f"line {line}", "language": label,
                         "median_ms": round(ms, 3), "decision": decision})  # fmt: skip
    data, parser = text.encode(), syntax.parser_for("python")
    parse_ms = round(median_ms(lambda: parser.parse(data), args.runs), 3)
    return {"lines": args.lines, "bytes": len(data), "runs": args.runs,
            "whole_file_parse_ms": parse_ms, "decide": rows}, stamp  # fmt: skip


def report(result: dict[str, Any]) -> list[str]:
    lines = [
        f"{r['cursor']:10} {r['language'].replace('(none: text rules)', 'text'):7} "
        f"{r['median_ms']:7.3f} ms  {r['decision']}"
        for r in result["decide"]
    ]
    n, size, ms = result["lines"], result["bytes"], result["whole_file_parse_ms"]
    return [*lines, f"a whole-file parse: {ms:.3f} ms for {n} lines, {size} bytes"]


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lines", type=int, default=2_000, help="of the sample file")
    parser.add_argument("--runs", type=int, default=50, help="timings per median")
    parser.add_argument("--out", help="results file (default bench/results/syntax_cost.json)")


BENCH = Benchmark("syntax_cost", __doc__.splitlines()[0], options=options)


def main(argv: list[str] | None = None) -> None:
    run(BENCH, measure, report, argv)


if __name__ == "__main__":
    main()
