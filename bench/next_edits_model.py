"""Next edits with the model's word (issue 55 item 1): the rules' proposals scored, a margin swept.

Offline, on the walks the rules-only runs saved (bench/results/next_edits[-SPLIT].json): each
step's proposals are scored with the real model (lsp_server/next_edits/line_score.py: the
site's line rewritten against the line as it stands, a window of context before it, all of a
step's proposals in one batch), and the walk is read again with the proposals under a margin
taken away:

- a step shows the proposals whose score is at least the margin;
- a repetitive walk goes on at a step where the proposal the user accepted is still shown
  (or another right one is: then it goes on as the saved walk did, an approximation: an
  accept of that other proposal could lead elsewhere), and stops at the first step where no
  right one is shown; what it reached is what the saved walk's accepts up to there made;
- an ordinary change is a false alarm when a wrong proposal is still shown after it.

A proposal the rules ranked fourth or lower is never shown here (the saved walks hold the
first 3): a proposal taken away leaves its place empty, where the server would show the
next one. The margin is chosen on the validation split: the lowest with no more false
alarms than the rules and the highest precision; test and test2 are read at it.
The cost: each step's batch timed (ms per change, in process, torch threads as given).

    python -m bench.next_edits_model            # bench/results/next_edits_model.json
    python -m bench.next_edits_model --limit 5  # the first 5 tasks per split (a try)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.measure import RESULTS, Stamp, percentile
from bench.next_edits import DATA, DATA_TEST2, Task, load_data, tasks_of
from bench.next_edits_score import apply_edit, apply_sites, right_sites, summarize
from bench.pipeline import Benchmark, run

SPLITS = {  # split -> (tasks, the rules-only run whose walks are read)
    "validation": (DATA, "validation", "next_edits-validation.json"),
    "test": (DATA, "test", "next_edits.json"),
    "test2": (DATA_TEST2, "test", "next_edits-test2.json"),
}
MARGINS = [-8.0, -6.0, -4.0, -3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, 4.0]
WINDOWS = (8, 32)  # tokens of context before the lines part
SCORES = ("total", "mean")  # Scored.total (log ratio) or Scored.mean (per token)


# ----- scoring the saved walks ---------------------------------------------------------------


def path_of(task: Task, made: frozenset[Any], p: Mapping[str, Any]) -> str | None:
    """The task's file a saved proposal is in: the saved walk keeps its URI's last part, so
    among the files of that name the one whose line holds the proposal's old text (a right
    proposal: the one where it makes sites); None: none."""
    named = [f for f in task.files if f.rsplit("/", 1)[-1] == p["uri"]]
    line, start = p["range"]["start"]["line"], p["range"]["start"]["character"]
    fits = []
    for path in named:
        rows = apply_sites(task.files[path], {s for s in made if s.path == path}).split("\n")
        if line < len(rows) and rows[line][start:].startswith(p.get("oldText") or ""):
            fits.append(path)
    if p["right"]:
        fits = [f for f in fits if sites_made(task, made, f, p)] or fits
    return fits[0] if fits else None


def sites_made(task: Task, made: frozenset[Any], path: str, p: Mapping[str, Any]) -> frozenset[Any]:
    """The commit's sites a proposal makes in ``path`` (bench.next_edits.judge, offline)."""
    mine = [s for s in task.sites if s.path == path]
    return right_sites(task.files[path], frozenset(made & set(mine)), mine, p) or frozenset()


def step_rewrites(
    task: Task, made: frozenset[Any], proposals: Sequence[Mapping[str, Any]]
) -> list[tuple[str, str, str, str] | None]:
    """Each proposal as (text before its line, its line, its line rewritten, the line of the
    user's edit), the documents being the task's files with ``made`` (commit sites) made;
    None where it cannot be read."""
    first = task.group[0]
    edited = apply_sites(task.files[first.path], {first}).split("\n")[first.line]
    out: list[tuple[str, str, str, str] | None] = []
    for p in proposals:
        path = path_of(task, made, p)
        if path is None:
            out.append(None)
            continue
        text = apply_sites(task.files[path], {s for s in made if s.path == path})
        line = p["range"]["start"]["line"]
        rows = text.split("\n")
        try:
            after = apply_edit(text, p).split("\n")
        except ValueError:
            out.append(None)
            continue
        if p["range"]["end"]["line"] != line or len(after) != len(rows):
            out.append(None)  # a proposal over lines: not one line's rewrite
            continue
        before = "\n".join(rows[:line]) + ("\n" if line else "")
        out.append((before, rows[line], after[line], edited))
    return out


