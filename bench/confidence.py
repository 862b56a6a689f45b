"""Issue 57: fit the confidence on a replay's validation rows, and its precision-coverage curve.

    python -m bench.replay --split validation --configs superposed+store \\
        --out bench/results/confidence_validation.json
    python -m bench.confidence fit bench/results/confidence_validation.json
    python -m bench.replay --split test --configs superposed+store \\
        --out bench/results/confidence_test_full.json
    python -m bench.confidence curve bench/results/confidence_test_full.json
    python -m bench.confidence cost   # its time per request: bench/results/confidence_cost.json

``fit`` reads the rows' ``features`` (what the server's stats said of each request:
lsp_server/completion/confidence.py) and fits a logistic model, target "the first draft is
right" (``right``), by Newton's method with a small ridge (``RIDGE``); it chooses the
``showThreshold`` default by issue 57's rule on the same rows (``choose``) and writes
bench/results/confidence.json (the weights, which ``COEFFICIENTS`` must equal: a test says so,
the threshold, the validation curve). ``curve`` scores a run's rows with those weights and
writes the curve at each cursor to bench/results/confidence_curve.json, which
docs/benchmarks.md renders (bench/report_replay.py).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.measure import RESULTS, Stamp, write_json
from bench.replay import draft_line

FIT = RESULTS / "confidence.json"
CURVE = RESULTS / "confidence_curve.json"
COST = RESULTS / "confidence_cost.json"
RIDGE = 1e-2  # the ridge on the weights (not the bias): keeps a rare feature's weight finite
NEWTON_STEPS = 50
PRECISION_GAIN = 1.5  # issue 57: shown first drafts right at least 1.5x as often as today
KEPT_RIGHT = 0.8  # ... while at least 80% of today's right first drafts are still shown
THRESHOLDS = tuple(round(0.05 * i, 2) for i in range(20))  # the curve's points
CHOICES = tuple(round(0.01 * i, 2) for i in range(100))  # the default's candidates
CURSORS = ("line-start", "mid-line")


def right(row: Mapping[str, Any]) -> bool:
    """Whether the row's first draft is right: its line is the rest of the target line, or a
    correct prefix of it at least a third of its length."""
    drafts = row["drafts"]
    first = draft_line(drafts[0]) if drafts else ""
    rest = row["rest"]
    if not first.strip():
        return False
    return first == rest or (rest.startswith(first) and 3 * len(first) >= len(rest))


def shown(row: Mapping[str, Any]) -> bool:
    """Whether the row shows something: a first draft with text on the line."""
    return bool(row["drafts"]) and bool(draft_line(row["drafts"][0]).strip())


def design(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> np.ndarray:
    """[N, F] the rows' features in ``names``' order (0 where a row has none)."""
    return np.array([[row.get("features", {}).get(n, 0.0) for n in names] for row in rows])


def fit(x: np.ndarray, y: np.ndarray, ridge: float = RIDGE) -> np.ndarray:
    """Logistic weights [F] for x [N, F] (column 0 the bias) and y [N] in {0, 1}: Newton's
    method on the mean log-loss plus ``ridge`` times the squared weights but the bias's."""
    w = np.zeros(x.shape[1])
    penalty = np.full(x.shape[1], ridge)
    penalty[0] = 0.0
    for _ in range(NEWTON_STEPS):
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ w, -60, 60)))
        grad = x.T @ (p - y) / len(y) + penalty * w
        hess = (x.T * (p * (1 - p))) @ x / len(y) + np.diag(penalty) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def score(rows: Sequence[Mapping[str, Any]], weights: Mapping[str, float]) -> list[float]:
    """Each row's confidence under ``weights`` (lsp_server/completion/confidence.py)."""
    from lsp_server.completion.confidence import confidence

    return [confidence(row.get("features") or {}, weights) for row in rows]


def curve(
    rows: Sequence[Mapping[str, Any]], sure: Sequence[float], thresholds: Sequence[float]
) -> list[dict[str, float]]:
    """For each threshold: the share of requests that show something (coverage), the share
    of shown first drafts that are right (precision), and the share of today's right first
    drafts still shown (kept); threshold 0 is today (everything shown)."""
    out = []
    today = [right(r) for r in rows]
    for t in thresholds:
        show = [shown(r) and s >= t for r, s in zip(rows, sure, strict=True)]
        hits = sum(s and ok for s, ok in zip(show, today, strict=True))
        out.append(
            {
                "threshold": t,
                "coverage": sum(show) / len(rows) if rows else 0.0,
                "precision": hits / sum(show) if sum(show) else math.nan,
                "kept": hits / sum(today) if sum(today) else math.nan,
                "requests": len(rows),
            }
        )
    return out


