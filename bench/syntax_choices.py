"""What ``lineMode: auto`` chooses on the replay's cursors, and whether a block's end rules
would cut the block the user actually wrote (no model: the frozen tasks only).

For every line task (line-start, mid-line: bench/data/replay.json.gz) and block task
(block-start, opener: bench/data/replay_blocks.json.gz) of a split: ``syntax.decide`` with the
Python grammar and with the text rules alone, counted. For the block tasks, the true block
(the lines removed) run through ``StopCondition.block_end`` as ``completion.block_stop`` sets it
for that cursor at the default ``maxLines``: how often the rules keep it whole, and the share of
its lines they keep (a rule that cut the right answer would cost every draft that has it).

    python -m bench.syntax_choices                 # test split -> bench/results/syntax_choices.json
    python -m bench.syntax_choices --split validation
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from bench.measure import Stamp
from bench.pipeline import Benchmark, run
from bench.replay import load_data, positions
from bench.replay_blocks import block_positions, load_blocks
from lsp_server.completion import CursorContext, block_stop
from lsp_server.settings import DecodingSettings
from lsp_server.syntax import decide


def offset_of(document: str, line: int, column: int) -> int:
    rows = document.split("\n")
    return sum(len(r) + 1 for r in rows[:line]) + column


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    stamp, split = Stamp(model="none (syntax rules only)"), args.split
    out: dict[str, Any] = {"split": split}
    cases: list[tuple[str, str, int]] = []
    for p in positions(load_data(), split):
        cases.append((f"line {p.cursor}", p.document, offset_of(p.document, p.line, p.column)))
    blocks = block_positions(load_blocks(), split, cursors=("block-start", "opener"))
    for b in blocks:
        cases.append((f"block {b.cursor}", b.document, offset_of(b.document, b.line, b.column)))
    for language in ("python", ""):
        counts: dict[str, Counter[str]] = {}
        for kind, document, offset in cases:
            context = CursorContext.at(document, offset)
            decision = decide(context.before, context.following, language)
            counts.setdefault(kind, Counter())[decision] += 1
        out[language or "text rules"] = {k: dict(sorted(c.items())) for k, c in counts.items()}
    settings = DecodingSettings()
    kept: dict[str, list[float]] = {}
    whole: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for b in blocks:
        context = CursorContext.at(b.document, offset_of(b.document, b.line, b.column))
        stop = block_stop(context, settings)
        target = b.target.rstrip()
        end = stop.block_end(target, final=True)
        cut = target if end is None else target[:end].rstrip()
        rows = [r for r in target.split("\n") if r.strip()]
        left = [r for r in cut.split("\n") if r.strip()]
        kept.setdefault(b.cursor, []).append(len(left) / max(1, len(rows)))
        whole[b.cursor] += cut == target
        total[b.cursor] += 1
    out["block end rules on the true block"] = {
        cursor: {
            "blocks": total[cursor],
            "kept whole": whole[cursor],
            "mean share of lines kept": round(sum(v) / len(v), 3),
            "max_lines": settings.max_lines,
        }
        for cursor, v in kept.items()
    }
    return out, stamp


def report(result: dict[str, Any]) -> list[str]:
    parts = {name: value for name, value in result.items() if name not in ("stamp", "split")}
    return [
        f"{name}\n" + "\n".join(f"  {k:18} {c}" for k, c in v.items()) for name, v in parts.items()
    ]


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--split", default="test", choices=("validation", "test"))
    parser.add_argument("--out", help="results file (default bench/results/syntax_choices.json)")


BENCH = Benchmark(
    "syntax_choices",
    __doc__.split("\n")[0],
    options=options,
    variant=lambda args: "" if args.split == "test" else f"_{args.split}",  # its own file a split
)


def main(argv: list[str] | None = None) -> None:
    run(BENCH, measure, report, argv)


if __name__ == "__main__":
    main()