def made_by(task: Task, made: frozenset[Any], p: Mapping[str, Any]) -> frozenset[Any]:
    """The commit's sites an accepted proposal made."""
    path = path_of(task, made, p)
    return frozenset() if path is None else sites_made(task, made, path, p)


def proposal_key(task: Task, made: frozenset[Any], p: Mapping[str, Any]) -> str:
    """A proposal the same when shown again (as bench.next_edits_score.proposal_key keeps it
    apart: its file, line, column and text)."""
    start = p["range"]["start"]
    where = path_of(task, made, p) or p["uri"]
    return json.dumps([where, start["line"], start["character"], p.get("oldText"), p["newText"]])


def score_walks(
    engine: Any, tasks: Sequence[Task], rows: Sequence[Mapping[str, Any]], window: int
) -> tuple[list[list[list[dict[str, Any]]]], list[float], list[list[int]]]:
    """Per row, per step, per proposal: its key and Scored's total and mean (None: not
    scored, a proposal over lines: always shown); each step's
    batch time (ms); per row, per step, the group's sites the accept made."""
    from lsp_server.next_edits.line_score import Rewrite, score_rewrites

    by_id = {t.id: t for t in tasks}
    scores: list[list[list[dict[str, Any]]]] = []
    times: list[float] = []
    gains: list[list[int]] = []
    for row in rows:
        task = by_id[row["task"]]
        made = frozenset([task.group[0]])
        row_scores, row_gains = [], []
        for step in row["steps"]:
            rewrites = step_rewrites(task, made, step["proposals"])
            batch = [Rewrite(*r) for r in rewrites if r is not None]
            started = time.perf_counter()
            scored = iter(score_rewrites(engine, batch, window))
            if batch:
                times.append((time.perf_counter() - started) * 1e3)
            keys = [proposal_key(task, made, p) for p in step["proposals"]]
            row_scores.append([
                {"key": key, "total": None, "mean": None} if r is None
                else (lambda s: {"key": key, "total": s.total, "mean": s.mean})(next(scored))
                for key, r in zip(keys, rewrites, strict=True)
            ])  # fmt: skip
            gained = 0
            if step["accepted"] is not None:
                sites = made_by(task, made, step["proposals"][step["accepted"]])
                gained = len([s for s in sites if s in task.group])
                made = made | sites
            row_gains.append(gained)
        scores.append(row_scores)
        gains.append(row_gains)
    return scores, times, gains


# ----- the walks read again under a margin ---------------------------------------------------


def filtered_row(
    row: Mapping[str, Any],
    scores: Sequence[Sequence[Mapping[str, Any]]],
    gains: Sequence[int],
    margin: float,
    score: str,
) -> dict[str, Any]:
    """The saved walk with the proposals under ``margin`` not shown (see the module)."""

    def shown(i: int) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
        return [
            (p, s) for p, s in zip(row["steps"][i]["proposals"], scores[i], strict=True)
            if s[score] is None or s[score] >= margin
        ]  # fmt: skip

    seen: dict[str, bool] = {}
    reached = reached_top1 = 0
    top1 = True
    last = len(row["steps"])
    false_first = 0
    for i, step in enumerate(row["steps"]):
        visible = shown(i)
        for p, s in visible:
            seen[s["key"]] = seen.get(s["key"], False) or bool(p["right"])
        if i == 0:
            false_first = sum(1 for p, _ in visible if not p["right"])
        if step["accepted"] is None or not any(p["right"] for p, _ in visible):
            last = i + 1
            break
        top1 = top1 and bool(visible[0][0]["right"])
        reached += gains[i]
        reached_top1 += gains[i] if top1 else 0
    later = row["later"]
    return {
        **row,
        "reached": reached,
        "reached_top1": reached_top1,
        "recall1": reached_top1 / later if later else float("nan"),
        "recall3": reached / later if later else float("nan"),
        "proposed": len(seen),
        "right": sum(seen.values()),
        "false_first": false_first,
        "false_alarm": float(false_first > 0),
        "notified_ms": row["notified_ms"][:last],
        "pause_ms": row["pause_ms"][:last],
        "request_ms": row["request_ms"][:last],
        "steps": row["steps"][:last],
    }


