"""What ``lineMode: auto`` costs a request: the syntax decision (lsp_server/syntax.py) on a
2,000-line Python file, a full tree-sitter parse each time, at a few cursors.

    python -m bench.syntax_cost        # writes bench/results/syntax_cost.json
"""

from __future__ import annotations

import time
from functools import partial

from bench.measure import ROOT, Stamp, median_ms, write_json
from lsp_server import syntax

LINES = 2_000
RUNS = 50
OUT = ROOT / "bench" / "results" / "syntax_cost.json"


def sample_file(lines: int = LINES) -> str:
    """This repository's own Python sources, concatenated to ``lines`` lines."""
    rows: list[str] = []
    for path in sorted((ROOT / "lsp_server").rglob("*.py")):
        rows.extend(path.read_text().split("\n"))
        if len(rows) >= lines:
            break
    return "\n".join(rows[:lines]) + "\n"


def main() -> None:
    started = time.perf_counter()
    stamp = Stamp(model="none (tree-sitter only)")
    text = sample_file()
    cursors = {}
    for fraction in (0.1, 0.5, 0.9):  # at the end of a line a tenth..9/10 in: a parse each
        line = int(LINES * fraction)
        cursors[f"line {line}"] = sum(len(r) + 1 for r in text.split("\n")[: line + 1]) - 1
    rows = []
    for name, offset in cursors.items():
        before, following = text[:offset], text[offset:]
        for language in ("python", ""):  # the grammar, and the text-only rules
            ms = median_ms(partial(syntax.decide, before, following, language), RUNS)
            decision = syntax.decide(before, following, language)
            rows.append(
                {
                    "cursor": name,
                    "language": language or "(none: text rules)",
                    "median_ms": round(ms, 3),
                    "decision": decision,
                }
            )
            print(f"{name:10} {language or 'text':7} {ms:7.3f} ms  {decision}")
    parser = syntax._parser("python")
    data = text.encode()
    parse_ms = median_ms(lambda: parser.parse(data), RUNS)
    print(f"a whole-file parse: {parse_ms:.3f} ms for {LINES} lines, {len(data)} bytes")
    write_json(
        OUT,
        {
            "stamp": stamp.finish(started),
            "lines": LINES,
            "bytes": len(data),
            "runs": RUNS,
            "whole_file_parse_ms": round(parse_ms, 3),
            "decide": rows,
        },
    )


if __name__ == "__main__":
    main()
