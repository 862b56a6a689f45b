"""The embedded models side by side, and which one is the default: a section of
docs/benchmarks.md from bench/replay.py's per-model runs and bench/latency.py --models.

The rule (issue 16): Gemma 3 270M becomes the default only if it wins edit similarity@3 on
the replay's test split with a paired interval excluding 0, at a superposed k=3 request p50
no more than 1.5x SmolLM2's on the fast path, measured side by side; otherwise SmolLM2 stays.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from bench.measure import RESULTS
from bench.metrics import paired_diff_ci
from bench.replay import CURSORS
from bench.tables import diff_text, load_file, met, pct, say, stamps_table, table, verdict
from superposed.embedded import DEFAULT_MODEL, EMBEDDED, GEMMA3, SMOLLM2

CONFIG = "superposed+store"  # the configuration both models ran
MAX_RATIO = 1.5  # Gemma's k=3 p50 at most this times SmolLM2's
LATENCY = RESULTS / "latency_models.json"


def replay_file(model: str) -> Path:
    """Where ``python -m bench.replay --model MODEL --out ...`` wrote this model's run."""
    return RESULTS / f"replay-{model}.json"


def _rows(run: dict[str, Any], cursor: str | None = None) -> dict[tuple[str, str], Any]:
    return {
        (r["task"], r["cursor"]): r
        for r in run["rows"]
        if r["config"] == CONFIG and cursor in (None, r["cursor"])
    }


def paired(a: dict[str, Any], b: dict[str, Any], metric: str, cursor: str | None) -> Any:
    """a - b in ``metric`` over the positions both runs answered (one cursor, or both)."""
    ra, rb = _rows(a, cursor), _rows(b, cursor)
    same = [key for key in ra if key in rb]
    return paired_diff_ci([ra[k][metric] for k in same], [rb[k][metric] for k in same])


def decision(es: dict[str, float], ratio: float | None) -> tuple[str, list[str]]:
    """The default the rule picks, and one line per condition."""
    wins = es["lo"] > 0
    fast = ratio is not None and ratio <= MAX_RATIO
    lines = [
        f"- {GEMMA3.name} wins edit similarity@3 (both cursors, paired): {verdict(es)} "
        f"({diff_text(es)}).",
        f"- its superposed k=3 p50 at most {MAX_RATIO}x {SMOLLM2.name}'s, side by side: "
        + (
            "not measured"
            if ratio is None
            else f"{met(fast)} ({ratio:.2f}x)"
        )
        + ".",  # fmt: skip
        f"- the README states its terms ({GEMMA3.license}): **met**.",
    ]
    return (GEMMA3.name if wins and fast else SMOLLM2.name), lines


def models_section() -> str | None:
    """The section, or None until both models' replay runs exist."""
    runs = {m: load_file(replay_file(m)) for m in EMBEDDED}
    if any(r is None for r in runs.values()):
        return None
    small, gemma = runs[SMOLLM2.name], runs[GEMMA3.name]
    assert small is not None and gemma is not None
    latency = load_file(LATENCY)
    rows = []
    for model, run in runs.items():
        assert run is not None
        mine = list(_rows(run).values())
        cells = [pct(run["summary"][CONFIG][c]["all"][m]) for c in CURSORS for m in ("esk", "emk")]
        rows.append([model, len(mine), *cells, f"{statistics.median(r['ms'] for r in mine):.0f}"])
    header = ["model", "positions"] + [
        f"{c}: {m}" for c in CURSORS for m in ("ES@3", "EM@3")
    ] + ["replay p50 ms (its own run)"]  # fmt: skip
    es = paired(gemma, small, "esk", None)
    paired_rows = [
        [name, cursor or "both", diff_text(d), verdict(d)]
        for name, metric in (("ES@3", "esk"), ("EM@3", "emk"), ("CS@3", "csk"))
        for cursor in (*CURSORS, None)
        for d in [paired(gemma, small, metric, cursor)]
    ]
    ratio, side_by_side = None, ""
    if latency is not None:
        lat_rows = []
        for setting, per_model in latency["settings"].items():
            for model, m in per_model.items():
                lat_rows.append([setting, model, m["prompt_tokens"], m["median_ms"]["greedy"],
                                 m["median_ms"]["superposed k=3"],
                                 f"{m['superposed k=3 / first model']:.2f}x"])  # fmt: skip
        gemma_long = latency["settings"].get("long", {}).get(GEMMA3.name)
        ratio = gemma_long and gemma_long["superposed k=3 / first model"]
        s = latency["stamp"]
        lat_header = ["setting", "model", "prompt tokens", "greedy ms", "superposed k=3 ms",
                      "k=3 / smollm2's"]  # fmt: skip
        side_by_side = say("models_latency", command=s["command"], date=s["date"],
                           runner=latency["runner"], runs=s["runs"], load_start=s["load_start"],
                           load_end=s["load_end"], table=table(lat_header, lat_rows)) + "\n\n"
    default, lines = decision(es, ratio)
    return say(
        "models",
        split=small["data"]["split"],
        config=CONFIG,
        table=table(header, rows),
        paired_table=table(
            ["metric", "cursor", "points [95% interval], n", "gemma > smollm2"], paired_rows
        ),
        latency=side_by_side,
        gemma=GEMMA3.name,
        lines="\n".join(lines),
        default=default,
        code_default=DEFAULT_MODEL,
        agrees=" (they agree)." if default == DEFAULT_MODEL else ": **they disagree**.",
        stamps=stamps_table([small, gemma], load="load avg"),
    ) + "\n"
