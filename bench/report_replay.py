"""The repository-history replay's section of docs/benchmarks.md (from bench/replay.py's JSON)."""

from __future__ import annotations

import statistics
from typing import Any

from bench.replay import CLOSE_PREFIX, CURSORS, SUBSETS
from bench.tables import code, diff_text, difference, find, met, num, pct, say, table, verdict

MEMORY, NO_MEMORY, GREEDY = "superposed+store", "superposed-nostore", "greedy"


def _settings(options: dict[str, Any]) -> str:
    return ", ".join(f"`{key}` {value!r}" for key, value in options.items())


def _p50(r: dict[str, Any], config: str) -> float | None:
    ms = [row["ms"] for row in r["rows"] if row["config"] == config]
    return statistics.median(ms) if ms else None


def _difference(r: dict[str, Any], a: str, b: str, metric: str) -> Any:
    """a - b in one metric at the line start."""
    same = {"metric_a": metric, "metric_b": metric, "cursor": "line-start"}
    return difference(r["comparisons"], a, b, **same)


def targets(r: dict[str, Any]) -> list[str]:
    """Issue 13's targets, each with what this run measured (where its configurations ran)."""
    s, out = r["summary"], []
    line = "line-start"
    if MEMORY in s and GREEDY in s:
        d = find(r["comparisons"], a=MEMORY, b=GREEDY, metric_a="emk", metric_b="em1", cursor=line)
        ok = d["lo"] > 0 and d["mean"] >= 0.05
        out.append(say("target_beats_greedy", memory=MEMORY, met=met(ok), diff=diff_text(d)))
    if MEMORY in s:
        es = s[MEMORY][line]["all"]["esk"]
        ok = es["mean"] >= 0.55
        out.append(say("target_edit_similarity", memory=MEMORY, met=met(ok), value=pct(es)))
    if MEMORY in s and NO_MEMORY in s:
        for metric, name in (("emk", "EM@3"), ("esk", "edit similarity@3")):
            d = _difference(r, MEMORY, NO_MEMORY, metric)
            verdict_ = verdict(d)
            out.append(
                say("target_store_vs_none", metric=name, verdict=verdict_, diff=diff_text(d))
            )
    if MEMORY in s:
        v = s[MEMORY][line]["verbatim"]["emk"]
        ok = bool(v.get("n")) and v["mean"] >= 0.5
        out.append(say("target_verbatim", met=met(ok), value=pct(v)))
        cs = s[MEMORY]["mid-line"]["all"]["csk"]
        out.append(say("target_mid_line", met=met(cs["mean"] >= 0.4), value=pct(cs)))
    out += latency_target("target_latency", _p50(r, MEMORY), _p50(r, NO_MEMORY), 1.2)
    return out


def latency_target(
    section: str, with_ms: float | None, without_ms: float | None, most: float
) -> list[str]:
    """A latency target's line: p50 with over p50 without, met at ``most`` times at most (no
    line where either is missing)."""
    if not (with_ms and without_ms):
        return []
    ratio = with_ms / without_ms
    return [
        say(
            section,
            met=met(ratio <= most),
            with_ms=f"{with_ms:.0f}",
            without_ms=f"{without_ms:.0f}",
            ratio=f"{ratio:.2f}x",
        )
    ]


def likeness_table(r: dict[str, Any]) -> str:
    """Per configuration and cursor: how alike the drafts are, and what drafts 2..k add."""
    rows = []
    for config, by_cursor in r["summary"].items():
        for cursor in CURSORS:
            c = by_cursor[cursor]["all"]
            if "gain" not in c or not c["n"]:  # a run from before issue 22, a cursor not run
                continue
            cells = [pct(c[m]) for m in ("prefix", "close", "apart")]
            rows.append([config, cursor, *cells, pct(c["em1"]), pct(c["emk"]), pct(c["gain"])])
    header = ["configuration", "cursor", "shared prefix", "close", "apart", "EM@1", "EM@k"]
    return table([*header, "gain (EM@k - EM@1)"], rows) if rows else ""


def likeness(r: dict[str, Any]) -> str:
    """The likeness subsection (empty for a run from before issue 22)."""
    rows = likeness_table(r)
    if not rows:
        return ""
    return say("replay_likeness", close=f"{CLOSE_PREFIX:.0%}", likeness_table=rows) + "\n\n"


