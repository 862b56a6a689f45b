"""Issue 38 item 2: malformed shown drafts in the line replay, before and after, same positions.

Each replay row keeps the drafts the server showed; ``judge_rows`` reads them again with
lsp_server/wellformed.py at the row's cursor (the position's document, rebuilt from the
frozen data) and counts the drafts that do not parse there, timing the check per request.
``compare_runs`` puts two runs of the same positions side by side (a server commit before
and after): malformed shown drafts, EM@1, EM@3 (all, verbatim lines), edit similarity@3
(a dropped draft with no spare to take its slot leaves it empty), p50 latency, with paired
intervals.

    python -m bench.replay --quick --server-commit BEFORE --out /tmp/before.json
    python -m bench.replay --quick --server-commit AFTER --out /tmp/after.json
    python -m bench.replay_wellformed /tmp/before.json /tmp/after.json \\
        --out bench/results/replay_wellformed.json
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.measure import RESULTS, Stamp, write_json
from bench.metrics import paired_diff_ci
from bench.replay import CURSORS, cursor_of, load_data, positions
from lsp_server.wellformed import Cursor, Judge

METRICS = ("em1", "emk", "esk")  # EM@1, EM@3, edit similarity@3


def cursors_of(data: Mapping[str, Any], split: str) -> dict[tuple[str, str], Cursor]:
    """(task, cursor) -> the text around that cursor, for every position of the split."""
    return {(p.task, p.cursor): cursor_of(p) for p in positions(data, split)}


def judge_rows(rows: Sequence[dict[str, Any]], cursors: Mapping[tuple[str, str], Cursor]) -> None:
    """Each row gets ``shown`` (non-empty drafts), ``malformed`` (of them), ``why`` (each
    malformed one's reason) and ``check_ms`` (the check of all its drafts, one request)."""
    for row in rows:
        shown = [d for d in row["drafts"] if d.strip()]
        start = time.perf_counter()
        judge = Judge(cursors[(row["task"], row["cursor"])])
        reasons = [judge.why(d) for d in shown]
        row["check_ms"] = (time.perf_counter() - start) * 1e3
        row["shown"] = len(shown)
        row["why"] = [r for r in reasons if r]
        row["malformed"] = len(row["why"])


def count(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Malformed shown drafts over shown drafts, by reason; the check's ms per request."""
    shown = sum(r["shown"] for r in rows)
    bad = sum(r["malformed"] for r in rows)
    ms = sorted(r["check_ms"] for r in rows)
    return {
        "shown": shown,
        "malformed": bad,
        "share": bad / shown if shown else 0.0,
        "why": dict(collections.Counter(w for r in rows for w in r["why"])),
        "check_ms_p50": statistics.median(ms) if ms else 0.0,
        "check_ms_max": ms[-1] if ms else 0.0,
        "requests": len(rows),
    }


def side(rows: Sequence[Mapping[str, Any]], config: str) -> dict[str, Any]:
    """One run's numbers for one configuration: per cursor and overall."""
    mine = [r for r in rows if r["config"] == config]
    out: dict[str, Any] = {"all": count(mine)}
    for cursor in CURSORS:
        part = [r for r in mine if r["cursor"] == cursor]
        cell = count(part)
        cell.update({m: statistics.fmean(r[m] for r in part) if part else 0.0 for m in METRICS})
        verbatim = [r for r in part if r["verbatim"]]
        cell["emk_verbatim"] = statistics.fmean(r["emk"] for r in verbatim) if verbatim else 0.0
        cell["verbatim_n"] = len(verbatim)
        cell["p50_ms"] = statistics.median(r["ms"] for r in part) if part else 0.0
        out[cursor] = cell
    return out


def paired(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]], config: str
) -> list[dict[str, Any]]:
    """after - before, over the positions both ran, per cursor and metric."""
    old = {(r["task"], r["cursor"]): r for r in before if r["config"] == config}
    out = []
    for cursor in CURSORS:
        both = [
            (r, old[(r["task"], cursor)])
            for r in after
            if r["config"] == config and r["cursor"] == cursor and (r["task"], cursor) in old
        ]
        for metric in (*METRICS, "malformed"):
            diff = paired_diff_ci(
                [float(a[metric]) for a, _ in both], [float(b[metric]) for _, b in both]
            )
            out.append({"cursor": cursor, "metric": metric, **diff})
        verbatim = [(a, b) for a, b in both if a["verbatim"]]
        diff = paired_diff_ci([a["emk"] for a, _ in verbatim], [b["emk"] for _, b in verbatim])
        out.append({"cursor": cursor, "metric": "emk_verbatim", **diff})
    return out


def compare_runs(before_path: Path, after_path: Path) -> dict[str, Any]:
    """Both runs judged, side by side per configuration they share."""
    started = time.perf_counter()
    before, after = (json.loads(p.read_text()) for p in (before_path, after_path))
    split = before["data"]["split"]
    if after["data"]["split"] != split:
        raise SystemExit("the two runs replayed different splits: compare the same positions")
    cursors = cursors_of(load_data(), split)
    for run in (before, after):
        judge_rows(run["rows"], cursors)
    configs = [c for c in before["configs"] if c in after["configs"]]
    return {
        "stamp": Stamp(model=after["stamp"]["model"]).finish(started),
        "runs": {
            name: {"file": str(path), "stamp": run["stamp"], "server_commit": run["server_commit"]}
            for name, path, run in (("before", before_path, before), ("after", after_path, after))
        },
        "data": after["data"],
        "configs": {
            c: {
                "options": after["configs"][c]["options"],
                "before": side(before["rows"], c),
                "after": side(after["rows"], c),
                "paired": paired(before["rows"], after["rows"], c),
            }
            for c in configs
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="bench.replay results at the commit before")
    parser.add_argument("after", type=Path, help="and after, the same positions")
    parser.add_argument("--out", type=Path, default=RESULTS / "replay_wellformed.json")
    args = parser.parse_args(argv)
    result = compare_runs(args.before, args.after)
    write_json(args.out, result)
    for config, c in result["configs"].items():
        for name in ("before", "after"):
            a = c[name]["all"]
            print(
                f"{config} {name}: malformed shown drafts {a['malformed']} of {a['shown']} "
                f"({a['share']:.1%}) {a['why']}, check p50 {a['check_ms_p50']:.2f} ms"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
