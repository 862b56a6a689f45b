"""Issue 27 item 4's report (bench/report_shared.py): the paired answer on new lines, its
rendering, the snapshots and the budget."""

from __future__ import annotations

from typing import Any

from bench.report_shared import (
    budget_part,
    compare,
    replay_part,
    snapshots_part,
    verdict,
)


def row(
    config: str, task: str, esk: float, ms: float, new: bool = True, drafts: Any = None
) -> dict:
    return {"config": config, "task": task, "cursor": "line-start", "esk": esk, "emk": 0.0,
            "ms": ms, "verbatim": not new, "in_file": False,
            "drafts": drafts or ["x"]}  # fmt: skip


def result(gain: float, slower: float) -> dict[str, Any]:
    rows = []
    for i in range(30):
        base = 0.4 + 0.01 * (i % 7)
        rows.append(row("auto", f"t{i}", base, 1000 + i))
        rows.append(row("shared", f"t{i}", base + gain, (1000 + i) * slower, drafts=["y"]))
    # a verbatim line the index spoils: counted in all, not in new
    rows.append(row("auto", "v", 1.0, 1000, new=False))
    rows.append(row("shared", "v", 0.0, 1000, new=False))
    rows.append({**row("auto", "m", 0.5, 1000), "cursor": "mid-line"})  # the other cursor
    return {
        "rows": rows,
        "data": {"splits": {"test": ["pallets/flask", "psf/black"]}},
        "stamp": {"model": "m", "commit": "abc", "load_start": [1.0], "load_end": [2.0]},
    }


def test_new_lines_are_paired_without_the_verbatim_line_or_the_other_cursor() -> None:
    c = compare(result(0.05, 1.5), "new")
    assert c["n"] == 30
    assert abs(c["esk"]["mean"] - 0.05) < 1e-9 and c["esk"]["lo"] > 0
    assert abs(c["ratio"] - 1.5) < 0.01 and c["differ"] == 30
    assert compare(result(0.05, 1.5), "all")["n"] == 31


def test_the_verdict_says_lift_loss_or_neither_by_the_interval() -> None:
    assert verdict(compare(result(0.05, 1.0), "new")).startswith("lifts")
    assert verdict(compare(result(-0.05, 1.0), "new")).startswith("lowers")
    flat = result(0.0, 1.0)
    for i, r in enumerate(
        r for r in flat["rows"] if r["config"] == "shared" and r["task"][0] == "t"
    ):
        r["esk"] += 0.02 if i % 2 else -0.02  # noise around 0
    assert verdict(compare(flat, "new")).startswith("does not")


def test_the_section_renders_both_subsets_and_the_answer() -> None:
    corpus = {"tokens": 2_500_000, "files": 9, "packages": {"pip": "pip 1.0"},
              "left_out": {"pip": ["_vendor/rich"]}}  # fmt: skip
    text = "\n".join(replay_part(result(0.05, 1.5), corpus))
    assert "| all | 31 |" in text and "| new | 30 |" in text
    assert "2.5M tokens" in text and "pip/_vendor/rich" in text
    assert (
        "**Answer:** the organisation's index lifts edit similarity@3 on new lines by 5.0" in text
    )


def test_snapshots_pair_with_the_main_runs_store_rows() -> None:
    run = result(0.0, 1.0)
    rows = [{**r, "config": "snapshots"} for r in run["rows"] if r["config"] == "shared"]
    snaps: dict[str, Any] = {"rows": rows, "stamp": {"commit": "def"}}
    text = "\n".join(snapshots_part(run, snaps))
    assert "| all | 31 |" in text and "same within intervals" in text
    for r in snaps["rows"]:
        r["esk"] -= 0.1
    assert "| differs |" in "\n".join(snapshots_part(run, snaps))


def test_the_budget_part_puts_three_latencies_side_by_side_and_pairs_the_quality() -> None:
    run = result(0.0, 3.0)  # the unbudgeted index: 3x the store's latency
    for r in [r for r in run["rows"] if r["config"] == "shared"]:
        faster = {**r, "config": "budget", "ms": r["ms"] / 2.5, "esk": r["esk"] - 0.1}
        run["rows"].append(faster)  # 1.2x the store's, 10 points lower ES@3
    run["configs"] = {"auto": {"options": {}}, "shared": {"options": {"sharedBudgetMs": 60000}},
                      "budget": {"options": {}}}  # fmt: skip
    run["data"].update(positions=62, targets=60)
    text = "\n".join(budget_part(run))
    assert "| `auto` (store) | 1014 |" in text and "| 1.00x |" in text
    assert "| 3.00x |" in text and "| 1.20x |" in text and "sharedBudgetMs` 60000" in text
    assert "| `budget` vs `shared` | all | 31 |" in text
    assert "| `budget` vs `auto` | new | 30 |" in text and "| -10.0 [" in text
