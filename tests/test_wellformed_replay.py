"""The replay's count of malformed shown drafts (bench/replay.py's rows, the driver's line)."""

from __future__ import annotations

from bench.replay import Position, line_row
from bench.replay_driver import summary_line

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
