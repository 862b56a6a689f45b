"""What every benchmark's markdown shares: tables, shares in percent, differences, verdicts,
the report template's prose (``say``), a run's stamp line and the loading of a protocol's
results (bench.report and its section modules both use them: they live here so that neither
imports the other).

Cells that carry an interval take the ``{"mean", "lo", "hi", "n"}`` dicts of
``bench.metrics.bootstrap_ci``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from string import Template
from typing import Any

from bench.measure import RESULTS, ROOT

ALIGN = {"l": "---", "r": "---:"}
TEMPLATE = Path(__file__).with_name("report_template.md")


def load_prose(path: Path = TEMPLATE) -> dict[str, Template]:
    """The template's sections: a line ``%% name`` starts one, other ``%%`` lines are comments."""
    sections: dict[str, list[str]] = {}
    lines: list[str] = []
    for line in path.read_text().splitlines():
        if m := re.fullmatch(r"%% (\w+)", line):
            lines = sections.setdefault(m.group(1), [])
        elif not line.startswith("%%"):
            lines.append(line)
    return {name: Template("\n".join(body).strip("\n")) for name, body in sections.items()}


PROSE = load_prose()


def say(section: str, **values: Any) -> str:
    """One section of the template, filled (a missing value is an error, not a blank)."""
    return PROSE[section].substitute(values)


def stamp_line(name: str, s: dict[str, Any]) -> list[Any]:
    return [
        name,
        s["date"],
        s["commit"],
        s["model"],
        s["machine"],
        s.get("runner") or "not recorded: the `Engine.load()` default at that commit",
        f"{s['load_start']} -> {s['load_end']}",
        f"{s['seconds']:.0f}",
        f"`{s['command']}`",
    ]


def stamps_table(runs: Sequence[Mapping[str, Any]], load: str = "load avg (1/5/15 min)") -> str:
    """Each run's stamp, a row a results file (``_file``, as ``load_file`` gives it)."""
    header = ["results", "date", "commit", "model", "machine", "runner", load, "seconds"]
    return table([*header, "command"], [stamp_line(r["_file"], r["stamp"]) for r in runs])


def stamp_header(s: dict[str, Any]) -> str:
    """A markdown summary's opening: the command, when, which commit, which machine (the
    stamp of ``bench.measure.Stamp``); the script goes on with what it ran."""
    return f"`{s['command']}`: {s['date']}, commit {s['commit']}, {s['machine']}"


def load_span(s: dict[str, Any]) -> str:
    """The machine's load average at the stamp's start and end."""
    return f"load {s['load_start']} at start, {s['load_end']} at end"


def load_file(path: Path, complete: bool = False) -> dict[str, Any] | None:
    """A results file, with ``_file`` its path from the repository root; None when it is not
    there (or, with ``complete``, when its run stopped part-way: ``partial``)."""
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    if complete and data.get("partial"):
        return None
    data["_file"] = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
    return data


def load(name: str, quick: bool) -> dict[str, Any] | None:
    """The results of one protocol: full-size unless asked for quick (or only quick exist)."""
    order = [f"{name}-quick.json"] if quick else [f"{name}.json", f"{name}-quick.json"]
    return next((d for f in order if (d := load_file(RESULTS / f)) is not None), None)


def find(items: Sequence[Mapping[str, Any]], **fields: Any) -> Any:
    """The first item (a run's comparison, say) with these field values; None when none has."""
    return next((i for i in items if all(i.get(k) == v for k, v in fields.items())), None)


def difference(comparisons: Sequence[Mapping[str, Any]], a: str, b: str, **fields: Any) -> Any:
    """a - b from a run's paired comparisons, whichever order the run compared them in (None:
    it did not compare them)."""
    d = find(comparisons, a=a, b=b, **fields)
    if d is not None:
        return dict(d)
    d = find(comparisons, a=b, b=a, **fields)
    return None if d is None else {**d, "mean": -d["mean"], "lo": -d["hi"], "hi": -d["lo"]}


