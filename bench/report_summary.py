"""The report's first screen: what the product's defaults do today on each benchmark.

Each line reads the newest result that measured the defaults (by the date in its own stamp)
and names that file, its date and its commit, so the first page moves when a benchmark is run
again. A run counts for the defaults when the configuration it reports sets nothing the server
would not choose by itself (lsp_server.settings parses its options to the defaults), on the
test split, with the default model, at the largest size any such run has (a ``--limit`` run
never outranks the full one); the quick report reads ``--quick`` runs only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bench.measure import RESULTS
from bench.report_next_edits import DEFAULT_PRECISION, DEFAULT_RECALL, FALSE_ALARMS, per100
from bench.tables import load_file, num, table

Run = Mapping[str, Any]


def pct(ci: Mapping[str, float]) -> str:
    """A share in percent with its 95% interval: ``17.0% [10.0, 24.0]``."""
    return f"{100 * ci['mean']:.1f}% [{100 * ci['lo']:.1f}, {100 * ci['hi']:.1f}]"


@dataclass(frozen=True)
class Line:
    """One benchmark's line of the first page."""

    benchmark: str
    default: str  # what the defaults did, with its numbers
    file: str = ""  # "": no result measured the defaults
    date: str = ""
    commit: str = ""

    def row(self) -> list[str]:
        return [
            self.benchmark,
            self.default,
            f"`{self.file}`" if self.file else "",
            self.date,
            self.commit,
        ]


def default_model() -> str:
    from superposed.embedded import DEFAULT_MODEL

    return DEFAULT_MODEL


def is_default(options: Mapping[str, Any]) -> bool:
    """Whether a configuration's options leave the server's settings at their defaults (a
    retired setting set to what it did by default counts: it is ignored today)."""
    from lsp_server.settings import parse_settings

    return parse_settings(dict(options))[0] == parse_settings({})[0]


def stamp_of(run: Run) -> tuple[str, str]:
    """A run's date and commit from its own stamp: ``stamp`` (bench.measure.Stamp), else the
    top-level fields bench.lsp_latency writes; the server it measured where it names one."""
    stamp = run.get("stamp") or run
    date = stamp.get("date") or "not recorded"
    commit = run.get("after") or stamp.get("commit") or "not recorded"
    server = run.get("server_commit") or ""
    if server and not str(commit).startswith(server[:7]):
        commit = f"{commit} (server {server[:7]})"
    return date, commit


def newest(runs: Iterable[Run]) -> Run | None:
    """The run with the latest stamp date (dates are ``YYYY-MM-DD HH:MM UTC``); an undated run
    ranks below every dated one, and among undated ones the first given wins."""
    dated = [
        (stamp_of(r)[0] if stamp_of(r)[0] != "not recorded" else "", -i, r)
        for i, r in enumerate(runs)
    ]
    return max(dated, key=lambda t: (t[0], t[1]))[2] if dated else None


def _command(run: Run) -> str:
    return str((run.get("stamp") or run).get("command", ""))


def _default_config(run: Run) -> str | None:
    """The name of the run's configuration that measured the defaults, if one did."""
    configs = run.get("configs")
    if not isinstance(configs, Mapping):
        return None
    for name, config in configs.items():
        if config.get("store", True) and is_default(config.get("options") or {}):
            return name
    return None


def _replay_cell(run: Run, cursor: str) -> Mapping[str, Any] | None:
    """The defaults' summary cell at ``cursor`` of a replay run that counts, else None."""
    stamp = run.get("stamp") or {}
    if run.get("partial") or (run.get("data") or {}).get("split") != "test":
        return None
    if stamp.get("model") != default_model():
        return None
    name = _default_config(run)
    if name is None:
        return None
    cell = (run.get("summary") or {}).get(name, {}).get(cursor, {}).get("all")
    return cell if cell and cell.get("n") else None


def pick_replay(runs: Iterable[Run], cursor: str, quick: bool) -> tuple[Run, Any] | None:
    """The newest replay run of the defaults at ``cursor`` among those of the largest size."""
    found = []
    for run in runs:
        cell = _replay_cell(run, cursor)
        if cell is not None and ("--quick" in _command(run)) == quick:
            found.append((run, cell))
    if not found:
        return None
    size = max(cell["n"] for _, cell in found)
    best = newest([run for run, cell in found if cell["n"] == size])
    return next((run, cell) for run, cell in found if run is best)


