"""Issue 22 part 3's section of docs/benchmarks.md: the codebase in the prompt, verdict per model.

The runs are ``python -m bench.replay_context`` (bench.replay's machinery on its new lines
only; the script left the tree: bench/results/README.md): ``off`` (``context`` off) against
the context assembler on (lsp_server/context.py), the same positions, server and run. This
module reads the saved rows and computes, on the replay's **new** lines (not verbatim in the
snapshot, not elsewhere in the file; bench/replay.py's ``new`` subset), the paired differences
of edit similarity@3 and EM@3 with bootstrap intervals and the p50 latency ratio, and applies
the issue's rule: the setting goes on by default only if, for the default model, edit
similarity@3 on new lines gains at least 3 points with an interval excluding 0 and p50 is at
most 1.15x.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from bench.measure import RESULTS
from bench.metrics import paired_configs
from bench.replay import CURSORS, SUBSETS
from bench.tables import load_file, points, table

RUNS = {  # model label -> the test split's results
    "SmolLM2 135M (default)": RESULTS / "replay_context.json",
    "Gemma 3 270M": RESULTS / "replay_context-gemma.json",
}
VALIDATION = RESULTS / "replay_context-validation.json"
DEFAULT_MODEL_RUN = "SmolLM2 135M (default)"
BASELINE = "off"
GAIN = 0.03  # edit similarity@3, +3 points (issue 22)
MAX_RATIO = 1.15  # p50, context on / off


def compare_new(result: Mapping[str, Any], config: str, cursor: str) -> dict[str, Any]:
    """``config`` against off on the new lines at ``cursor``: paired ES@3 and EM@3, p50s
    (bench.metrics' ``paired_configs``)."""
    new = SUBSETS["new"]
    keep = lambda r: r["cursor"] == cursor and new(r)  # noqa: E731
    return paired_configs(result["rows"], config, BASELINE, keep)


def met(c: Mapping[str, Any]) -> bool:
    """The issue's rule on one cursor's comparison."""
    return c["esk"]["mean"] >= GAIN and c["esk"]["lo"] > 0 and c["ratio"] <= MAX_RATIO


def candidates(result: Mapping[str, Any]) -> list[str]:
    return [name for name in result["configs"] if name != BASELINE]


def settings_of(result: Mapping[str, Any], name: str) -> str:
    options = result["configs"][name]["options"]
    return ", ".join(f"`{k}` {json.dumps(v)}" for k, v in options.items())


def rows_for(result: Mapping[str, Any], label: str, names: Sequence[str]) -> list[list[Any]]:
    out = []
    for name in names:
        for cursor in CURSORS:
            c = compare_new(result, name, cursor)
            out.append([
                label, f"{name} ({settings_of(result, name)})", cursor, c["n"],
                f"{100 * c['esk_base']:.1f} → {100 * c['esk_config']:.1f}", points(c["esk"]),
                points(c["emk"]),
                f"{c['p50_base']:.0f} / {c['p50_config']:.0f} ms = {c['ratio']:.2f}x",
                "met" if met(c) else "missed",
            ])  # fmt: skip
    return out


HEADER = ["model", "configuration", "cursor", "new lines", "ES@3 off → on",
          "ES@3 on − off", "EM@3 on − off", "p50 off / on", "rule"]  # fmt: skip


def context_section() -> str | None:
    """The section, or None before the runs exist."""
    loaded = {label: load_file(path, complete=True) for label, path in RUNS.items()}
    runs = {label: data for label, data in loaded.items() if data is not None}
    if not runs:
        return None
    parts = [
        "### Issue 22 part 3: the codebase in the prompt: verdict per model",
        "",
        "The setting `context` lays the headers of the definitions a file uses from other "
        "files (and, with `definitions+recent`, the lines where drafts were last asked in "
        "other open files) before the prompt's window, at most `contextTokens` tokens "
        "(`lsp_server/context.py`). Each run below is `python -m bench.replay_context` (the "
        "replay's machinery through the language server), `off` against the setting on over "
        "the same positions in the same run (the server of the commit named in each file), "
        "on the replay's **new** lines only (not verbatim in the snapshot, not elsewhere in "
        "the file). Paired bootstrap "
        "intervals (2,000 resamples); p50 over the same new-line requests of each "
        "configuration. The rule (issue 22): on by default only if, for the default model, "
        f"edit similarity@3 on new lines gains at least {100 * GAIN:.0f} points with an "
        f"interval excluding 0 and p50 is at most {MAX_RATIO:.2f}x. The replay opens one file "
        "at a time, so `definitions+recent` has no other open file to take chunks from there: "
        "only `definitions` is measured.",
        "",
    ]
    validation = load_file(VALIDATION, complete=True)
    if validation is not None:
        parts += [
            f"**The budget, tuned on the validation split** (`{VALIDATION.name}`, "
            f"{validation['stamp']['model']}, commit {validation['server_commit'][:10]}):",
            "",
            table(
                HEADER,
                rows_for(validation, validation["stamp"]["model"], candidates(validation)),
                "lllrlllll",
            ),  # fmt: skip
            "",
        ]
    else:
        parts += [
            "**The budget was not tuned on the validation split**: that run did not fit the "
            "session's time on a shared 2-core CPU, so the test runs use the default "
            "`contextTokens` (256).",
            "",
        ]
    sizes = ", ".join(
        f"{label}: the first {data['data']['positions']} new-line positions of the "
        f"{data['data']['split']} split"
        for label, data in runs.items()
    )
    loads = ", ".join(
        f"{label}: {data['stamp']['load_start']} -> {data['stamp']['load_end']}"
        for label, data in runs.items()
    )
    parts += [
        f"Positions per run ({sizes}; both cursors of each line). Latency: the configurations "
        "run one after the other in one server, so on a shared CPU the p50 ratio also carries "
        f"the change of load between them (load average at each run's start and end: {loads}); "
        "a ratio below 1 is that, not a faster prompt.",
        "",
    ]
    test_rows: list[list[Any]] = []
    verdicts = []
    for label, data in runs.items():
        names = candidates(data)
        test_rows += rows_for(data, label, names)
        wins = [n for n in names if all(met(compare_new(data, n, c)) for c in CURSORS)]
        verdicts.append(
            f"- **{label}** (`{RUNS[label].name}`, commit {data['server_commit'][:10]}): "
            + (
                f"the rule is met by {', '.join(wins)} at both cursors."
                if wins
                else "the rule is missed: edit similarity@3 on new lines does not gain "
                f"{100 * GAIN:.0f} points with an interval above 0; `context` stays off."
            )
        )
    parts += [
        "**Test split:**",
        "",
        table(HEADER, test_rows, "lllrlllll"),
        "",
        "**Verdict per model:**",
        "",
        *verdicts,
    ]
    default = runs.get(DEFAULT_MODEL_RUN)
    on = default is not None and any(
        all(met(compare_new(default, n, c)) for c in CURSORS) for n in candidates(default)
    )
    parts += [
        "",
        f"The default stays `context: {'definitions' if on else 'off'}`"
        + (
            "."
            if on
            else ": the small embedded models do not draft new lines better with other "
            "files' headers before the window. The setting is the path for a larger code "
            "model (on a GPU), where it is to be measured again with the same runs."
        ),
    ]
    return "\n".join(parts) + "\n"
