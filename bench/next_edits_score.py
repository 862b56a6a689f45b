"""The next-edits benchmark's scoring (pure functions): sites, proposals judged, walks summed.

bench/next_edits.py drives the server and calls these; tests/test_bench_next_edits.py tests them
on tiny inputs. See bench/next_edits.py for what the metrics mean.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.measure import percentile
from bench.metrics import bootstrap_ci, paired_ratio_ci

PAUSE_S = 0.3  # the protocol's NEXT_EDITS_PAUSE_S: a change ends this long after its last edit
NAME_PAUSE_S = 1.0  # ... or this long when it left the caret right after a name's character
CHUNK = 3  # characters per didChange while the user types the first site
MAX_SUBSET = 8  # sites on a proposal's lines beyond which only single sites and all are tried


# ----- documents and sites (pure functions, tested on tiny inputs) ----------------------------


@dataclass(frozen=True)
class Site:
    """One change of the commit: a span of a pre-commit line (Python str offsets) and its text."""

    path: str
    line: int
    start: int
    end: int
    old: str
    new: str


def apply_sites(text: str, sites: Iterable[Site]) -> str:
    """``text`` (one file's pre-commit text) with ``sites`` of that file made."""
    rows = text.split("\n")
    for s in sorted(sites, key=lambda s: (s.line, -s.start)):
        row = rows[s.line]
        rows[s.line] = row[: s.start] + s.new + row[s.end :]
    return "\n".join(rows)


def shifted(site: Site, made: Iterable[Site]) -> tuple[int, int]:
    """The site's span in the document where ``made`` (other sites of its file) are made."""
    delta = sum(
        len(m.new) - (m.end - m.start)
        for m in made
        if m.path == site.path and m.line == site.line and m.end <= site.start and m != site
    )
    return site.start + delta, site.end + delta


def utf16(row: str, column: int) -> int:
    """A str offset in a line as LSP counts it by default (UTF-16 code units)."""
    return len(row[:column].encode("utf-16-le")) // 2


def from_utf16(row: str, units: int) -> int:
    """An LSP character offset as a str offset in the line (clamped to the line's end)."""
    count = 0
    for i, ch in enumerate(row):
        if count >= units:
            return i
        count += 2 if ord(ch) > 0xFFFF else 1
    return len(row)


def apply_edit(text: str, edit: Mapping[str, Any]) -> str:
    """``text`` with one LSP edit applied (its range in UTF-16 positions)."""
    rows = text.split("\n")
    start, end = edit["range"]["start"], edit["range"]["end"]
    if not (0 <= start["line"] <= end["line"] < len(rows)):
        raise ValueError(f"range {edit['range']} outside the document's {len(rows)} lines")
    a = sum(len(r) + 1 for r in rows[: start["line"]]) + from_utf16(
        rows[start["line"]], start["character"]
    )
    b = sum(len(r) + 1 for r in rows[: end["line"]]) + from_utf16(
        rows[end["line"]], end["character"]
    )
    if b < a:
        raise ValueError(f"range {edit['range']} ends before it starts")
    return text[:a] + str(edit["newText"]) + text[b:]


def right_sites(
    pre: str, made: frozenset[Site], candidates: Sequence[Site], edit: Mapping[str, Any]
) -> frozenset[Site] | None:
    """The not yet made sites that ``edit`` makes, or None when it makes none exactly.

    ``pre``: the file's pre-commit text; ``made``: its sites made so far (the document is
    ``pre`` with them); ``candidates``: every site of the file. The edit is right when the
    document it gives equals the one that some non-empty set of unmade sites on the lines its
    range covers would give.
    """
    current = apply_sites(pre, made)
    try:
        after = apply_edit(current, edit)
    except ValueError:
        return None
    first, last = edit["range"]["start"]["line"], edit["range"]["end"]["line"]
    open_sites = [s for s in candidates if s not in made and first <= s.line <= last]
    if len(open_sites) > MAX_SUBSET:
        subsets: Iterable[tuple[Site, ...]] = [(s,) for s in open_sites] + [tuple(open_sites)]
    else:
        subsets = (
            combo
            for n in range(1, len(open_sites) + 1)
            for combo in itertools.combinations(open_sites, n)
        )
    for combo in subsets:
        if apply_sites(pre, made | set(combo)) == after:
            return frozenset(combo)
    return None


def typing_changes(row: str, start: int, end: int, new: str) -> list[tuple[int, int, str]]:
    """The didChanges of a user making one site in ``row``: (start, end, text) in UTF-16 units.

    The old text is deleted first (one change), then the new one typed ``CHUNK`` characters at
    a time, each at the end of what was typed so far.
    """
    out = []
    at = utf16(row, start)
    if end > start:
        out.append((at, utf16(row, end), ""))
    typed = ""
    for i in range(0, len(new), CHUNK):
        piece = new[i : i + CHUNK]
        column = at + len(typed.encode("utf-16-le")) // 2
        out.append((column, column, piece))
        typed += piece
    return out


def pause_s(before_caret: str) -> float:
    """The pause that ends a change whose last edit left ``before_caret`` before the caret on
    its line (lsp_server/next_edits/service.py: NAME_PAUSE_S after a name's character)."""
    last = before_caret[-1:]
    return NAME_PAUSE_S if last.isalnum() or last == "_" else PAUSE_S


# ----- what a walk measures (pure) -------------------------------------------------------------


@dataclass
class Step:
    """One list of proposals the user saw: after the first change, then after each accept."""

    proposals: list[dict[str, Any]]  # the request's edits, best first
    right: list[bool]  # per proposal
    keys: list[str]  # per proposal: what it is, the same when shown again (proposal_key)
    notified_ms: float | None  # from the last didChange to the notification (None: none came)
    request_ms: float
    accepted: int | None = None  # the rank (0-based) accepted, None: the walk stopped here
    pause_s: float = PAUSE_S  # the pause that ended the change (pause_s)


@dataclass
class Walk:
    task: str
    kind: str  # repetitive | ordinary
    later: int  # the group's sites after the first
    steps: list[Step] = field(default_factory=list)
    reached: int = 0  # the group's later sites made by accepts
    reached_top1: int = 0  # the same, while every accept was the list's first proposal


def original_column(row: str, units: int, made: Iterable[Site]) -> int:
    """The pre-commit str offset of an LSP column in ``row``, a line where ``made`` (sites of
    that line) are made: the column less what the made sites before it grew the line by."""
    column, grown = from_utf16(row, units), 0
    for s in sorted(made, key=lambda s: s.start):
        if s.start + grown + len(s.new) > column:
            break
        grown += len(s.new) - (s.end - s.start)
    return column - grown


def proposal_key(p: Mapping[str, Any], sites: frozenset[Site] | None, column: int) -> str:
    """A proposal as the user sees it, the same when shown again after an accept elsewhere: a
    right one by the sites it makes, a wrong one by its text and its place in the pre-commit
    file (``column``: original_column of its start)."""
    if sites is not None:
        return json.dumps(sorted([s.path, s.line, s.start] for s in sites))
    line = p["range"]["start"]["line"]
    return json.dumps([p["textDocument"]["uri"], line, column, p.get("oldText"), p["newText"]])


def walk_row(w: Walk) -> dict[str, Any]:
    """One task's metrics from its walk."""
    seen: dict[str, bool] = {}
    for step in w.steps:
        for key, ok in zip(step.keys, step.right, strict=True):
            seen[key] = seen.get(key, False) or ok
    first = w.steps[0] if w.steps else None
    false_first = sum(1 for ok in first.right if not ok) if first else 0
    return {
        "task": w.task,
        "kind": w.kind,
        "later": w.later,
        "reached": w.reached,
        "reached_top1": w.reached_top1,
        "recall1": w.reached_top1 / w.later if w.later else float("nan"),
        "recall3": w.reached / w.later if w.later else float("nan"),
        "proposed": len(seen),
        "right": sum(seen.values()),
        "first_proposed": len(first.proposals) if first else 0,
        "false_first": false_first,
        "false_alarm": float(false_first > 0),
        "notified_ms": [s.notified_ms for s in w.steps],
        "pause_ms": [s.pause_s * 1e3 for s in w.steps],
        "request_ms": [s.request_ms for s in w.steps],
        "steps": [
            {
                "proposals": [
                    {k: p.get(k) for k in ("range", "newText", "oldText", "origin", "label")}
                    | {"uri": p["textDocument"]["uri"].rsplit("/", 1)[-1], "right": ok}
                    for p, ok in zip(s.proposals, s.right, strict=True)
                ],
                "accepted": s.accepted,
            }
            for s in w.steps
        ],
    }


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The split's numbers: recall, precision, false alarms, latency (pooled over tasks)."""
    rep = [r for r in rows if r["kind"] == "repetitive"]
    ordinary = [r for r in rows if r["kind"] == "ordinary"]
    notified = [  # the change's end to the proposals (runs before pause_ms: PAUSE_S each)
        ms - pause
        for r in rows
        for ms, pause in zip(
            r["notified_ms"],
            r.get("pause_ms") or [PAUSE_S * 1e3] * len(r["notified_ms"]),
            strict=True,
        )
        if ms is not None
    ]
    requests = [ms for r in rows for ms in r["request_ms"]]
    by_rewrite: dict[str, Any] = {}
    for kind in sorted({r.get("rewrite", "") for r in rep}):
        mine = [r for r in rep if r.get("rewrite", "") == kind]
        by_rewrite[kind] = {
            "tasks": len(mine),
            "recall3": ratio(mine, "reached", "later"),
            "precision": ratio(mine, "right", "proposed"),
        }
    return {
        "repetitive": {
            "tasks": len(rep),
            "later_sites": sum(r["later"] for r in rep),
            "recall1": ratio(rep, "reached_top1", "later"),
            "recall3": ratio(rep, "reached", "later"),
            "any_proposal": bootstrap_ci([float(r["proposed"] > 0) for r in rep]),
        },
        "by_rewrite": by_rewrite,
        "precision": ratio(rows, "right", "proposed"),
        "proposed": sum(r["proposed"] for r in rows),
        "ordinary": {
            "changes": len(ordinary),
            "false_alarms_per_100": scaled(bootstrap_ci([r["false_alarm"] for r in ordinary])),
            "false_proposals_per_100": scaled(
                bootstrap_ci([float(r["false_first"]) for r in ordinary])
            ),
        },
        "latency": {
            "notified": len(notified),
            "change_end_p50_ms": percentile(notified, 50),
            "change_end_p95_ms": percentile(notified, 95),
            "request_p50_ms": percentile(requests, 50),
            "request_p95_ms": percentile(requests, 95),
        },
    }


def ratio(rows: Sequence[Mapping[str, Any]], num: str, den: str) -> dict[str, float]:
    """sum(num) / sum(den) over the rows, with a bootstrap interval over the rows where den is
    not 0 (a task with nothing proposed adds nothing to a precision, and a resample of such
    tasks only would have none: an infinite bound)."""
    kept = [r for r in rows if r[den]]
    return paired_ratio_ci([float(r[num]) for r in kept], [float(r[den]) for r in kept])


def scaled(ci: Mapping[str, float], by: float = 100.0) -> dict[str, float]:
    return {k: (v * by if k != "n" else v) for k, v in ci.items()}
