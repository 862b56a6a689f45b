"""Repository-history replay: complete lines that later commits added, through the server.

The product's real situation: a codebase indexed at some date, then the user writes the next
lines of that same codebase. The tasks are frozen in ``bench/data/replay.json.gz`` (built by
``bench.replay_build`` from git mirrors, in history: bench/results/README.md): per repository
an index snapshot (the last commit before a cutoff after 2024-07-01, stored as its .py files'
texts) and target lines that later commits added, each with two cursor positions
(``line-start``: after the indentation; ``mid-line``: the end of the first word ending at or
after a third of the line's text). Split by repository: validation (all tuning) and test (the
report); the file says which repository is which.

Per configuration, as an editor would: the snapshot is indexed into a codebase store
(``ngram_db.index_repo``; cached between runs), the language server starts over stdio with
the configuration's settings, and for each position the document (the post-commit file with
the target line cut at the cursor, the rest of the file present) is opened (didOpen), drafts
are requested (``textDocument/inlineCompletion``) and the document is closed.

Metrics per position, with ``rest`` = the target line after the cursor, trailing whitespace
trimmed, and each draft cut at its first newline and trimmed the same way:

- EM@1 / EM@k: the first draft / any draft equals ``rest``;
- edit similarity@k: the best over drafts of 1 - Levenshtein(draft, rest) / max length;
- characters saved@k: the user accepts a draft up to where it first differs from ``rest``
  (the longest common prefix; VS Code and Neovim accept a draft in part, word by word, so this
  is the most partial acceptance can give); the best draft's accepted length over len(rest);
- distinct drafts: different non-empty drafts; empty: no non-empty draft at all;
- how alike the drafts are: the prefix all drafts share, over the first draft's length
  (``prefix``; ``close``: at least CLOSE_PREFIX of it), the mean normalised edit distance
  between two drafts (``apart``), and what drafts 2..k add (``gain``: EM@k - EM@1);
- latency: request to response, ms (p50, p95).

Positions are also split by where the target line occurs already: ``verbatim`` (its text is
a line of the snapshot), ``in-file`` (another line of the same document has its text). Paired
bootstrap intervals (2,000 resamples) compare configurations over the same positions.

    python -m bench.replay                         # test split, the three main configurations
    python -m bench.replay --split validation --configs superposed+store --limit 20
    python -m bench.replay --define 'mine={"alpha": 0.3}' --configs mine,superposed+store
    python -m bench.replay --quick                 # a small fixed subset (make bench-quick)
    python -m bench.replay --resummarize bench/results/replay.json   # metrics added since
    python -m bench.replay --split test --cursor line-start --configs single,auto \
        --out bench/results/replay_lines_auto.json        # issue 23: no loss on line tasks
    python -m bench.replay --tasks blocks --configs single,auto   # issue 23: bench/replay_blocks.py
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.measure import ROOT, Stamp, write_json
from bench.metrics import (
    chars_saved,
    edit_similarity,
    paired_diff_ci,
    pairwise_distance,
    shared_prefix_share,
)
from bench.replay_driver import BASE, REPO_FIELDS, Tasks, benchmark, cells, replay

if TYPE_CHECKING:
    from lsp_server.completion.wellformed import Cursor

DATA = ROOT / "bench" / "data" / "replay.json.gz"
CURSORS = ("line-start", "mid-line")
QUICK_PER_REPO = 5  # --quick: the first targets of each repository of the split
MAX_NEW_TOKENS = 24  # enough for a typical line to finish (drafts stop at the newline)
# A request's drafts are "close" when all share at least this much of the first (issue 22: at
# the line start, 43% of requests had all three drafts share 60% of the first's text).
CLOSE_PREFIX = 0.6


MAIN = ("superposed+store", "superposed-nostore", "greedy")


# ----- tasks ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Position:
    """One request: a target line of a document, cut at a cursor."""

    task: str  # the task id, e.g. "psf/black#3"
    repo: str
    path: str  # the file, relative to the repository
    cursor: str  # line-start | mid-line
    line: int  # 0-based line of the target
    column: int  # the cursor's character offset in the line
    document: str  # the whole document as the editor has it: the target line cut at the cursor
    rest: str  # what the user would type next: the line after the cursor, trailing ws trimmed
    verbatim: bool  # the target line's text is a line of the snapshot
    in_file: bool  # another line of the document has the target line's text


def load_data(path: Path = DATA) -> dict[str, Any]:
    data = json.loads(gzip.decompress(path.read_bytes()))
    assert isinstance(data, dict)
    return data


def cut_document(document: str, line: int, column: int) -> str:
    """The document with line ``line`` ending at ``column``; every other line kept."""
    rows = document.split("\n")
    rows[line] = rows[line][:column]
    return "\n".join(rows)


def snapshot_lines(files: Mapping[str, str]) -> set[str]:
    """The stripped non-blank lines of a snapshot."""
    return {s for text in files.values() for row in text.split("\n") if (s := row.strip())}


def positions(
    data: Mapping[str, Any],
    split: str,
    per_repo: int | None = None,
    cursors: Sequence[str] = CURSORS,
) -> list[Position]:
    """The positions of a split: the ``cursors`` of the first ``per_repo`` targets per
    repository."""
    repos = data["split"][split]
    known = {r: snapshot_lines(data["repos"][r]["files"]) for r in repos}
    taken: dict[str, int] = {r: 0 for r in repos}
    out: list[Position] = []
    for task in data["tasks"]:
        repo = task["repo"]
        if repo not in taken or (per_repo is not None and taken[repo] >= per_repo):
            continue
        taken[repo] += 1
        document = data["documents"][task["document"]]
        text, line = task["text"], task["line"]
        others = document.split("\n")
        in_file = any(row.strip() == text.strip() for i, row in enumerate(others) if i != line)
        for cursor in cursors:
            column = task["cursors"][cursor]
            out.append(
                Position(
                    task=task["id"],
                    repo=repo,
                    path=task["path"],
                    cursor=cursor,
                    line=line,
                    column=column,
                    document=cut_document(document, line, column),
                    rest=text[column:].rstrip(),
                    verbatim=text.strip() in known[repo],
                    in_file=in_file,
                )
            )
    return out


# ----- metrics -------------------------------------------------------------------------------


def draft_line(draft: str) -> str:
    """What a draft puts on the cursor's line: up to its first newline, trailing ws trimmed."""
    return draft.split("\n", 1)[0].rstrip()