def _line(
    benchmark: str, picked: tuple[Run, Any] | None, text: Callable[[Any], str], missing: str
) -> Line:
    if picked is None:
        return Line(benchmark, missing)
    run, cell = picked
    date, commit = stamp_of(run)
    return Line(benchmark, text(cell), str(run["_file"]), date, commit)


def replay_lines(runs: list[Run], quick: bool) -> list[Line]:
    def next_line(c: Any) -> str:
        return (
            f"EM@1 {pct(c['em1'])}, EM@3 {pct(c['emk'])}, edit similarity@3 "
            f"{pct(c['esk'])}; a request's p50 {c['p50_ms']:,.0f} ms (n = {c['n']})"
        )

    def block(c: Any) -> str:
        return (
            f"lines accepted@3 {num(c['lak'])}, EM@3 {pct(c['emk'])}, edit similarity@3 "
            f"{pct(c['esk'])} (n = {c['n']} blocks)"
        )

    lines_missing = "no result: `python -m bench.replay --split test`"
    blocks_missing = "no result: `python -m bench.replay --tasks blocks --split test`"
    if quick:
        lines_missing = blocks_missing = "no quick run"
    return [
        _line(
            "Replay, next line, cursor at the line's start",
            pick_replay(runs, "line-start", quick),
            next_line,
            lines_missing,
        ),
        _line(
            "Replay, rest of the line, cursor mid-line",
            pick_replay(runs, "mid-line", quick),
            next_line,
            lines_missing,
        ),
        _line(
            "Replay, whole blocks (`lineMode` auto)",
            pick_replay(runs, "block-start", quick),
            block,
            blocks_missing,
        ),
    ]


# bench.lsp_latency's runs from before it recorded its date, in the order the report's Speed
# section gives them (issue 39's rerun of the server at 7aaafdb first): a dated run outranks
# them all.
LATENCY_UNDATED = ("lsp_latency_cpu.json", "lsp_latency.json")
LATENCY_CASES = (
    "inline k=3, short file",
    "inline k=3, long file",
    "inline k=3, long file, typing a line (model calls)",
)


def latency_line(runs: list[Run]) -> Line:
    """bench.lsp_latency's request-to-drafts cases (the server's defaults, its own file)."""
    found = [r for r in runs if all(c in (r.get("cases") or {}) for c in LATENCY_CASES)]
    dated = [r for r in found if stamp_of(r)[0] != "not recorded"]
    undated = [r for name in LATENCY_UNDATED for r in found if r["_file"].endswith("/" + name)]
    run = newest([*dated, *undated])
    picked = None if run is None else (run, run["cases"])

    def text(cases: Any) -> str:
        short, long, typing = (cases[c]["p50_ms"] for c in LATENCY_CASES)
        return (
            f"p50 {short:,.0f} ms in a 22-line file, {long:,.0f} ms in a 2,600-line one, "
            f"{typing:,.0f} ms typing a line there (requests that call the model)"
        )

    return _line(
        "Latency, request to drafts over stdio",
        picked,
        text,
        "no result: `python -m bench.lsp_latency`",
    )


def cold_line(runs: list[Run]) -> Line:
    """bench.cold_request: the first draft where the cursor arrives (issue 54), by phase."""
    found = [r for r in runs if {"open", "rest"} <= (r.get("cases") or {}).keys()]
    run = newest(found)
    picked = None if run is None else (run, run["cases"])

    def text(cases: Any) -> str:
        opened, rest = cases["open"], cases["rest"]
        return (
            f"p50 {opened['ms']:,.0f} ms in a file just opened ({opened['prefill_ms']:,.0f} of "
            f"them prefilling {opened['prefilled']:,.0f} tokens, {opened['steps_ms']:,.0f} "
            f"decoding), {rest['ms']:,.0f} ms after a cursor rest"
        )

    return _line(
        "The first draft where the cursor arrives",
        picked,
        text,
        "no result: `python -m bench.cold_request`",
    )


