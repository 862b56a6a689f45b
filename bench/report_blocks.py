"""Issue 23's section of docs/benchmarks.md: the replay's block tasks (bench/replay_blocks.py's
JSON) and the no-loss check on the line tasks (bench/replay.py's JSON of the same configs).

    python -m bench.report_blocks      # bench/results/replay_blocks.md, the section alone
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from bench.measure import RESULTS, ROOT
from bench.tables import code, diff_text, difference, find, load_file, met, num, pct, say, table

BASELINE = "single"  # today's default as it was
CANDIDATES = ("auto", "multi")  # the first that ran is measured against the targets
LINES_FILE = "replay_lines_auto.json"
EXTRA_FILE = "replay_blocks_multi.json"  # a configuration run on its own, after the main run
SHOWN_SUBSETS = ("2-4 lines", "5+ lines", "verbatim", "twin", "repeat", "new")
COMPARED_SUBSETS = ("all", "2-4 lines", "5+ lines", "repeat", "new")
KEY_COMPARISONS = (("difference", "lak"), ("ratio", "csk"))  # the only ones shown per subset
EXAMPLE_CHARS = 300  # a long block or draft is shown up to here


def candidate_of(r: dict[str, Any]) -> str | None:
    return next((c for c in CANDIDATES if c in r["summary"]), None)


def comparison(
    r: dict[str, Any], a: str, b: str, metric: str, kind: str, subset: str, cursor: str
) -> dict[str, Any] | None:
    return find(r["comparisons"], a=a, b=b, metric=metric, kind=kind, subset=subset, cursor=cursor)


def cursor_of(r: dict[str, Any]) -> str:
    return str(r["data"]["cursors"][0])


def choice(drafts: Sequence[str]) -> str:
    """none (no draft), line (every draft one line) or block (a draft of several lines)."""
    shown = [d for d in drafts if d.strip()]
    if not shown:
        return "none"
    multi = any(len([row for row in d.split("\n") if row.strip()]) > 1 for d in shown)
    return "block" if multi else "line"


def choices_table(rows_by_task: dict[str, list[dict[str, Any]]]) -> str:
    """Per run (block or line tasks) and configuration: how often the drafts were none, one
    line or a block."""
    out = []
    for tasks, rows in rows_by_task.items():
        for config in dict.fromkeys(r["config"] for r in rows):
            mine = [r for r in rows if r["config"] == config]
            counts = Counter(choice(r["drafts"]) for r in mine)
            cells = [
                f"{counts[c]} ({100 * counts[c] / len(mine):.0f}%)"
                for c in ("none", "line", "block")
            ]
            out.append([tasks, config, len(mine), *cells])
    return table(["tasks", "configuration", "requests", "none", "line", "block"], out)


def targets(r: dict[str, Any], lines: dict[str, Any] | None, candidate: str) -> list[str]:
    """Issue 23's targets with what the runs measured."""
    cursor, s, out = cursor_of(r), r["summary"], []
    ratio = comparison(r, candidate, BASELINE, "csk", "ratio", "all", cursor)
    if ratio is None:  # compared the other way round: a single run listed auto first
        ratio = comparison(r, BASELINE, candidate, "csk", "ratio", "all", cursor)
        ratio = ratio and {**ratio, "mean": 1 / ratio["mean"], "lo": 1 / ratio["hi"],
                           "hi": 1 / ratio["lo"]}  # fmt: skip
    if ratio is not None:
        out.append(
            say(
                "blocks_target_ratio",
                candidate=candidate,
                baseline=BASELINE,
                met=met(ratio["mean"] >= 1.5 and ratio["lo"] > 1),
                ratio=f"{ratio['mean']:.2f}x",
                lo=f"{ratio['lo']:.2f}",
                hi=f"{ratio['hi']:.2f}",
                n=ratio["n"],
                cand_cs=pct(s[candidate][cursor]["all"]["csk"]),
                base_cs=pct(s[BASELINE][cursor]["all"]["csk"]),
            )
        )
    for subset, want in (("all", 0.3), ("repeat", 2.0)):
        v = s[candidate][cursor][subset]["lak"]
        ok = bool(v.get("n")) and v["mean"] >= want
        out.append(
            say(
                "blocks_target_lines",
                want=f"{want:.1f}",
                subset=f"{subset} blocks (n = {s[candidate][cursor][subset]['n']})",
                met=met(ok),
                value=f"{candidate} {num(v)}; {BASELINE} {num(s[BASELINE][cursor][subset]['lak'])}",
            )
        )
    if lines is not None and candidate in lines["summary"] and BASELINE in lines["summary"]:
        for metric, name in (("emk", "EM@3"), ("esk", "edit similarity@3"), ("csk", "CS@3")):
            d = line_difference(lines, candidate, BASELINE, metric)
            if d is not None:
                out.append(
                    say(
                        "blocks_target_no_loss",
                        metric=name,
                        candidate=candidate,
                        baseline=BASELINE,
                        met=met(d["hi"] >= 0),
                        diff=diff_text(d),
                    )
                )
    block_ms = s[candidate][cursor]["all"]["p50_ms"]
    line_ms = s[BASELINE][cursor]["all"]["p50_ms"]  # single drafts one line: a line request
    if block_ms and line_ms:
        cross = "n/a (not run)"
        if lines is not None and BASELINE in lines["summary"]:
            other = lines["summary"][BASELINE]["line-start"]["all"]["p50_ms"]
            cross = f"{block_ms:.0f} ms / {other:.0f} ms = {block_ms / other:.2f}x"
        out.append(
            say(
                "blocks_target_latency",
                met=met(block_ms <= 2 * line_ms),
                candidate=candidate,
                baseline=BASELINE,
                block_ms=f"{block_ms:.0f}",
                line_ms=f"{line_ms:.0f}",
                ratio=f"{block_ms / line_ms:.2f}x",
                cross=cross,
            )
        )
    return out