def position_metrics(drafts: Sequence[str], rest: str) -> dict[str, float]:
    """EM@1, EM@k, edit similarity@k, characters saved@k, distinct and empty for one request."""
    lines = [draft_line(d) for d in drafts]
    shown = [d for d in lines if d.strip()]
    first = lines[0] if lines else ""
    return {
        "em1": float(first == rest),
        "emk": float(rest in lines),
        "es1": edit_similarity(first, rest),
        "esk": max((edit_similarity(d, rest) for d in lines), default=0.0),
        "csk": max((chars_saved(d, rest) for d in lines), default=0.0),
        "distinct": float(len(set(shown))),
        "empty": float(not shown),
        # how alike the drafts are (nan for fewer than two), and what drafts 2..k add
        "prefix": shared_prefix_share(lines),
        "close": nan_or(shared_prefix_share(lines), lambda v: float(v >= CLOSE_PREFIX)),
        "apart": pairwise_distance(lines),
        "gain": float(rest in lines) - float(first == rest),
    }


def nan_or(value: float, then: Callable[[float], float]) -> float:
    return value if math.isnan(value) else then(value)


METRICS: tuple[str, ...] = ("em1", "emk", "es1", "esk", "csk", "distinct", "empty")
LIKENESS = ("prefix", "close", "apart", "gain")  # how alike the drafts are (issue 22)
METRICS += LIKENESS
SUBSETS = {
    "all": lambda r: True,
    "verbatim": lambda r: r["verbatim"],
    "in-file": lambda r: r["in_file"],
    "new": lambda r: not r["verbatim"] and not r["in_file"],
}


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per configuration, cursor (both, run or not) and subset: each metric's mean and
    interval, latency."""
    return cells(rows, METRICS, SUBSETS, CURSORS)


def compare(rows: Sequence[Mapping[str, Any]], configs: Sequence[str]) -> list[dict[str, Any]]:
    """Paired differences (a - b) over the same positions for each pair of configurations.

    Each later configuration against each earlier one, for EM@1, EM@k, edit similarity@k,
    characters saved@k and the gain of drafts 2..k (EM@k - EM@1); and every configuration's
    EM@k against greedy's EM@1 where greedy ran.
    """
    key = {(r["config"], r["task"], r["cursor"]): r for r in rows}
    pairs = [
        (a, b, m, m)
        for i, a in enumerate(configs)
        for b in configs[i + 1 :]
        for m in ("em1", "emk", "esk", "csk", "gain")
    ]
    if "greedy" in configs:
        pairs += [(a, "greedy", "emk", "em1") for a in configs if a != "greedy"]
    out = []
    for a, b, ma, mb in pairs:
        for cursor in CURSORS:
            both = [
                (ra, key[(b, ra["task"], cursor)])
                for (c, _t, cur), ra in key.items()
                if c == a and cur == cursor and (b, ra["task"], cursor) in key
            ]
            nan = math.nan  # a metric a row lacks (a run from before it) pairs as missing
            diff = paired_diff_ci(
                [x.get(ma, nan) for x, _ in both], [y.get(mb, nan) for _, y in both]
            )
            out.append({"a": a, "b": b, "metric_a": ma, "metric_b": mb, "cursor": cursor, **diff})
    return out


def cursor_of(p: Position) -> Cursor:
    """The text around a position's cursor (lsp_server.completion.wellformed's, imported here only:
    its
    parsers are not loaded before a row needs them)."""
    from lsp_server.completion.wellformed import Cursor

    rows = p.document.split("\n")
    offset = sum(len(r) + 1 for r in rows[: p.line]) + p.column
    return Cursor(p.document[:offset], p.document[offset:], p.path)


def row_fields(p: Position, drafts: Sequence[str]) -> dict[str, Any]:
    """What a replay row says of its shown drafts: how many, how many malformed (as issue 38's
    bench/results/replay_wellformed.json judged two saved runs)."""
    from lsp_server.completion.wellformed import Judge

    shown = [d for d in drafts if d.strip()]
    judge = Judge(cursor_of(p))
    return {"shown": len(shown), "malformed": sum(bool(judge.why(d)) for d in shown)}


def line_row(p: Position, drafts: list[str]) -> dict[str, Any]:
    """A line task's row: the position's fields, the drafts and their metrics (with how many
    shown drafts are malformed there: ``row_fields``)."""
    return {
        "task": p.task,
        "repo": p.repo,
        "cursor": p.cursor,
        "verbatim": p.verbatim,
        "in_file": p.in_file,
        "rest": p.rest,
        "drafts": drafts,
        **position_metrics(drafts, p.rest),
        **row_fields(p, drafts),
    }


# ----- stores and the server -----------------------------------------------------------------


# ----- the command ---------------------------------------------------------------------------


def resummarize(path: Path) -> dict[str, Any]:
    """A saved run's metrics computed again from its rows (each request's drafts and rest),
    as this script computes them now: a metric added since (issue 22's likeness) covers the
    run's requests without running them again. The stamp stays the run's; ``resummarized``
    says when and at which commit the metrics were recomputed."""
    result = json.loads(path.read_text())
    for row in result["rows"]:
        row.update(position_metrics(row["drafts"], row["rest"]))
    names = list(result["configs"])
    result["summary"] = summarize(result["rows"])
    result["comparisons"] = compare(result["rows"], names)
    now = Stamp(model=result["stamp"]["model"])
    result["resummarized"] = {"date": now.date, "commit": now.commit, "command": now.command}
    write_json(path, result)
    return result


def line_positions(args: argparse.Namespace, data: Mapping[str, Any]) -> list[Position]:
    per_repo = QUICK_PER_REPO if args.quick else args.limit
    return positions(data, args.split, per_repo, [args.cursor] if args.cursor else CURSORS)


def line_summary(name: str, cursor: str, c: Mapping[str, Any]) -> str:
    return (
        f"{name:24s} {cursor:10s} n={c['n']:3d} EM@1 {c['em1']['mean']:.3f} "
        f"EM@k {c['emk']['mean']:.3f} ES@k {c['esk']['mean']:.3f} "
        f"CS@k {c['csk']['mean']:.3f} distinct {c['distinct']['mean']:.2f} "
        f"empty {c['empty']['mean']:.2f} p50 {c['p50_ms']:.0f} ms p95 {c['p95_ms']:.0f} ms"
    )


def line_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tasks", choices=("lines", "blocks"), default="lines",
                        help="blocks: issue 23's block tasks (bench/replay_blocks.py)")  # fmt: skip
    parser.add_argument("--limit", type=int, help="targets per repository (each has 2 cursors)")
    parser.add_argument("--quick", action="store_true",
                        help=f"the first {QUICK_PER_REPO} targets per repository")  # fmt: skip
    parser.add_argument("--cursor", choices=CURSORS,
                        help="one cursor only (half the requests); default: both")  # fmt: skip
    parser.add_argument("--max-new-tokens", type=int, default=MAX_NEW_TOKENS)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--resummarize", type=Path, metavar="JSON",
                        help="recompute a saved run's metrics from its rows")  # fmt: skip


LINES = Tasks(
    stem="replay",
    description=__doc__.splitlines()[0],
    default_configs=",".join(MAIN),
    options=line_options,
    count="targets",
    repo_fields=REPO_FIELDS,
    load=load_data,
    positions=line_positions,
    row_of=line_row,
    summarize=summarize,
    compare=compare,
    settings=lambda a: {**BASE, "maxNewTokens": a.max_new_tokens, "model": a.model},
    line=line_summary,
)


def main(argv: list[str] | None = None) -> int:
    tasks = argparse.ArgumentParser(add_help=False)
    tasks.add_argument("--tasks", choices=("lines", "blocks"), default="lines")
    which, rest = tasks.parse_known_args(argv)
    if which.tasks == "blocks":
        from bench.replay_blocks import main as blocks_main

        return blocks_main(rest)
    args = benchmark(LINES).parser().parse_args(argv)
    if args.resummarize:
        resummarize(args.resummarize)
        return 0
    return replay(LINES, argv)


if __name__ == "__main__":
    sys.exit(main())
