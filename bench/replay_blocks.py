"""Block tasks of the repository-history replay (issue 23): complete a whole run of added lines.

Code is written in blocks: most added lines of a commit arrive in runs. The tasks are frozen in
``bench/data/replay_blocks.json.gz`` (``bench.replay_build --blocks``, in history): runs of at
least two consecutive added non-blank lines of one file in one commit (not moved code), from
the same repositories, snapshots and validation/test split as the line tasks (whose file holds
the snapshots' texts). Per position the document is the post-commit file with the whole run
removed; the cursor is

- ``block-start``: on the run's first line, after its indentation (the line holds only that);
- ``opener``: at the end of the line before the run, when that line opens a block (``:``); the
  run's lines are then removed whole and what follows the cursor starts with a newline.

As in the line replay, the server runs over stdio with each configuration's settings, the
snapshot indexed as the codebase store, and drafts come from ``textDocument/inlineCompletion``;
they are **not** cut at their first newline. Metrics per position (``bench.metrics``), each
over the best of the k drafts (and over the first, the ``1`` variants), lines compared with
their trailing whitespace cut and their leading indentation exact:

- lines accepted (``lak``): the draft's leading lines that are right, up to the first wrong one;
- characters saved (``csk``): the common prefix of draft and block over the block's length;
- whole-block EM (``emk``) and edit similarity (``esk``) over the block;
- the drafts' shape: how many have more than one line (``multi``), the first's lines;
- latency, request to response (p50, p95).

Subsets: by the run's length (2-4 lines, 5+), and ``repeat`` (the run's lines, stripped, occur
as consecutive non-blank lines of a snapshot file: ``verbatim``, or of the document elsewhere:
``twin``) against ``new``. Paired bootstrap intervals compare configurations over the same
positions, and the ratio of characters saved (issue 23's 1.5x target) has its own interval.

    python -m bench.replay --tasks blocks --configs single,auto
    python -m bench.replay --tasks blocks --split validation --configs single,multi --limit 10
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.measure import ROOT
from bench.metrics import block_metrics, paired_diff_ci, paired_ratio_ci
from bench.replay_driver import REPO_FIELDS, Tasks, cells, replay

DATA = ROOT / "bench" / "data" / "replay_blocks.json.gz"
BLOCK_CURSORS = ("block-start", "opener")
DEFAULT_CONFIGS = "single,multi"  # issue 23's auto joins once the server has it
METRICS = ("la1", "lak", "cs1", "csk", "em1", "emk", "es1", "esk", "multi", "lines1", "empty")
PAIRED = ("lak", "csk", "emk", "esk")
SUBSETS = {
    "all": lambda r: True,
    "2-4 lines": lambda r: r["lines"] <= 4,
    "5+ lines": lambda r: r["lines"] >= 5,
    "verbatim": lambda r: r["verbatim"],
    "twin": lambda r: r["twin"],
    "repeat": lambda r: r["verbatim"] or r["twin"],
    "new": lambda r: not r["verbatim"] and not r["twin"],
}


@dataclass(frozen=True)
class BlockPosition:
    """One request: a document with a run of lines removed, and the cursor where it was."""

    task: str
    repo: str
    path: str
    cursor: str  # block-start | opener
    line: int  # the cursor's 0-based line
    column: int
    document: str  # the post-commit file, the run removed (block-start: its indentation left)
    target: str  # what follows the cursor in the post-commit file, to the run's end
    lines: int  # the run's length in lines
    verbatim: bool  # the run occurs in a snapshot file
    twin: bool  # the run occurs elsewhere in the document


def load_blocks(path: Path = DATA) -> dict[str, Any]:
    """The block tasks, with the snapshots' texts from the line file they name."""
    data = json.loads(gzip.decompress(path.read_bytes()))
    lines_file = ROOT / data["lines_file"]
    if hashlib.sha256(lines_file.read_bytes()).hexdigest() != data["lines_sha256"]:
        raise SystemExit(f"{lines_file} is not the file {path.name} was built against")
    lines = json.loads(gzip.decompress(lines_file.read_bytes()))
    for name, repo in data["repos"].items():
        assert lines["repos"][name]["snapshot"] == repo["snapshot"], name
        repo["files"] = lines["repos"][name]["files"]
    assert isinstance(data, dict)
    return data


def remove_block(document: str, line: int, count: int, cursor: str) -> tuple[str, int, int, str]:
    """The document without lines [line, line + count), the cursor (line, column) and what
    follows it up to the run's end. ``block-start`` leaves the first line's indentation and the
    cursor after it; ``opener`` removes the lines whole, the cursor at the previous line's end."""
    rows = document.split("\n")
    run = rows[line : line + count]
    if cursor == "block-start":
        indent = run[0][: len(run[0]) - len(run[0].lstrip())]
        kept = [*rows[:line], indent, *rows[line + count :]]
        return "\n".join(kept), line, len(indent), "\n".join(run)[len(indent) :]
    if cursor == "opener":
        if line == 0:
            raise ValueError("an opener cursor needs a line before the run")
        kept = [*rows[:line], *rows[line + count :]]
        return "\n".join(kept), line - 1, len(rows[line - 1].rstrip()), "\n" + "\n".join(run)
    raise ValueError(f"unknown block cursor {cursor!r}")


def code_rows(text: str) -> list[str]:
    """A text's non-blank lines, stripped."""
    return [s for row in text.split("\n") if (s := row.strip())]


