"""The shape every benchmark takes: spec -> run -> save -> report.

A ``Benchmark`` names the script, its sizes and where its results go; ``run`` parses the command
line, lets the script measure, stamps and saves what it measured, and prints the script's
summary lines. A script's ``main`` is then one call, and the parts that differ between scripts
(what is measured, how it is summarised) are functions that can be read and tested alone.

The quality scripts' summaries (intervals per method, the paired comparison of the first method
with the others) are bench.metrics' ``summarize`` and ``compare_first``; their printed lines
bench.tables' ``method_lines``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.measure import RESULTS, Stamp, write_json


@dataclass(frozen=True)
class Benchmark:
    """One benchmark script: its name (the results file's stem), what it measures, its sizes.

    ``options`` adds the script's own arguments to the common ones (``--quick``, ``--size``,
    ``--n``, ``--threads``, ``--runner``, ``--seed`` where there are sizes); ``markdown``
    renders the saved results as the summary committed beside them (<name>.md)."""

    name: str
    description: str
    sizes: Mapping[str, Any] = field(default_factory=dict)
    options: Callable[[argparse.ArgumentParser], object] | None = None
    markdown: Callable[[dict[str, Any]], str] | None = None
    variant: Callable[[argparse.Namespace], str] | None = None  # the file's suffix for a run
    out_is_stem: bool = False  # --out names <out>.json and <out>.md, not the JSON itself

    def output(self, args: argparse.Namespace) -> Path:
        """``--out`` where the script has it and it is given, else
        bench/results/<name><variant>.json: by default -quick for a quick run."""
        if getattr(args, "out", None) is not None:
            out = Path(args.out)
            if self.out_is_stem and out.suffix != ".json":
                return out.with_name(out.name + ".json")
            return out
        if self.variant is not None:
            return RESULTS / f"{self.name}{self.variant(args)}.json"
        return RESULTS / f"{self.name}{'-quick' if getattr(args, 'quick', False) else ''}.json"

    def parser(self) -> argparse.ArgumentParser:
        if self.sizes:
            parser = run_parser(self.description, self.sizes)
        else:
            parser = argparse.ArgumentParser(description=self.description)
        if self.options is not None:
            self.options(parser)
        return parser


def size_of(args: argparse.Namespace) -> str:
    """The size preset the arguments ask for (``--quick`` wins over ``--size``)."""
    return "quick" if getattr(args, "quick", False) else str(args.size)


def save(results: dict[str, Any], stamp: Stamp, started: float, path: Path) -> dict[str, Any]:
    """Stamp the results (commit, machine, load, seconds, command) and write them to ``path``.

    A script that measures in phases calls this after each one: a run stopped between phases
    still leaves what it measured."""
    results["stamp"] = stamp.finish(started)
    write_json(path, results)
    return results


Measure = Callable[[argparse.Namespace], tuple[dict[str, Any], Stamp]]
Report = Callable[[dict[str, Any]], Iterable[str]]


def run(bench: Benchmark, measure: Measure, report: Report, argv: list[str] | None = None) -> Any:
    """Parse ``argv``, measure, save to the benchmark's output (and its markdown summary beside
    it), print the report's lines. The summary renders the file as saved (JSON's string keys,
    lists for tuples), so the committed .md always comes back from the committed .json."""
    args = bench.parser().parse_args(argv)
    started = time.perf_counter()
    results, stamp = measure(args)
    path = bench.output(args)
    save(results, stamp, started, path)
    if bench.markdown is not None:
        path.with_suffix(".md").write_text(bench.markdown(json.loads(path.read_text())))
    for line in report(results):
        print(line)
    return results


def run_parser(description: str, sizes: Mapping[str, Any]) -> argparse.ArgumentParser:
    """The arguments every quality script takes: size preset, engine threads and runner, seed."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="small fixed subsets")
    parser.add_argument("--size", choices=list(sizes), default="full")
    parser.add_argument("--n", type=int, help="items (overrides the size preset)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runner", default="auto", help="engine runner: auto (as the server), hf")
    parser.add_argument("--seed", type=int, default=0)
    return parser