def headline(summary: Mapping[str, Any]) -> dict[str, float]:
    """The four numbers a margin is chosen by."""
    return {
        "precision": summary["precision"]["mean"],
        "proposed": summary["proposed"],
        "false_alarms_per_100": summary["ordinary"]["false_alarms_per_100"]["mean"],
        "recall3": summary["repetitive"]["recall3"]["mean"],
    }


def sweep(
    rows: Sequence[Mapping[str, Any]],
    scores: Sequence[Any],
    gains: Sequence[Sequence[int]],
    score: str,
) -> dict[str, dict[str, float]]:
    """Each margin's headline numbers ("rules": no margin)."""
    out = {"rules": headline(summarize([dict(r) for r in rows]))}
    for margin in [float("-inf"), *MARGINS]:  # -inf: every proposal (the rules read again)
        kept = [
            filtered_row(r, s, g, margin, score)
            for r, s, g in zip(rows, scores, gains, strict=True)
        ]
        out[f"{margin:g}"] = headline(summarize(kept))
    return out


def choose(validation: Mapping[str, Mapping[str, float]]) -> str:
    """The validation margin with the highest precision among those that keep at least 80% of
    the rules' recall@3 (ties: the lowest margin, which keeps the most)."""
    rules = validation["rules"]
    fair = [
        m
        for m in validation
        if m not in ("rules", "-inf") and validation[m]["recall3"] >= 0.8 * rules["recall3"]
    ]
    if not fair:
        return "rules"
    return max(fair, key=lambda m: (validation[m]["precision"], -float(m)))


# ----- the command ---------------------------------------------------------------------------


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, help="the first N tasks of each split (a try)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--out", type=Path, help="results JSON")


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    from superposed.api import Engine

    engine = Engine.load(threads=args.threads)
    stamp = Stamp(model=engine.name, runner=type(engine.runner).__name__)
    out: dict[str, Any] = {"windows": list(WINDOWS), "margins": MARGINS, "splits": {}}
    for split, (data_path, name, saved) in SPLITS.items():
        run_rows = json.loads((RESULTS / saved).read_text())
        rows = run_rows["rows"][: args.limit]
        tasks = tasks_of(load_data(data_path), name)
        entry: dict[str, Any] = {"rules_run": saved, "rules_commit": run_rows["stamp"]["commit"]}
        for window in WINDOWS:
            scores, times, gains = score_walks(engine, tasks, rows, window)
            entry[f"window {window}"] = {
                "cost_ms": {"batches": len(times), "p50": percentile(times, 50),
                            "p95": percentile(times, 95)},
                "sweep": {s: sweep(rows, scores, gains, s) for s in SCORES},
                "scores": scores,
            }  # fmt: skip
            print(f"{split} window {window}: {len(times)} batches", file=sys.stderr)
        out["splits"][split] = entry
    out["chosen"] = {
        f"window {w} {s}": choose(out["splits"]["validation"][f"window {w}"]["sweep"][s])
        for w in WINDOWS
        for s in SCORES
    }
    return out, stamp


def lines(result: Mapping[str, Any]) -> list[str]:
    out = []
    for key, margin in result["chosen"].items():
        w, s = key.split()[1], key.split()[2]
        for split, entry in result["splits"].items():
            sw = entry[f"window {w}"]["sweep"][s]
            r, m = sw["rules"], sw.get(margin, sw["rules"])
            cost = entry[f"window {w}"]["cost_ms"]["p50"]
            out.append(
                f"{key} margin {margin} {split}: precision {r['precision']:.3f} -> "
                f"{m['precision']:.3f}, false alarms {r['false_alarms_per_100']:.1f} -> "
                f"{m['false_alarms_per_100']:.1f}, recall@3 {r['recall3']:.3f} -> "
                f"{m['recall3']:.3f}; cost p50 {cost:.0f} ms"
            )
    return out


BENCH = Benchmark("next_edits_model", __doc__.splitlines()[0], options=options)


def main(argv: list[str] | None = None) -> int:
    run(BENCH, measure, lines, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