def met(ok: bool) -> str:
    """A target's verdict."""
    return "**met**" if ok else "**not met**"


def table(header: Sequence[Any], rows: Sequence[Sequence[Any]], align: str = "") -> str:
    """A markdown table; ``align`` gives each column "l" or "r" (missing: "l")."""
    rule = [ALIGN[a] for a in align.ljust(len(header), "l")]
    lines = ["| " + " | ".join(str(c) for c in header) + " |", "|" + "".join(r + "|" for r in rule)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _missing(ci: dict[str, float]) -> bool:
    return ci.get("n", 0) == 0 or math.isnan(ci["mean"])


def pct(ci: dict[str, float]) -> str:
    """A share with its 95% interval, in percent."""
    if _missing(ci):
        return "n/a"
    return f"{100 * ci['mean']:.1f} [{100 * ci['lo']:.1f}, {100 * ci['hi']:.1f}]"


def num(ci: dict[str, float], digits: int = 2) -> str:
    """A mean with its 95% interval."""
    if _missing(ci):
        return "n/a"
    return f"{ci['mean']:.{digits}f} [{ci['lo']:.{digits}f}, {ci['hi']:.{digits}f}]"


def points(d: dict[str, float], scale: float = 100.0, digits: int = 1) -> str:
    """A signed difference with its interval: ``+1.2 [-0.3, +2.8]`` (percentage points)."""
    f = f"+.{digits}f"
    return f"{scale * d['mean']:{f}} [{scale * d['lo']:{f}}, {scale * d['hi']:{f}}]"


def diff_text(d: dict[str, float], scale: float = 100.0, unit: str = " points") -> str:
    """A difference with its unit, interval and number of pairs."""
    return (
        f"{scale * d['mean']:+.1f}{unit} [{scale * d['lo']:+.1f}, {scale * d['hi']:+.1f}], "
        f"n = {d['n']}"
    )


def verdict(diff: dict[str, float], better: str = "higher") -> str:
    """Supported when the 95% interval of the paired difference excludes 0 in the right way."""
    lo, hi = (diff["lo"], diff["hi"]) if better == "higher" else (-diff["hi"], -diff["lo"])
    if lo > 0:
        return "**supported**"
    if hi < 0:
        return "**contradicted**"
    return "**not shown** (interval includes 0)"


def code(text: str) -> str:
    """Inline code that survives backticks and newlines (shown as ⏎) inside the text."""
    text = text.replace("\n", "⏎")
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def fmt(v: Any) -> str:
    """A value for a generic table: floats to 3 significant digits, large ones with commas."""
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def generic(data: Any, depth: int = 0) -> str:
    """Render any results file: tables for lists of flat dicts, else key: value."""
    if isinstance(data, list) and data and all(isinstance(r, dict) for r in data):
        keys = list(dict.fromkeys(k for r in data for k in r))
        flat = [k for k in keys if not any(isinstance(r.get(k), dict | list) for r in data)]
        return table(flat, [[fmt(r.get(k, "")) for k in flat] for r in data])
    if isinstance(data, dict):
        parts = []
        scalars = {k: v for k, v in data.items() if not isinstance(v, dict | list)}
        if scalars:
            parts.append(table(["key", "value"], [[k, fmt(v)] for k, v in scalars.items()]))
        for k, v in data.items():
            if isinstance(v, dict | list) and depth < 2:
                parts.append(f"\n**{k}**\n\n{generic(v, depth + 1)}")
        return "\n".join(parts)
    return f"`{json.dumps(data)[:500]}`"


def method_lines(methods: Mapping[str, Mapping[str, Any]], columns: Mapping[str, str]) -> list[str]:
    """One printed line a method: ``columns`` maps a label to a metric whose mean it shows."""
    return [
        f"{name:32s} "
        + " ".join(f"{label} {m[metric]['mean']:.3f}" for label, metric in columns.items())
        for name, m in methods.items()
    ]