def choose(
    points: Mapping[str, Sequence[Mapping[str, float]]], thresholds: Sequence[float] = THRESHOLDS
) -> dict[str, Any]:
    """Issue 57's default: the lowest threshold whose precision is at least PRECISION_GAIN
    times today's (the first point: everything shown) while it keeps at least KEPT_RIGHT of
    today's right first drafts, at every cursor (``points``: cursor -> curve over
    ``thresholds``); None where none does. ``closest``: among the thresholds that keep
    enough at every cursor, the one whose smallest gain over the cursors is the largest
    (how near the rule comes), with its gain and kept share per cursor."""
    base = {c: pts[0]["precision"] for c, pts in points.items()}
    passing, closest, nearest = [], None, -1.0
    for i, t in enumerate(thresholds):
        gains = {c: pts[i]["precision"] / base[c] if base[c] else 0.0 for c, pts in points.items()}
        gains = {c: 0.0 if math.isnan(g) else g for c, g in gains.items()}
        kept = {c: pts[i]["kept"] for c, pts in points.items()}
        if min(kept.values()) < KEPT_RIGHT:
            continue
        if min(gains.values()) >= PRECISION_GAIN:
            passing.append(t)
        if min(gains.values()) > nearest:
            nearest = min(gains.values())
            closest = {"threshold": t, "gain": gains, "kept": kept}
    return {
        "threshold": passing[0] if passing else None,
        "closest": closest,
        "rule": f"precision >= {PRECISION_GAIN}x today's, kept >= {KEPT_RIGHT:.0%}, each cursor",
    }


def by_cursor(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    return {c: [r for r in rows if r["cursor"] == c] for c in CURSORS}


def cursor_curves(
    rows: Sequence[Mapping[str, Any]],
    weights: Mapping[str, float],
    thresholds: Sequence[float] = THRESHOLDS,
) -> dict[str, list[dict[str, float]]]:
    """Each cursor's curve over ``rows`` scored with ``weights``."""
    return {c: curve(mine, score(mine, weights), thresholds) for c, mine in by_cursor(rows).items()}


def auc(sure: Sequence[float], truth: Sequence[bool]) -> float:
    """The chance that a right first draft's confidence is above a wrong one's (ties half)."""
    pos = [s for s, t in zip(sure, truth, strict=True) if t]
    neg = [s for s, t in zip(sure, truth, strict=True) if not t]
    if not pos or not neg:
        return math.nan
    wins = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg)
    return wins / (len(pos) * len(neg))


def separation(rows: Sequence[Mapping[str, Any]], weights: Mapping[str, float]) -> dict[str, Any]:
    """How well the confidence tells right first drafts from wrong ones at each cursor: AUC,
    and its log-loss against a constant at the rows' own rate of right drafts."""
    out: dict[str, Any] = {}
    for cursor, mine in by_cursor(rows).items():
        truth = [right(r) for r in mine]
        sure = np.array(score(mine, weights))
        y = np.array(truth, dtype=float)
        out[cursor] = {
            "auc": auc(list(sure), truth),
            "log_loss": log_loss(sure, y),
            "constant_log_loss": log_loss(np.full(len(y), y.mean()), y),
        }
    return out


