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
from bench.tables import load_file, points, say, table

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
    v = load_file(VALIDATION, complete=True)
    validation = (
        say("context_validation", file=VALIDATION.name, model=v["stamp"]["model"],
            commit=v["server_commit"][:10],
            table=table(HEADER, rows_for(v, v["stamp"]["model"], candidates(v)), "lllrlllll"))
        if v is not None
        else say("context_not_tuned")
    )  # fmt: skip
    sizes = ", ".join(
        f"{label}: the first {data['data']['positions']} new-line positions of the "
        f"{data['data']['split']} split"
        for label, data in runs.items()
    )
    loads = ", ".join(
        f"{label}: {data['stamp']['load_start']} -> {data['stamp']['load_end']}"
        for label, data in runs.items()
    )
    test_rows: list[list[Any]] = []
    verdicts = []
    for label, data in runs.items():
        names = candidates(data)
        test_rows += rows_for(data, label, names)
        wins = [n for n in names if all(met(compare_new(data, n, c)) for c in CURSORS)]
        verdicts.append(
            say("context_met" if wins else "context_missed", label=label, file=RUNS[label].name,
                commit=data["server_commit"][:10], wins=", ".join(wins), gain=f"{100 * GAIN:.0f}")
        )  # fmt: skip
    default = runs.get(DEFAULT_MODEL_RUN)
    on = default is not None and any(
        all(met(compare_new(default, n, c)) for c in CURSORS) for n in candidates(default)
    )
    return say(
        "context",
        gain=f"{100 * GAIN:.0f}",
        max_ratio=f"{MAX_RATIO:.2f}",
        validation=validation,
        sizes=sizes,
        loads=loads,
        table=table(HEADER, test_rows, "lllrlllll"),
        verdicts="\n".join(verdicts),
        default="definitions" if on else "off",
        why="." if on else say("context_stays_off"),
    ) + "\n"
