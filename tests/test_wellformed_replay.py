"""The replay's count of malformed shown drafts (bench/replay_wellformed.py)."""

from __future__ import annotations

from bench.replay import Position, cursor_of, line_row
from bench.replay_driver import summary_line
from bench.replay_wellformed import count, judge_rows, paired

DOCUMENT = "def read(path):\n    \n    return data\n"


def position(task: str = "r#1") -> Position:
    return Position(
        task=task, repo="r", path="a.py", cursor="line-start", line=1, column=4,
        document=DOCUMENT, rest="data = load(path)", verbatim=False, in_file=False,
    )  # fmt: skip


def test_a_replay_row_counts_its_malformed_shown_drafts() -> None:
    drafts = ["data = load(path))", "data = load(path)", "", 'data = "x']
    row = line_row(position(), drafts)
    assert (row["shown"], row["malformed"]) == (3, 2)
    rows = [{"config": "c", **row}, {"config": "c", **line_row(position("r#2"), drafts[1:2])}]
    assert summary_line(rows, "c").endswith("malformed shown drafts: 2 of 4 (50.0%)")


def test_runs_are_judged_again_and_paired() -> None:
    cursors = {("r#1", "line-start"): cursor_of(position())}
    base = {"task": "r#1", "cursor": "line-start", "config": "c", "verbatim": True, "ms": 1.0}
    before = [{**base, "drafts": ["data = load(path))", "data = load(path)"], "em1": 0.0}]
    after = [{**base, "drafts": ["data = load(path)"], "em1": 1.0}]
    for rows in (before, after):
        for r in rows:
            r["emk"] = r["esk"] = 1.0
        judge_rows(rows, cursors)
    assert count(before)["why"] == {"brackets": 1} and count(before)["share"] == 0.5
    assert count(after)["malformed"] == 0
    diffs = {(p["cursor"], p["metric"]): p for p in paired(before, after, "c")}
    assert diffs[("line-start", "malformed")]["mean"] == -1.0
    assert diffs[("line-start", "em1")]["mean"] == 1.0
