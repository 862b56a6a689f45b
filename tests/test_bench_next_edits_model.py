"""bench/next_edits_model.py's reading of a saved walk under a margin (pure, tiny inputs)."""

from __future__ import annotations

from typing import Any

from bench.next_edits_model import filtered_row


def proposal(line: int, right: bool) -> dict[str, Any]:
    start = {"line": line, "character": 0}
    return {"range": {"start": start, "end": start}, "newText": "b", "oldText": "a",
            "uri": "m.py", "right": right}  # fmt: skip


def scored(line: int, total: float | None) -> dict[str, Any]:
    return {"key": f"m.py:{line}", "total": total, "mean": total}


def row(kind: str, steps: list[dict[str, Any]], later: int = 2) -> dict[str, Any]:
    n = len(steps)
    return {"task": "t", "kind": kind, "later": later, "steps": steps,
            "notified_ms": [10.0] * n, "pause_ms": [0.0] * n, "request_ms": [1.0] * n}  # fmt: skip


def test_a_walk_stops_where_the_margin_took_every_right_proposal_away() -> None:
    steps = [
        {"proposals": [proposal(1, False), proposal(2, True)], "accepted": 1},
        {"proposals": [proposal(3, True)], "accepted": 0},
    ]
    scores = [[scored(1, -5.0), scored(2, 1.0)], [scored(3, -1.0)]]
    saved = row("repetitive", steps)
    everything = filtered_row(saved, scores, [1, 1], float("-inf"), "total")
    assert (everything["reached"], everything["reached_top1"]) == (2, 0)
    assert (everything["proposed"], everything["right"]) == (3, 2)
    kept = filtered_row(saved, scores, [1, 1], 0.0, "total")
    # the wrong one went (the right one is first now); the second step's right one too: stop
    assert (kept["reached"], kept["reached_top1"]) == (1, 1)
    assert (kept["proposed"], kept["right"]) == (1, 1)
    assert len(kept["steps"]) == len(kept["notified_ms"]) == 2


def test_an_ordinary_change_is_no_false_alarm_once_its_wrong_proposals_went() -> None:
    steps = [{"proposals": [proposal(1, False), proposal(4, False)], "accepted": None}]
    saved = row("ordinary", steps, later=0)
    scores = [[scored(1, -2.0), scored(4, None)]]  # unscored (over lines): always shown
    assert filtered_row(saved, scores, [0], -3.0, "total")["false_first"] == 2
    assert filtered_row(saved, scores, [0], 0.0, "total")["false_alarm"] == 1.0
    scores = [[scored(1, -2.0), scored(4, -2.5)]]
    assert filtered_row(saved, scores, [0], 0.0, "total")["false_alarm"] == 0.0
