"""bench/report_models.py: the paired model comparison and the default rule of issue 16."""

from __future__ import annotations

from typing import Any

from bench.report_models import CONFIG, MAX_RATIO, decision, paired
from superposed.embedded import GEMMA3, SMOLLM2


def run(esk: list[float], skip: int | None = None) -> dict[str, Any]:
    """A replay result with one row per position (two cursors per task)."""
    rows = [
        {"config": CONFIG, "task": f"t{i // 2}", "cursor": ("line-start", "mid-line")[i % 2],
         "esk": v, "emk": 0.0, "csk": 0.0, "ms": 100.0}
        for i, v in enumerate(esk)
        if i != skip
    ]  # fmt: skip
    return {"rows": rows}


def test_paired_differences_use_the_positions_both_runs_answered() -> None:
    gemma = run([0.9, 0.8, 0.7, 0.6], skip=3)
    small = run([0.5, 0.4, 0.3, 0.0])
    both = paired(gemma, small, "esk", None)
    assert both["n"] == 3 and abs(both["mean"] - 0.4) < 1e-9
    line_start = paired(gemma, small, "esk", "line-start")
    assert line_start["n"] == 2 and abs(line_start["mean"] - 0.4) < 1e-9


def test_gemma_becomes_the_default_only_if_it_wins_and_is_fast_enough() -> None:
    win = {"mean": 0.05, "lo": 0.01, "hi": 0.09, "n": 200}
    tie = {"mean": 0.05, "lo": -0.01, "hi": 0.09, "n": 200}
    assert decision(win, MAX_RATIO)[0] == GEMMA3.name
    assert decision(win, MAX_RATIO + 0.01)[0] == SMOLLM2.name
    assert decision(tie, 1.0)[0] == SMOLLM2.name
    assert decision(win, None)[0] == SMOLLM2.name  # no side-by-side latency: no change