def metrics_table(r: dict[str, Any], cursor: str) -> str:
    rows = []
    for config, by_cursor in r["summary"].items():
        c = by_cursor[cursor]["all"]
        rows.append(
            [
                config,
                c["n"],
                pct(c["em1"]),
                pct(c["emk"]),
                pct(c["esk"]),
                pct(c["csk"]),
                num(c["distinct"]),
                pct(c["empty"]),
                f"{c['p50_ms']:.0f}",
                f"{c['p95_ms']:.0f}",
            ]
        )
    header = ["configuration", "n", "EM@1", "EM@k", "ES@k", "CS@k", "distinct", "empty"]
    return table([*header, "p50 ms", "p95 ms"], rows)


def subsets_table(r: dict[str, Any]) -> str:
    rows = []
    for config, by_cursor in r["summary"].items():
        for cursor in CURSORS:
            cells = [by_cursor[cursor][s] for s in SUBSETS if s != "all"]
            rows.append(
                [config, cursor]
                + [f"{pct(c['emk'])} · {pct(c['esk'])} (n={c['n']})" for c in cells]
            )
    header = ["configuration", "cursor"] + [f"{s}: EM@k · ES@k" for s in SUBSETS if s != "all"]
    return table(header, rows)


def comparisons_table(r: dict[str, Any]) -> str:
    rows = [
        [
            f"{c['a']} {c['metric_a']} - {c['b']} {c['metric_b']}",
            c["cursor"],
            diff_text(c) if c["n"] else "n/a",
            verdict(c) if c["n"] else "n/a",
        ]
        for c in r["comparisons"]
    ]
    return table(["difference (a - b)", "cursor", "points [95% interval], n", "a > b"], rows)


def examples(r: dict[str, Any], n: int = 3) -> list[str]:
    """The first n targets of the run at both cursors: the rest of the line and every draft."""
    out: list[str] = []
    firsts = list(dict.fromkeys(row["task"] for row in r["rows"]))[:n]
    for task in firsts:
        for cursor in CURSORS:
            mine = [row for row in r["rows"] if row["task"] == task and row["cursor"] == cursor]
            if not mine:
                continue
            out.append(f"- {task}, {cursor}, the rest of the line: {code(mine[0]['rest'])}")
            for row in mine:
                drafts = " · ".join(code(d) if d.strip() else "(empty)" for d in row["drafts"])
                out.append(f"  - {row['config']}: {drafts or '(none)'}")
    return out


def replay_section(r: dict[str, Any], number: int = 1) -> str:
    """The section: where the data comes from, the targets, the tables, the examples."""
    d = r["data"]
    snapshots = "; ".join(
        say(
            "replay_snapshot",
            name=name,
            snapshot=m["snapshot"][:10],
            date=m["snapshot_date"][:10],
            cutoff=m["cutoff"],
            tokens=f"{r['stores']['repos'][name]['tokens']:,}",
        )
        for name, m in d["repos"].items()
    )
    configs = configs_text(r)
    cursor_tables = "".join(
        f"### Cursor {cursor}\n\n{metrics_table(r, cursor)}\n\n" for cursor in CURSORS
    )
    return (
        say(
            "replay",
            number=number,
            file=r["_file"],
            split=d["split"],
            split_repos=", ".join(d["splits"][d["split"]]),
            validation_repos=", ".join(d["splits"]["validation"]),
            data_file=d["file"],
            snapshots=snapshots,
            targets=d["targets"],
            positions=d["positions"],
            settings=_settings(r["settings"]),
            configs=configs,
            partial=say("replay_partial") + "\n\n" if r.get("partial") else "",
            targets_met="\n".join(targets(r)),
            cursor_tables=cursor_tables,
            likeness=likeness(r),
            subsets_table=subsets_table(r),
            comparisons_table=comparisons_table(r),
            examples="\n".join(examples(r)),
        )
        + "\n"
    )


def configs_text(r: dict[str, Any]) -> str:
    """A run's configurations in words: each one's settings over the defaults."""
    return "; ".join(
        say(
            "replay_config",
            name=name,
            options=_settings(opts["options"]) if opts["options"] else "the defaults",
            empty_store="" if opts["store"] else ", an empty codebase store",
        )
        for name, opts in r["configs"].items()
    )
