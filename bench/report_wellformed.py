"""Issue 38 item 2's section of docs/benchmarks.md: malformed shown drafts before and after
(bench/results/replay_wellformed.json, from bench/replay_wellformed.py, which left the tree:
bench/results/README.md)."""

from __future__ import annotations

from typing import Any

from bench.tables import diff_text, find, load, met, say, table

NAME = "replay_wellformed"
MALFORMED_AT_MOST = 0.02  # the target: of the shown drafts
P50_AT_MOST = 1.3  # request p50, after over before


def _share(cell: dict[str, Any]) -> str:
    return f"{cell['malformed']} of {cell['shown']} ({100 * cell['share']:.1f}%)"


def _why(cell: dict[str, Any]) -> str:
    return ", ".join(f"{w} {n}" for w, n in sorted(cell["why"].items())) or "none"


def _paired(c: dict[str, Any], cursor: str, metric: str) -> dict[str, Any]:
    return dict(find(c["paired"], cursor=cursor, metric=metric))


def _rows(c: dict[str, Any], config: str) -> list[list[Any]]:
    out = []
    for cursor in ("line-start", "mid-line"):
        b, a = c["before"][cursor], c["after"][cursor]
        ratio = a["p50_ms"] / b["p50_ms"] if b["p50_ms"] else float("nan")
        out.append(
            [
                config,
                cursor,
                _share(b),
                _share(a),
                f"{100 * b['em1']:.0f} -> {100 * a['em1']:.0f}",
                f"{100 * b['emk']:.0f} -> {100 * a['emk']:.0f}",
                f"{100 * b['esk']:.1f} -> {100 * a['esk']:.1f} "
                f"({diff_text(_paired(c, cursor, 'esk'))})",
                f"{100 * b['emk_verbatim']:.0f} -> {100 * a['emk_verbatim']:.0f} "
                f"(n = {a['verbatim_n']})",
                f"{b['p50_ms']:.0f} -> {a['p50_ms']:.0f} ({ratio:.2f}x)",
            ]
        )
    return out


def _targets(c: dict[str, Any]) -> list[str]:
    """The issue's targets for one configuration, at the line start (the issue's cursor)."""
    a, b = c["after"]["all"], c["before"]["all"]
    start_b, start_a = c["before"]["line-start"], c["after"]["line-start"]
    ratio = start_a["p50_ms"] / start_b["p50_ms"] if start_b["p50_ms"] else float("nan")
    em1, verbatim = _paired(c, "line-start", "em1"), _paired(c, "line-start", "emk_verbatim")
    return [
        f"- malformed drafts shown at most {100 * MALFORMED_AT_MOST:.0f}% of shown drafts: "
        f"{met(a['share'] <= MALFORMED_AT_MOST)} ({_share(a)}; before {_share(b)}).",
        f"- no loss of EM@1: {met(em1['mean'] >= 0)} (paired difference {diff_text(em1)}).",
        f"- no loss of verbatim-line EM@3: {met(verbatim['mean'] >= 0)} "
        f"(paired difference {diff_text(verbatim)}).",
        f"- request p50 at most {P50_AT_MOST}x: {met(ratio <= P50_AT_MOST)} "
        f"({start_a['p50_ms']:.0f} / {start_b['p50_ms']:.0f} ms = {ratio:.2f}x).",
    ]


def wellformed_section() -> str | None:
    """The section, or None before its results exist."""
    r = load(NAME, False)
    if r is None:
        return None
    header = ["configuration", "cursor", "malformed shown, before", "after", "EM@1 %"]
    header += ["EM@3 %", "ES@3 % (paired difference)", "verbatim EM@3 %", "p50 ms"]
    rows = [row for config, c in r["configs"].items() for row in _rows(c, config)]
    lines = []
    for config, c in r["configs"].items():
        b, a = c["before"]["all"], c["after"]["all"]
        lines.append(
            f"- *{config}*: malformed shown drafts: {_share(b)} before ({_why(b)}), "
            f"{_share(a)} after ({_why(a)}); the check {a['check_ms_p50']:.1f} ms a request "
            f"(p50; at most {a['check_ms_max']:.1f})."
        )
        lines += [f"  {t}" for t in _targets(c)]
    runs = r["runs"]
    return say(
        NAME,
        file=r["_file"],
        split=r["data"]["split"],
        positions=r["data"]["positions"],
        before=runs["before"]["server_commit"][:7],
        after=runs["after"]["server_commit"][:7],
        before_file=runs["before"]["file"],
        after_file=runs["after"]["file"],
        table=table(header, rows, "llrrrrrrr"),
        lines="\n".join(lines),
    )