def line_difference(lines: dict[str, Any], a: str, b: str, metric: str) -> dict[str, Any] | None:
    """a - b in one metric at the line start (None: not compared, or over no pairs)."""
    same = {"metric_a": metric, "metric_b": metric, "cursor": "line-start"}
    d = difference(lines["comparisons"], a, b, **same)
    return d if d is not None and d["n"] else None


def metrics_table(r: dict[str, Any]) -> str:
    cursor, rows = cursor_of(r), []
    for config, by_cursor in r["summary"].items():
        c = by_cursor[cursor]["all"]
        rows.append(
            [config, c["n"], num(c["la1"]), num(c["lak"]), pct(c["csk"]), pct(c["emk"]),
             pct(c["esk"]), num(c["multi"]), pct(c["empty"]), f"{c['p50_ms']:.0f}",
             f"{c['p95_ms']:.0f}"]
        )  # fmt: skip
    header = ["configuration", "n", "lines@1", "lines@3", "CS@3", "EM@3", "ES@3", "multi-line"]
    return table([*header, "empty", "p50 ms", "p95 ms"], rows)


def subsets_table(r: dict[str, Any]) -> str:
    cursor, rows = cursor_of(r), []
    for config, by_cursor in r["summary"].items():
        cells = [by_cursor[cursor][s] for s in SHOWN_SUBSETS]
        rows.append(
            [config]
            + [
                f"{c['lak']['mean']:.2f} · {pct(c['csk']).split(' ')[0]} (n={c['n']})"
                for c in cells
            ]
        )
    return table(["configuration", *SHOWN_SUBSETS], rows)


def comparisons_table(r: dict[str, Any]) -> str:
    rows = []
    for c in r["comparisons"]:
        if c["subset"] not in COMPARED_SUBSETS or not c["n"]:
            continue
        if c["subset"] != "all" and (c["kind"], c["metric"]) not in KEY_COMPARISONS:
            continue
        if c["kind"] == "ratio":
            what = f"{c['mean']:.2f}x [{c['lo']:.2f}, {c['hi']:.2f}], n = {c['n']}"
        elif c["metric"] == "lak":
            what = diff_text(c, 1.0, " lines")
        else:
            what = diff_text(c)
        name = {"lak": "lines@3", "csk": "CS@3", "emk": "EM@3", "esk": "ES@3"}[c["metric"]]
        kind = f"{name} ratio (a / b)" if c["kind"] == "ratio" else f"{name} (a - b)"
        rows.append([f"{c['a']} vs {c['b']}", kind, c["subset"], what])
    return table(["a vs b", "metric", "blocks", "mean [95% interval], n"], rows)


def shorten(text: str) -> str:
    return text if len(text) <= EXAMPLE_CHARS else text[:EXAMPLE_CHARS] + " …"


