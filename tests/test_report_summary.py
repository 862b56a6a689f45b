"""docs/benchmarks.md's first screen (issue 53 item 6): the defaults' numbers, each from the
newest result that measured them, with that result's own date and commit."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from bench import report_summary as summary
from bench.measure import RESULTS, ROOT
from bench.report import path


def ci(mean: float, n: int = 100) -> dict[str, float]:
    return {"mean": mean, "lo": mean - 0.05, "hi": mean + 0.05, "n": n}


def replay_run(date: str, commit: str, emk: float, n: int = 100, **extra: Any) -> dict[str, Any]:
    """A replay result as bench.replay saves it, cut to what the first page reads."""
    cell = {"em1": ci(0.1, n), "emk": ci(emk, n), "esk": ci(0.5, n), "p50_ms": 412.0, "n": n}
    run: dict[str, Any] = {
        "_file": f"bench/results/replay-{commit}.json",
        "stamp": {
            "date": date,
            "commit": commit,
            "model": summary.default_model(),
            "command": "python -m bench.replay --split test",
        },  # fmt: skip
        "data": {"split": "test", "targets": n},
        "configs": {
            "greedy": {"options": {"method": "greedy", "k": 1}, "store": True},
            "default": {"options": {"memory": True}, "store": True},
        },
        "summary": {
            "greedy": {"line-start": {"all": {**cell, "emk": ci(0.99, n)}}},
            "default": {"line-start": {"all": cell}},
        },
    }
    run.update(extra)
    return run


def test_the_line_carries_the_result_files_numbers_date_and_commit() -> None:
    run = replay_run("2026-12-04 10:00 UTC", "abc1234", emk=0.17)
    line = summary.replay_lines([run], quick=False)[0]
    assert (line.file, line.date, line.commit) == (run["_file"], "2026-12-04 10:00 UTC", "abc1234")
    # the default configuration's EM@3, not greedy's 99%
    assert "EM@3 17.0% [12.0, 22.0]" in line.default and "99.0" not in line.default
    assert "EM@1 10.0%" in line.default and "p50 412 ms" in line.default
    assert "(n = 100)" in line.default


def test_the_newest_run_of_the_defaults_wins_and_the_others_do_not_count() -> None:
    old = replay_run("2026-12-01 08:00 UTC", "old0000", emk=0.10)
    new = replay_run("2026-12-03 08:00 UTC", "new0000", emk=0.20)
    partial = replay_run("2026-12-05 08:00 UTC", "part000", emk=0.30, partial=True)
    limited = replay_run("2026-12-05 09:00 UTC", "lim0000", emk=0.40, n=50)
    other = replay_run("2026-12-05 10:00 UTC", "oth0000", emk=0.50)
    other["configs"]["default"]["options"] = {"memory": False}  # not the defaults
    validation = replay_run("2026-12-05 11:00 UTC", "val0000", emk=0.60)
    validation["data"]["split"] = "validation"
    quick = replay_run("2026-12-05 12:00 UTC", "qui0000", emk=0.70)
    quick["stamp"]["command"] = "python -m bench.replay --quick"
    runs = [old, new, partial, limited, other, validation, quick]
    assert summary.replay_lines(runs, quick=False)[0].commit == "new0000"
    assert summary.replay_lines(list(reversed(runs)), quick=False)[0].commit == "new0000"
    assert summary.replay_lines(runs, quick=True)[0].commit == "qui0000"
    assert summary.replay_lines([other], quick=False)[0].file == ""  # said missing, not made up


def test_a_retired_setting_at_its_old_default_still_counts_as_the_defaults() -> None:
    assert summary.is_default({"context": "off", "memory": True})
    assert not summary.is_default({"memory": False})


def test_a_dated_latency_run_outranks_the_undated_ones_and_the_server_commit_is_named() -> None:
    cases = {case: {"p50_ms": 100.0 + i} for i, case in enumerate(summary.LATENCY_CASES)}
    undated = [{"_file": f"bench/results/{name}", "cases": cases, "after": f"{i}aaaaaa"}
               for i, name in enumerate(summary.LATENCY_UNDATED)]  # fmt: skip
    assert summary.latency_line(undated).commit == "0aaaaaa"
    dated = {"_file": "bench/results/lsp_latency_x.json", "cases": cases,
             "date": "2026-12-06 08:00 UTC", "commit": "d00d000"}  # fmt: skip
    line = summary.latency_line([*undated, dated])
    assert (line.date, line.commit) == ("2026-12-06 08:00 UTC", "d00d000")
    assert "p50 100 ms" in line.default and "102 ms typing" in line.default
    run = replay_run("2026-12-04 10:00 UTC", "abc1234", emk=0.2, server_commit="f9695620b3df")
    assert summary.stamp_of(run) == ("2026-12-04 10:00 UTC", "abc1234 (server f969562)")


def test_the_committed_first_page_is_the_committed_results() -> None:
    """The first page of docs/benchmarks.md shows the newest full replay of the defaults at
    each cursor with the numbers, date and commit of its own file."""
    lines = summary.lines(quick=False)
    assert summary.summary_table(quick=False) in path(False).read_text()
    for line, cursor in zip(lines[:2], ("line-start", "mid-line"), strict=True):
        run = json.loads((ROOT / line.file).read_text())
        assert (line.date, line.commit) == (run["stamp"]["date"], run["stamp"]["commit"])
        name = next(n for n, c in run["configs"].items() if summary.is_default(c["options"]))
        cell = run["summary"][name][cursor]["all"]
        assert f"EM@3 {100 * cell['emk']['mean']:.1f}%" in line.default
        assert f"(n = {cell['n']})" in line.default
    # No replay of the defaults on the test split, of that size, is newer than the one shown.
    for other in RESULTS.glob("replay*.json"):
        data = json.loads(other.read_text())
        cell = summary._replay_cell({**data, "_file": str(other)}, "mid-line")
        if cell is not None and "--quick" not in data["stamp"]["command"]:
            assert cell["n"] < 100 or data["stamp"]["date"] <= lines[1].date, other


def test_the_first_page_survives_results_it_cannot_read() -> None:
    """A result missing a field the page reads is left out, not a crash of the report."""
    broken = copy.deepcopy(replay_run("2026-12-09 10:00 UTC", "bad0000", emk=0.2))
    broken["configs"] = ["not", "a", "mapping"]
    good = replay_run("2026-12-01 10:00 UTC", "good000", emk=0.2)
    assert summary.replay_lines([broken, good], quick=False)[0].commit == "good000"


def test_the_latency_script_records_its_date_and_commit(tmp_path: Path) -> None:
    """bench.lsp_latency's results had no date: the first page could only say "not recorded"."""
    from bench.lsp_latency import save

    save({"cases": {}}, (0.0, 0.0, 0.0), tmp_path / "run", "lsp_latency", ["--rounds", "1"],
         markdown=lambda result: "")  # fmt: skip
    saved = json.loads((tmp_path / "run.json").read_text())
    date, commit = summary.stamp_of({**saved, "_file": "run.json"})
    assert date.endswith(" UTC") and date[:4].isdigit() and commit not in ("", "not recorded")