def log_loss(p: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def run_fit(path: Path) -> dict[str, Any]:
    from lsp_server.completion.confidence import FEATURES

    started = time.perf_counter()
    run = json.loads(path.read_text())
    rows = [r for r in run["rows"] if "features" in r]
    x = design(rows, FEATURES)
    y = np.array([float(right(r)) for r in rows])
    w = fit(x, y)
    weights = {n: round(float(v), 4) for n, v in zip(FEATURES, w, strict=True)}
    points = cursor_curves(rows, weights)
    result = {
        "stamp": Stamp(model=run["stamp"]["model"]).finish(started),
        "rows_from": str(path.relative_to(path.parents[2])) if path.is_absolute() else str(path),
        "rows_stamp": run["stamp"],
        "requests": len(rows),
        "right": int(y.sum()),
        "coefficients": weights,
        "separation": separation(rows, weights),
        "curve": points,
        "default": choose(cursor_curves(rows, weights, CHOICES), CHOICES),
    }
    write_json(FIT, result)
    return result


def at_threshold(points: Mapping[str, Sequence[Mapping[str, float]]], at: float) -> dict[str, Any]:
    """Each cursor's precision gain over today's and kept share at ``at`` (``points``: the
    curves at 0 and at ``at``)."""
    return {
        "threshold": at,
        "gain": {c: p[1]["precision"] / p[0]["precision"] for c, p in points.items()},
        "kept": {c: p[1]["kept"] for c, p in points.items()},
    }


def run_curve(path: Path) -> dict[str, Any]:
    started = time.perf_counter()
    run = json.loads(path.read_text())
    weights = json.loads(FIT.read_text())["coefficients"]
    rows = [r for r in run["rows"] if "features" in r]
    points = cursor_curves(rows, weights)
    chosen = json.loads(FIT.read_text())["default"]
    at = chosen["threshold"] if chosen["threshold"] is not None else chosen["closest"]["threshold"]
    result = {
        "stamp": Stamp(model=run["stamp"]["model"]).finish(started),
        "rows_from": str(path),
        "rows_stamp": run["stamp"],
        "curve": points,
        "at_default": at_threshold(cursor_curves(rows, weights, (0.0, at)), at),
        "separation": separation(rows, weights),
    }
    write_json(CURVE, result)
    return result


def curve_table(points: Mapping[str, Sequence[Mapping[str, float]]]) -> str:
    """The curves side by side: a row per threshold, coverage / precision / kept per cursor."""
    from bench.tables import table

    header = ["threshold"]
    for cursor in points:
        header += [f"{cursor} coverage", "precision", "kept"]
    rows = []
    last = max(
        i for i, _ in enumerate(THRESHOLDS) if any(p[i]["coverage"] for p in points.values())
    )
    for i, t in enumerate(THRESHOLDS[: last + 2]):  # up to the first that shows nothing
        row: list[Any] = [f"{t:.2f}"]
        for pts in points.values():
            p = pts[i]
            row += [f"{p['coverage']:.1%}", pct(p["precision"]), pct(p["kept"])]
        rows.append(row)
    return table(header, rows)


def pct(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.1%}"


def report_section() -> str | None:
    """docs/benchmarks.md's section (bench/report.py), or None before the test curve exists."""
    from bench.tables import say

    if not (FIT.exists() and CURVE.exists()):
        return None
    fitted, tested = json.loads(FIT.read_text()), json.loads(CURVE.read_text())
    chosen = fitted["default"]
    if chosen["threshold"] is None:
        near = chosen["closest"]
        at = ", ".join(
            f"{c} {near['gain'][c]:.2f}x keeping {near['kept'][c]:.0%}" for c in near["gain"]
        )
        default = (
            f"no threshold meets it at both cursors; the nearest, {near['threshold']:.2f} "
            f"(the default `showThreshold`), gives {at} on validation. `showWhen` stays "
            "`always`."
        )
    else:
        default = f"`showWhen: confident`, `showThreshold` {chosen['threshold']:.2f}."
    n = {c: pts[0]["requests"] for c, pts in tested["curve"].items()}
    there = tested["at_default"]
    default += (
        f" On the test split at {there['threshold']:.2f}: "
        + ", ".join(
            f"{c} {there['gain'][c]:.2f}x keeping {there['kept'][c]:.0%}" for c in there["gain"]
        )
        + "."
    )
    sep = ", ".join(
        f"{split} {c} {v['auc']:.2f} (log-loss {v['log_loss']:.3f}, "
        f"a constant's {v['constant_log_loss']:.3f})"
        for split, run in (("validation", fitted), ("test", tested))
        for c, v in run["separation"].items()
    )
    return say(
        "confidence",
        separation=sep,
        fit_command=fitted["stamp"]["command"],
        fit_rows=fitted["rows_from"],
        curve_command=tested["stamp"]["command"],
        curve_rows=tested["rows_from"],
        ridge=RIDGE,
        requests=fitted["requests"],
        right=fitted["right"],
        curves="Test split ("
        + ", ".join(f"{c}: {k} requests" for c, k in n.items())
        + "):\n\n"
        + curve_table(tested["curve"])
        + "\n\nValidation split (in-sample, where the default was chosen):\n\n"
        + curve_table(fitted["curve"]),
        gain=PRECISION_GAIN,
        kept=f"{KEPT_RIGHT:.0%}",
        default=default,
    )


def run_cost(calls: int = 2000) -> dict[str, Any]:
    """The confidence's cost per request (features and the weighted sum) on a request's
    worth of inputs: k + 2 = 5 drafts of 12 tokens, their clean-ups, a memory match that
    leads; the median over ``calls``, in ms (issue 57: under 1 ms)."""
    from lsp_server.completion.cleanup import Suggestion
    from lsp_server.completion.confidence import confidence, features
    from superposed.ngram import Match
    from superposed.types import Draft

    texts = [f"self.value = compute(x, y, {i})" for i in range(5)]
    drafts = [Draft(t, list(range(i, i + 12)), -2.0 - i) for i, t in enumerate(texts)]
    cleaned = [Suggestion(t, d.score) for t, d in zip(texts, drafts, strict=True)]
    match = Match(length=40, next_counts={3: 4, 5: 1}, continuation=list(range(16)))
    times, started = [], time.perf_counter()
    for _ in range(calls):
        start = time.perf_counter()
        confidence(features(drafts, cleaned, cleaned[0], match, texts[0], True))
        times.append((time.perf_counter() - start) * 1e3)
    median = float(np.median(times))
    print(f"confidence per request: median {median:.4f} ms over {calls} calls")
    result = {"stamp": Stamp(model="none").finish(started), "median_ms": median, "calls": calls}
    write_json(COST, result)
    return result


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=("fit", "curve", "cost"))
    parser.add_argument("rows", type=Path, nargs="?", help="a replay's results JSON (its rows)")
    args = parser.parse_args(argv)
    if args.what == "cost":
        run_cost()
        return
    if args.rows is None:
        parser.error(f"{args.what} reads a replay's results JSON")
    result = run_fit(args.rows) if args.what == "fit" else run_curve(args.rows)
    for cursor, pts in result["curve"].items():
        for p in pts:
            print(f"{cursor:10s} t={p['threshold']:.2f} coverage {p['coverage']:.3f} "
                  f"precision {p['precision']:.3f} kept {p['kept']:.3f}")  # fmt: skip
    if "default" in result:
        print(result["default"])


if __name__ == "__main__":
    main()