def contains_run(rows: Sequence[str], run: Sequence[str]) -> bool:
    """Do the (stripped, non-blank) ``rows`` hold ``run`` as consecutive rows?"""
    n = len(run)
    return any(rows[i : i + n] == list(run) for i, row in enumerate(rows) if row == run[0])


def block_positions(
    data: Mapping[str, Any],
    split: str,
    per_repo: int | None = None,
    cursors: Sequence[str] = ("block-start",),
) -> list[BlockPosition]:
    """The positions of a split: the ``cursors`` of the first ``per_repo`` blocks per
    repository (an opener cursor only where the block has one)."""
    repos = data["split"][split]
    snapshot = {r: [code_rows(t) for t in data["repos"][r]["files"].values()] for r in repos}
    taken = dict.fromkeys(repos, 0)
    out: list[BlockPosition] = []
    for task in data["tasks"]:
        repo = task["repo"]
        if repo not in taken or (per_repo is not None and taken[repo] >= per_repo):
            continue
        taken[repo] += 1
        document = data["documents"][task["document"]]
        run = [row.strip() for row in task["lines"]]
        verbatim = any(contains_run(rows, run) for rows in snapshot[repo])
        for cursor in cursors:
            if task["cursors"].get(cursor) is None:
                continue
            cut, line, column, target = remove_block(
                document, task["line"], len(task["lines"]), cursor
            )
            out.append(
                BlockPosition(
                    task=task["id"],
                    repo=repo,
                    path=task["path"],
                    cursor=cursor,
                    line=line,
                    column=column,
                    document=cut,
                    target=target,
                    lines=len(task["lines"]),
                    verbatim=verbatim,
                    twin=contains_run(code_rows(cut), run),
                )
            )
    return out


def block_row(p: BlockPosition, drafts: list[str]) -> dict[str, Any]:
    """A block task's row: the position's fields, the drafts (uncut) and their metrics."""
    return {
        "task": p.task,
        "repo": p.repo,
        "cursor": p.cursor,
        "lines": p.lines,
        "verbatim": p.verbatim,
        "twin": p.twin,
        "target": p.target,
        "drafts": drafts,
        **block_metrics(drafts, p.target),
    }


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per configuration, cursor run and subset: each metric's mean and interval, latency."""
    return cells(rows, METRICS, SUBSETS, no_ms=None)


def compare(rows: Sequence[Mapping[str, Any]], configs: Sequence[str]) -> list[dict[str, Any]]:
    """Each later configuration against each earlier one over the same positions: the paired
    difference (later - earlier) of lines accepted, characters saved, EM and edit similarity
    at k, and the ratio of characters saved@k (later / earlier), per cursor and subset."""
    key = {(r["config"], r["task"], r["cursor"]): r for r in rows}
    cursors = list(dict.fromkeys(r["cursor"] for r in rows))
    out = []
    for i, b in enumerate(configs):
        for a in configs[i + 1 :]:
            for cursor in cursors:
                both = [
                    (ra, key[(b, t, cur)])
                    for (c, t, cur), ra in key.items()
                    if c == a and cur == cursor and (b, t, cur) in key
                ]
                for subset, keep in SUBSETS.items():
                    part = [(x, y) for x, y in both if keep(x)]
                    for m in PAIRED:
                        diff = paired_diff_ci([x[m] for x, _ in part], [y[m] for _, y in part])
                        out.append({"a": a, "b": b, "metric": m, "kind": "difference",
                                    "cursor": cursor, "subset": subset, **diff})  # fmt: skip
                    ratio = paired_ratio_ci(
                        [x["csk"] for x, _ in part], [y["csk"] for _, y in part]
                    )
                    out.append({"a": a, "b": b, "metric": "csk", "kind": "ratio",
                                "cursor": cursor, "subset": subset, **ratio})  # fmt: skip
    return out


def block_summary(name: str, cursor: str, c: Mapping[str, Any]) -> str:
    return (
        f"{name:10s} {cursor:11s} n={c['n']:3d} lines@k {c['lak']['mean']:.2f} "
        f"CS@k {c['csk']['mean']:.3f} EM@k {c['emk']['mean']:.3f} "
        f"ES@k {c['esk']['mean']:.3f} multi-line drafts {c['multi']['mean']:.2f} "
        f"p50 {c['p50_ms']:.0f} ms p95 {c['p95_ms']:.0f} ms"
    )


def block_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, help="blocks per repository")
    parser.add_argument("--cursor", choices=BLOCK_CURSORS, action="append",
                        help="block cursors to run (repeatable; default: block-start)")  # fmt: skip
    parser.add_argument("--max-new-tokens", type=int,
                        help="one budget for all (default: each its own)")  # fmt: skip
    parser.add_argument("--data", type=Path, default=DATA)


BLOCKS = Tasks(
    stem="replay_blocks",
    description=__doc__.splitlines()[0],
    default_configs=DEFAULT_CONFIGS,
    options=block_options,
    count="blocks",
    repo_fields=(*REPO_FIELDS, "head"),
    load=load_blocks,
    positions=lambda a, data: block_positions(data, a.split, a.limit, a.cursor or ["block-start"]),
    row_of=block_row,
    summarize=summarize,
    compare=compare,
    settings=lambda a: {"k": 3, "model": a.model, "maxNewTokens": a.max_new_tokens},
    line=block_summary,
)


def main(argv: list[str] | None = None) -> int:
    return replay(BLOCKS, argv)


if __name__ == "__main__":
    sys.exit(main())