def examples(r: dict[str, Any], n: int = 3) -> list[str]:
    out: list[str] = []
    for task in list(dict.fromkeys(row["task"] for row in r["rows"]))[:n]:
        mine = [row for row in r["rows"] if row["task"] == task]
        block = shorten(mine[0]["target"])
        out.append(f"- {task} ({mine[0]['lines']} lines), the block: {code(block)}")
        for row in mine:
            first = shorten(row["drafts"][0]) if row["drafts"] else ""
            out.append(f"  - {row['config']}: {code(first) if first.strip() else '(none)'}")
    return out


def lines_check(lines: dict[str, Any] | None) -> str:
    if lines is None:
        return say("blocks_lines_missing")
    from bench.report_replay import metrics_table as line_table

    d = lines["data"]
    return say(
        "blocks_lines",
        file=lines["_file"],
        split=d["split"],
        targets=d["targets"],
        configs=", ".join(lines["configs"]),
        partial="**Partial run.**" if lines.get("partial") else "",
        table=line_table(lines, "line-start"),
    )


def blocks_section(r: dict[str, Any], lines: dict[str, Any] | None) -> str:
    """The section: where the blocks come from, the targets, the tables, the examples."""
    d = r["data"]
    candidate = candidate_of(r)
    configs = "; ".join(
        f"*{name}*: " + ", ".join(f"`{k}` {v!r}" for k, v in opts["options"].items())
        for name, opts in r["configs"].items()
    )
    runs = {"blocks": r["rows"]}
    if lines is not None:
        runs["lines (line start)"] = lines["rows"]
    note = "Counted from the drafts: the server keeps no count of what lineMode auto chose."
    have = candidate is not None and BASELINE in r["summary"]
    if r.get("later"):
        configs += (
            f" ({', '.join(r['later']['configs'])}: a run of its own after the others, the same"
            f" blocks and server commit, `{r['later']['file']}`; compare its latency with care)"
        )
    return (
        say(
            "blocks",
            file=r["_file"],
            split=d["split"],
            split_repos=", ".join(d["splits"][d["split"]]),
            blocks=d["blocks"],
            cursors=" and ".join(d["cursors"]),
            data_file=d["file"],
            server=f"the server of commit {r['server_commit'][:10]}"
            if r.get("server_commit")
            else "the server of the working tree at the stamp's commit",
            configs=configs,
            partial="**Partial run**: not every configuration ran.\n\n" if r.get("partial") else "",
            candidate=candidate or "n/a",
            baseline=BASELINE,
            targets="\n".join(targets(r, lines, candidate)) if have and candidate else "n/a",
            metrics_table=metrics_table(r),
            subsets_table=subsets_table(r),
            comparisons_table=comparisons_table(r),
            choices_note=note,
            choices_table=choices_table(runs),
            lines_check=lines_check(lines),
            examples="\n".join(examples(r)),
        )
        + "\n"
    )


def merge(r: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """The block run with a later run's configurations on the same blocks added: its rows,
    then summaries and paired comparisons over all (latency across runs: see the stamps)."""
    from bench.replay_blocks import compare, summarize

    rows = [*r["rows"], *(row for row in extra["rows"] if row["config"] not in r["configs"])]
    configs = {
        **r["configs"],
        **{n: c for n, c in extra["configs"].items() if n not in r["configs"]},
    }
    names = list(configs)
    later = [n for n in names if n not in r["configs"]]
    return {
        **r,
        "configs": configs,
        "rows": rows,
        "summary": summarize(rows),
        "comparisons": compare(rows, names),
        "later": {"file": extra["_file"], "configs": later},
    }


def load_results() -> tuple[dict[str, Any] | None, dict[str, Any] | None, dict[str, Any] | None]:
    """The block run, the line-task check and a later block run, where they exist."""
    names = ("replay_blocks.json", LINES_FILE, EXTRA_FILE)
    blocks, lines, extra = (load_file(RESULTS / name) for name in names)
    return blocks, lines, extra


def main() -> None:
    blocks, lines, extra = load_results()
    if blocks is None:
        raise SystemExit(
            "no bench/results/replay_blocks.json: run python -m bench.replay --tasks blocks"
        )
    if extra is not None and not extra.get("partial"):
        blocks = merge(blocks, extra)
    path = RESULTS / "replay_blocks.md"
    path.write_text(blocks_section(blocks, lines).replace("### Issue 23", "# Issue 23", 1))
    print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