# bench.cpu_anchor's row of the step the server decodes with (superposed/compiled.py: the int4
# one-row step, exported and compiled ahead of time by a child process); its other phases are
# int4's eager ones.
COMPILED = "int4, compiled step (the server's)"


def served_row(data: Mapping[str, Any]) -> str:
    """A bench.cpu_anchor run's row of what the server decodes with: COMPILED where the run
    measured it, else the calibration's precision (eager)."""
    if any(name.startswith(COMPILED + " @") for name in data["median_ms"]):
        return COMPILED
    return str(data.get("calibration", {}).get("precision", "int4"))


def llama_line(runs: list[Run]) -> Line:
    """bench.cpu_anchor: the default precision's decode beside llama.cpp's on the same CPU,
    one thread (the ``threads`` default)."""
    found = [
        r
        for r in runs
        if (r.get("stamp") or {}).get("model") == default_model()
        and "llama.cpp @1" in (r.get("median_ms") or {})
    ]
    run = newest(found)
    picked = None if run is None else (run, run)

    def text(r: Any) -> str:
        served = served_row(r)
        ours, theirs = r["median_ms"][f"{served} @1"], r["median_ms"]["llama.cpp @1"]
        step, request = "superposed k=3 step", "3 drafts x 24, cold 256"
        return (
            f"a superposed step of 3 drafts {ours[step]:.1f} ms ({served}) against "
            f"llama.cpp's {theirs[step]:.1f}; 3 drafts of 24 tokens after a cold 256-token "
            f"prompt {ours[request]:,.0f} ms against {theirs[request]:,.0f}"
        )

    return _line(
        "Beside llama.cpp, the same model on the same CPU",
        picked,
        text,
        "no result: `python -m bench.cpu_anchor`",
    )


def next_edits_lines(runs: list[Run]) -> list[Line]:
    """bench.next_edits on each test split (issue 55's rule for the default reads both): off
    by default, and by how much."""

    def text(s: Any) -> str:
        precision = s["precision"]
        shown = "n/a" if math.isnan(precision["mean"]) else pct(precision)
        return (
            f"off by default: turned on, precision {shown}, "
            f"{per100(s['ordinary']['false_alarms_per_100'])} false alarms per 100 ordinary "
            f"changes, later sites of a repeated edit found in its first 3 proposals "
            f"{pct(s['repetitive']['recall3'])} (on by default needs, on every test split, "
            f"{100 * DEFAULT_PRECISION:.0f}%, at most {FALSE_ALARMS:.0f} and "
            f"{100 * DEFAULT_RECALL:.0f}%)"
        )

    out = []
    for split, repos in (("test", "flask, black"), ("test2", "click, httpx")):
        found = [
            r
            for r in runs
            if r.get("data", {}).get("split") == split
            and "summary" in r
            and not r.get("server_commit")  # an older server's run, kept for comparison
        ]
        run = newest(found)
        out.append(
            _line(
                f"Next edits, real edit history ({repos})",
                None if run is None else (run, run["summary"]),
                text,
                f"no result: `python -m bench.next_edits --split {split}`",
            )
        )
    return out


def _runs(pattern: str) -> list[Run]:
    """Every results file matching ``pattern`` (sorted by name), loaded."""
    loaded = (load_file(path) for path in sorted(RESULTS.glob(pattern)))
    return [run for run in loaded if isinstance(run, Mapping)]


def lines(quick: bool) -> list[Line]:
    """The first page's lines from bench/results (the quick report: the quick runs only)."""
    replays = [*_runs("replay*.json")]
    if quick:
        return replay_lines(replays, quick)
    return [
        *replay_lines(replays, quick),
        latency_line(_runs("lsp_latency*.json")),
        cold_line(_runs("cold_request*.json")),
        llama_line(_runs("cpu_anchor*.json")),
        *next_edits_lines(_runs("next_edits*.json")),
    ]


def summary_table(quick: bool) -> str:
    header = ["benchmark", "what the defaults do", "results", "date", "commit"]
    return table(header, [line.row() for line in lines(quick)])
