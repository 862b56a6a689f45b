"""The repository-history replay's section of docs/benchmarks.md (from bench/replay.py's JSON)."""

from __future__ import annotations

import statistics
from typing import Any

from bench.replay import CURSORS, SUBSETS
from bench.report import code, diff_text, num, pct, table, verdict

MEMORY, NO_MEMORY, GREEDY = "superposed+store", "superposed-nostore", "greedy"


def _comparison(r: dict[str, Any], a: str, b: str, ma: str, mb: str, cursor: str) -> Any:
    return next(
        (
            c
            for c in r["comparisons"]
            if (c["a"], c["b"], c["metric_a"], c["metric_b"], c["cursor"]) == (a, b, ma, mb, cursor)
        ),
        None,
    )


def _difference(r: dict[str, Any], a: str, b: str, metric: str, cursor: str) -> Any:
    """a - b in one metric, whichever order the run compared them in."""
    d = _comparison(r, a, b, metric, metric, cursor)
    if d is not None:
        return d
    d = _comparison(r, b, a, metric, metric, cursor)
    return {"mean": -d["mean"], "lo": -d["hi"], "hi": -d["lo"], "n": d["n"]}


def _settings(options: dict[str, Any]) -> str:
    return ", ".join(f"`{key}` {value!r}" for key, value in options.items())


def _p50(r: dict[str, Any], config: str) -> float | None:
    ms = [row["ms"] for row in r["rows"] if row["config"] == config]
    return statistics.median(ms) if ms else None


def targets(r: dict[str, Any]) -> list[str]:
    """Issue 13's targets, each with what this run measured (where its configurations ran)."""
    s, out = r["summary"], []
    line = "line-start"
    if MEMORY in s and GREEDY in s:
        d = _comparison(r, MEMORY, GREEDY, "emk", "em1", line)
        met = d["lo"] > 0 and d["mean"] >= 0.05
        out.append(
            f"- {MEMORY} EM@3 beats greedy EM@1 by at least 5 points at the line start: "
            f"{'**met**' if met else '**not met**'} ({diff_text(d)})."
        )
    if MEMORY in s:
        es = s[MEMORY][line]["all"]["esk"]
        out.append(
            f"- {MEMORY} edit similarity@3 at least 55% at the line start: "
            f"{'**met**' if es['mean'] >= 0.55 else '**not met**'} ({pct(es)})."
        )
    if MEMORY in s and NO_MEMORY in s:
        for metric, name in (("emk", "EM@3"), ("esk", "edit similarity@3")):
            d = _difference(r, MEMORY, NO_MEMORY, metric, line)
            out.append(
                f"- with the store beats without at {name} (line start): {verdict(d)} "
                f"({diff_text(d)})."
            )
    if MEMORY in s:
        v = s[MEMORY][line]["verbatim"]["emk"]
        out.append(
            f"- lines verbatim in the snapshot, EM@3 at least 50% (line start): "
            f"{'**met**' if v.get('n') and v['mean'] >= 0.5 else '**not met**'} ({pct(v)})."
        )
        cs = s[MEMORY]["mid-line"]["all"]["csk"]
        out.append(
            f"- mid-line characters saved@3 at least 40%: "
            f"{'**met**' if cs['mean'] >= 0.4 else '**not met**'} ({pct(cs)})."
        )
    with_ms, without_ms = _p50(r, MEMORY), _p50(r, NO_MEMORY)
    if with_ms and without_ms:
        ratio = with_ms / without_ms
        out.append(
            f"- p50 latency with the store at most 1.2x without, same run: "
            f"{'**met**' if ratio <= 1.2 else '**not met**'} ({with_ms:.0f} ms / "
            f"{without_ms:.0f} ms = {ratio:.2f}x, both cursors)."
        )
    return out


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
    d, settings = r["data"], r["settings"]
    repos = "; ".join(
        f"{name} at {m['snapshot'][:10]} ({m['snapshot_date'][:10]}, the last commit before "
        f"{m['cutoff']}; {r['stores']['repos'][name]['tokens']:,} tokens indexed)"
        for name, m in d["repos"].items()
    )
    configs = "; ".join(
        f"*{name}*: {_settings(opts['options']) if opts['options'] else 'the defaults'}"
        + ("" if opts["store"] else ", an empty codebase store")
        for name, opts in r["configs"].items()
    )
    out: list[str] = [
        f"## {number}. Repository-history replay: the next lines of the indexed codebase",
        "",
        f"Source: `{r['_file']}` ({d['split']} split: {', '.join(d['splits'][d['split']])}; "
        f"validation, for all tuning: {', '.join(d['splits']['validation'])}). Data: "
        f"`{d['file']}` (built by `bench/replay_build.py`). Snapshots: {repos}. Targets: "
        f"{d['targets']} lines that later commits added (not blank, comments, docstrings or "
        f"lines moved within a commit), each at two cursors: *line-start* (after the "
        f"indentation) and *mid-line* (the end of the first word past a third of the line): "
        f"{d['positions']} positions.",
        "",
        "Through the language server over stdio, as an editor: the snapshot indexed into a "
        "codebase store (`ngram_db.index_repo`), the post-commit file opened with the target "
        "line cut at the cursor (the rest of the file present), `textDocument/inlineCompletion`"
        f" at the cursor. Settings: {_settings(settings)}; configurations: {configs}.",
        "",
        "Metrics against the rest of the line after the cursor (trailing whitespace trimmed; "
        "a draft counts up to its first newline): EM = exact match, @1 the first draft, @k "
        "any; ES@k = best edit similarity; CS@k = characters saved, the longest common prefix "
        "of the best draft and the rest over the rest's length; distinct = different "
        "non-empty drafts per request; empty = no non-empty draft; latency from request to "
        "response, on the shared machine of the stamp above (its load average is there: "
        "compare latencies within one run only). Cells: mean [95% bootstrap interval], in "
        "percent.",
        "",
        *(
            ["**Partial run**: the results file was written before all configurations ran.", ""]
            if r.get("partial")
            else []
        ),
        "### Issue 13's targets",
        "",
        *targets(r),
        "",
    ]
    for cursor in CURSORS:
        out += [f"### Cursor {cursor}", "", metrics_table(r, cursor), ""]
    out += [
        "### Where the target line already occurs",
        "",
        "*verbatim*: the line's text is a line of the snapshot; *in-file*: another line of the "
        "same document has it; *new*: neither.",
        "",
        subsets_table(r),
        "",
        "### Paired differences (the same positions)",
        "",
        comparisons_table(r),
        "",
        "### Examples: the first targets, every configuration's drafts",
        "",
        *examples(r),
        "",
    ]
    return "\n".join(out)
