"""A save's secret scan: our eight patterns against detect-secrets, side by side (issue 21).

    python -m bench.secrets_scan [--repeats 3] [--no-stdlib]

(detect-secrets comes with the bench extra; the product itself does not use it.)

Times three scans of the same texts in one run: the eight patterns as one regex (the scan
before this benchmark), ``ngram_db.files.secret_in`` (the same patterns, each run only on a
text that holds its needle) and detect-secrets with its default settings (all its plugins
and filters) on the text's lines, as a save would call it (no temporary file: a lower bound
on its ``scan_file``). Texts: each Python file of this repository (a typical save), and 1 MB
of those with no secret joined (the largest file a save indexes by default). Also counts the
files each scan flags, here and in the standard library's top-level modules (``--no-stdlib``
skips those).
Writes bench/results/secrets_scan.json and .md.

The verdict compares detect-secrets' median per file with ``BUDGET_MS``: a save's whole
update_file of 1,000 lines has 100 ms (bench/ngram.py), so its scan gets a few tens.
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

from bench.measure import ROOT, Stamp, median_ms
from bench.pipeline import Benchmark, run
from bench.split import stdlib_root
from bench.tables import table
from ngram_db.files import DEFAULT_MAX_FILE_BYTES, SECRET_PATTERNS, secret_in

BUDGET_MS = 30.0
FOLDERS = ("lsp_server", "ngram_db", "bench", "tests")
# the scan before: one alternation of the eight patterns, searched whole
_ONE_REGEX = re.compile("|".join(f"(?:{p})" for p in SECRET_PATTERNS.values()))


def one_regex(text: str, name: str) -> bool:
    return _ONE_REGEX.search(text) is not None


def ours(text: str, name: str) -> bool:
    return secret_in(text) is not None


def detect_secrets_types(text: str, name: str) -> list[str]:
    """The types of secret detect-secrets finds in a text (default settings must be active)."""
    from detect_secrets.core.scan import _process_line_based_plugins

    lines = list(enumerate(text.splitlines(), start=1))
    return [secret.type for secret in _process_line_based_plugins(lines, name)]


def detect_secrets(text: str, name: str) -> bool:
    return bool(detect_secrets_types(text, name))


SCANS: dict[str, Callable[[str, str], bool]] = {
    "one regex (before)": one_regex,
    "secret_in (needles)": ours,
    "detect-secrets": detect_secrets,
}


def corpus() -> dict[str, str]:
    """This repository's Python files, by path relative to it."""
    paths = sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))
    return {p.relative_to(ROOT).as_posix(): p.read_text(errors="replace") for p in paths}


def one_megabyte(texts: dict[str, str]) -> str:
    """1 MB of the files with no secret: what most large saves are (a text with a secret is
    skipped at its first match, so the scans differ most where there is none)."""
    clean = [t for t in texts.values() if not one_regex(t, "") and not detect_secrets(t, "")]
    joined, size = [], 0
    while size < DEFAULT_MAX_FILE_BYTES:
        for text in clean:
            joined.append(text)
            size += len(text)
    return "".join(joined)[:DEFAULT_MAX_FILE_BYTES]


def time_files(texts: dict[str, str], repeats: int) -> dict[str, Any]:
    """Per scan: the median ms of each file (over ``repeats``), summarised over the files."""
    out: dict[str, Any] = {}
    for label, scan in SCANS.items():
        per_file = [
            median_ms(partial(scan, t, n), repeats) for n, t in texts.items()
        ]
        ordered = sorted(per_file)
        out[label] = {
            "median_ms": statistics.median(per_file),
            "p90_ms": ordered[int(0.9 * (len(ordered) - 1))],
            "max_ms": ordered[-1],
            "total_ms": sum(per_file),
        }
    return out


def flagged(texts: dict[str, str]) -> dict[str, Any]:
    """Which files each scan flags, and detect-secrets' types of secret."""
    types: Counter[str] = Counter()
    out: dict[str, Any] = {"files": len(texts)}
    for label, scan in SCANS.items():
        if label == "detect-secrets":
            hits = {n: detect_secrets_types(t, n) for n, t in texts.items()}
            names = sorted(n for n, found in hits.items() if found)
            for found in hits.values():
                types.update(set(found))
        else:
            names = sorted(n for n, t in texts.items() if scan(t, n))
        out[label] = names
    out["detect-secrets types (files)"] = dict(types.most_common())
    return out


