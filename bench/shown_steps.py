"""Decode steps run against the tokens shown (issue 54 item 1), from two replay runs of the same
positions: before and after a change, drafts compared byte for byte.

Each replay row of a server that counts them holds the request's decode forwards and the most
tokens a shown draft holds (``bench.replay_driver.work_of``): the steps the request needed at
least, the line's end token aside. Per run and cursor: forwards and tokens shown a request (mean,
p50), the ratio of their sums, the median of the per-request ratios, and how many rows' drafts
differ between the runs.

    .venv/bin/python -m bench.replay --quick --configs superposed+store,superposed-nostore \
        --server-commit BEFORE --out /tmp/before.json
    .venv/bin/python -m bench.replay --quick --configs superposed+store,superposed-nostore \
        --out /tmp/after.json
    .venv/bin/python -m bench.shown_steps /tmp/before.json /tmp/after.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from bench.measure import RESULTS, write_json
from bench.tables import table

OUT = RESULTS / "shown_steps"


def key(row: dict[str, Any]) -> tuple[str, str, str]:
    return row["config"], row["task"], row["cursor"]


def counts(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Forwards and tokens shown over the rows that made a model call."""
    rows = [r for r in rows if "forwards" in r]
    forwards = [r["forwards"] for r in rows]
    shown = [r["shown_tokens"] for r in rows]
    return {
        "n": len(rows),
        "forwards_mean": statistics.mean(forwards),
        "forwards_p50": statistics.median(forwards),
        "shown_mean": statistics.mean(shown),
        "shown_p50": statistics.median(shown),
        "ratio_of_sums": sum(forwards) / max(1, sum(shown)),
        "ratio_p50": statistics.median(f / max(1, s) for f, s in zip(forwards, shown, strict=True)),
        "over_1_2": sum(f > 1.2 * max(1, s) for f, s in zip(forwards, shown, strict=True)),
    }


def compare(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    old = {key(r): r for r in before["rows"]}
    new = {key(r): r for r in after["rows"]}
    differ = [list(k) for k in old if k in new and old[k]["drafts"] != new[k]["drafts"]]
    cursors = sorted({k[2] for k in old})
    runs = {}
    for name, rows in (("before", old), ("after", new)):
        runs[name] = {
            c: counts([r for k, r in rows.items() if c in (k[2], "both")]) for c in cursors
        }
        runs[name]["both"] = counts(list(rows.values()))
    return {
        "before": before["stamp"],
        "after": after["stamp"],
        "rows": len(old),
        "rows_compared": sum(k in new for k in old),
        "drafts_differ": differ,
        "runs": runs,
    }


def markdown(result: dict[str, Any]) -> str:
    rows = [
        [run, cursor, c["n"], f"{c['forwards_mean']:.1f}", f"{c['forwards_p50']:.1f}"]
        + [f"{c['shown_mean']:.1f}", f"{c['shown_p50']:.1f}", f"{c['ratio_of_sums']:.2f}"]
        + [f"{c['ratio_p50']:.2f}", c["over_1_2"]]
        for run, cursors in result["runs"].items()
        for cursor, c in cursors.items()
    ]
    stamp_b, stamp_a = result["before"], result["after"]
    return "\n".join(
        [
            "# Decode steps run against the tokens shown (issue 54 item 1)",
            "",
            "The same replay positions through the server, before and after (each run's "
            f"server: its command's `--server-commit`, else the checkout {result['after_code']}):"
            f" `{stamp_b['command']}` and `{stamp_a['command']}`, {stamp_b['date']}; "
            f"{stamp_a['machine']}, load {stamp_b['load_start'][0]:.1f}-"
            f"{stamp_a['load_end'][0]:.1f} (shared, both runs at once: the ms are not compared "
            "here). Tokens shown: the most tokens a shown draft holds (its line's end token "
            "aside; a mid-line cursor's first token also spells the healed characters before "
            "it). Rows whose drafts differ between the runs: "
            f"{len(result['drafts_differ'])} of {result['rows_compared']}.",
            "",
            table(
                ["run", "cursor", "requests", "forwards mean", "forwards p50", "shown mean"]
                + ["shown p50", "forwards / shown (sums)", "p50 ratio", "over 1.2x"],
                rows,
                align="llrrrrrrrr",
            ),
            "",
            "Command: `python -m bench.shown_steps BEFORE.json AFTER.json --after-code REF` "
            "(the replays: bench/results/shown_steps[-blocks]-before.json and -after.json)",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.shown_steps", description=__doc__.splitlines()[0]
    )
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--after-code", default="", help="the commit whose code ran 'after'")
    args = parser.parse_args(argv)
    result = compare(json.loads(args.before.read_text()), json.loads(args.after.read_text()))
    result["after_code"] = args.after_code
    write_json(args.out.with_suffix(".json"), result)
    args.out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