def test_next_edits_get_a_line_per_test_split_each_from_its_own_split() -> None:
    """Issue 55's rule reads both test splits: each gets its line. The pick by the command's
    ``--split test`` once took the newer ``--split test2`` run as the first split's."""

    def run(split: str, date: str, precision: float) -> dict[str, Any]:
        return {
            "_file": f"bench/results/next_edits-{split}.json",
            "stamp": {"date": date, "commit": f"{split}000"[:7], "command": f"--split {split}"},
            "data": {"split": split},
            "summary": {
                "precision": ci(precision),
                "ordinary": {"false_alarms_per_100": {"mean": 2.5, "lo": 0.0, "hi": 6.2, "n": 80}},
                "repetitive": {"recall3": ci(0.21)},
            },
        }

    runs = [
        run("test", "2026-12-06 08:25 UTC", 0.705),
        run("test2", "2026-12-06 08:31 UTC", 0.716),
        run("validation", "2026-12-06 08:40 UTC", 0.889),
    ]
    before = run("test2", "2026-12-06 08:39 UTC", 0.691)
    before["server_commit"] = "37a9067"  # the rules before, run after: not the defaults today
    runs.append(before)
    first, second = summary.next_edits_lines(runs)
    assert first.file.endswith("next_edits-test.json") and "precision 70.5%" in first.default
    assert second.file.endswith("next_edits-test2.json") and "precision 71.6%" in second.default
    assert "needs, on every test split, 90%" in first.default  # issue 55's bar, not issue 35's
    (missing, _) = summary.next_edits_lines([runs[1]])
    assert missing.file == "" and "--split test`" in missing.default


def test_the_cold_request_line_reads_the_newest_run_by_phase() -> None:
    def run(date: str, ms: float) -> dict[str, Any]:
        phases = {"ms": ms, "prefill_ms": 812.0, "prefilled": 210, "steps_ms": 341.0}
        return {
            "_file": f"bench/results/cold_request-{ms:.0f}.json",
            "date": date,
            "commit": "abc1234",
            "cases": {"open": phases, "rest": {**phases, "ms": ms / 2}},
        }

    line = summary.cold_line(
        [run("2026-12-06 09:00 UTC", 1106.0), run("2026-12-05 09:00 UTC", 9.0)]
    )
    assert line.file.endswith("cold_request-1106.json") and line.date == "2026-12-06 09:00 UTC"
    assert "p50 1,106 ms in a file just opened (812 of them prefilling 210 tokens" in line.default
    assert "553 ms after a cursor rest" in line.default
    assert summary.cold_line([]).file == ""  # said missing, not made up