def stdlib_texts() -> dict[str, str]:
    root = stdlib_root()
    return {p.name: p.read_text(errors="replace") for p in sorted(root.glob("*.py"))}


def report(results: dict[str, Any], repeats: int) -> list[str]:
    s, files, mb = results["stamp"], results["files"], results["one_megabyte"]
    header = ["scan", "median ms / file", "p90", "max", f"all {files['n']} files", "1 MB ms"]
    rows = [
        [label, f"{t['median_ms']:.2f}", f"{t['p90_ms']:.2f}", f"{t['max_ms']:.1f}",
         f"{t['total_ms']:.0f}", f"{mb[label]:.1f}"]
        for label, t in files["times"].items()
    ]  # fmt: skip
    ds, fast = files["times"]["detect-secrets"], files["times"]["secret_in (needles)"]
    within = ds["median_ms"] <= BUDGET_MS
    lines = [
        "# A save's secret scan: our patterns against detect-secrets (bench/secrets_scan.py)",
        "",
        f"`{s['command']}`: {s['date']}, commit {s['commit']}, {s['machine']}, "
        f"detect-secrets {results['detect_secrets_version']}, medians of {repeats} per file, "
        f"load {s['load_start']} at start, {s['load_end']} at end.",
        "",
        f"Texts: the {files['n']} Python files of {', '.join(FOLDERS)} ({files['chars']:,} "
        "characters; a typical save), and 1 MB of those with no secret joined (the largest "
        "save indexed).",
        "",
        table(header, rows, "lrrrrr"),
        "",
        f"detect-secrets takes {ds['median_ms'] / fast['median_ms']:.0f}x the time of "
        f"secret_in on the median file ({ds['median_ms']:.1f} ms against "
        f"{fast['median_ms']:.2f} ms) and {mb['detect-secrets'] / mb['secret_in (needles)']:.0f}x "
        f"on 1 MB. Verdict: its median file is {'within' if within else 'over'} the "
        f"{BUDGET_MS:.0f} ms a save's scan may take.",
        "",
        "## Files flagged",
        "",
    ]
    for corpus_name, hits in results["flagged"].items():
        lines.append(f"{corpus_name} ({hits['files']} files):")
        lines.append("")
        for label in SCANS:
            names = hits[label]
            shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
            lines.append(f"- {label}: {len(names)}" + (f" ({shown})" if names else ""))
        lines.append(f"- detect-secrets' types (files): {hits['detect-secrets types (files)']}")
        lines.append("")
    return lines


def scan_costs(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    """The scans' time per file of this repository and on one megabyte, and what they flag
    here and in the standard library."""
    from importlib.metadata import version

    from detect_secrets.settings import default_settings

    stamp = Stamp(model="none (no model: text scans)")
    texts = corpus()
    results: dict[str, Any] = {"detect_secrets_version": version("detect-secrets")}
    with default_settings():
        big = one_megabyte(texts)
        results["files"] = {
            "n": len(texts),
            "chars": sum(map(len, texts.values())),
            "times": time_files(texts, args.repeats),
        }
        results["one_megabyte"] = {
            label: median_ms(partial(scan, big, "big.py"), args.repeats)
            for label, scan in SCANS.items()
        }
        results["flagged"] = {"this repository": flagged(texts)}
        if not args.no_stdlib:
            results["flagged"][f"standard library top level ({stdlib_root()})"] = flagged(
                stdlib_texts()
            )
    results["repeats"] = args.repeats
    return results, stamp


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-stdlib", action="store_true")


def markdown(results: dict[str, Any]) -> str:
    return "\n".join(report(results, results["repeats"])) + "\n"


BENCH = Benchmark("secrets_scan", __doc__.splitlines()[0], options=options, markdown=markdown)


def main(argv: list[str] | None = None) -> None:
    run(BENCH, scan_costs, lambda results: report(results, results["repeats"]), argv)


if __name__ == "__main__":
    main()
