"""bench.lsp_latency's rest and accept cases in a side-by-side run (issue 39)."""

from __future__ import annotations

from typing import Any

from bench import lsp_latency as L


def _modes(times: dict[str, list[float]]) -> dict[str, Any]:
    return {"modes": {mode: {"request": L.summary(ms)} for mode, ms in times.items()}}


def _run(rest: list[float], accept: list[float]) -> dict[str, Any]:
    return {
        "cases": {"short": L.summary([1.0])},
        "first_request": None,
        "cursor_rest": {"rest_s": 1.0, **_modes({"today": rest, "cursorRest": rest[:1]})},
        "accept": {
            "enter_s": 0.3,
            "cases": {"at once": _modes({"without": accept, "triggerOnAccept": accept[:1]})},
        },
    }


def test_a_servers_runs_pool_the_rest_and_accept_cases_request_by_request() -> None:
    """--rounds 2: every run's rest and accept requests count (they were the first run's)."""
    both = L.pooled([_run([10.0, 20.0], [100.0, 300.0]), _run([40.0], [200.0])])
    today = both["cursor_rest"]["modes"]["today"]["request"]
    assert today["n"] == 3 and today["p50_ms"] == 20.0
    assert both["cursor_rest"]["modes"]["cursorRest"]["request"]["values_ms"] == [10.0, 40.0]
    assert both["cursor_rest"]["ratio_p50"] == 25.0 / 20.0  # from the pooled p50s
    at_once = both["accept"]["cases"]["at once"]
    assert at_once["modes"]["without"]["request"]["p50_ms"] == 200.0
    assert at_once["ratio_p50"] == 150.0 / 200.0 and both["accept"]["enter_s"] == 0.3


def test_the_before_table_has_a_row_per_rest_and_accept_mode() -> None:
    now = _run([10.0], [100.0])
    before = _run([20.0], [400.0])
    now["before"] = {"ref": "abc123", **before, "rounds": 1}
    now["after"] = "def456"
    section = "\n".join(L.before_table(now))
    assert "| after a cursor rest, today | 20 | 10 | 0.50x |" in section
    assert "| after an accept, asked at once, without | 400 | 100 | 0.25x |" in section
    assert "This: the server of commit def456." in section


def test_a_run_without_the_accept_case_renders_no_accept_section() -> None:
    assert L.accept_table({"accept": None}) == [] and L.mode_cases({"accept": None}) == {}
