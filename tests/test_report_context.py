"""Issue 22 part 3's verdict (bench/report_context.py): paired on new lines, the issue's rule."""

from __future__ import annotations

from typing import Any

from bench.report_context import compare_new, met


def row(config: str, task: str, cursor: str, esk: float, ms: float, new: bool = True) -> dict:
    return {"config": config, "task": task, "cursor": cursor, "esk": esk, "emk": 0.0, "ms": ms,
            "verbatim": not new, "in_file": False}  # fmt: skip


def result(gain: float, slower: float) -> dict[str, Any]:
    rows = []
    for i in range(30):
        base = 0.4 + 0.01 * (i % 7)
        rows.append(row("off", f"t{i}", "line-start", base, 1000 + i))
        rows.append(row("ctx", f"t{i}", "line-start", base + gain, (1000 + i) * slower))
    # a verbatim line that the context would spoil: not a new line, so not counted
    rows.append(row("off", "v", "line-start", 1.0, 1000, new=False))
    rows.append(row("ctx", "v", "line-start", 0.0, 9000, new=False))
    return {"rows": rows, "configs": {"off": {}, "ctx": {}}}


def test_a_gain_of_three_points_at_most_15_percent_slower_meets_the_rule() -> None:
    c = compare_new(result(0.05, 1.1), "ctx", "line-start")
    assert c["n"] == 30  # the verbatim line is left out
    assert abs(c["esk"]["mean"] - 0.05) < 1e-9 and c["esk"]["lo"] > 0
    assert met(c)


def test_too_small_a_gain_or_too_slow_misses_it() -> None:
    assert not met(compare_new(result(0.02, 1.0), "ctx", "line-start"))
    assert not met(compare_new(result(0.05, 1.3), "ctx", "line-start"))
    assert not met(compare_new(result(-0.05, 1.0), "ctx", "line-start"))
