"""The replays' driver: configurations, the replay's stores, one server for a run, saving as
it goes. bench/replay.py (line tasks) and bench/replay_blocks.py (block tasks) each give it
their ``Tasks``; it imports neither, so neither imports the other through it.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import store_dir
from bench.measure import ROOT, Stamp, percentile
from bench.metrics import bootstrap_ci
from bench.pipeline import Benchmark, run, save
from lsp_server.settings import parse_settings

REPO_FIELDS = ("snapshot", "snapshot_date", "cutoff", "until", "candidates", "url")  # to results


COMPILE_WAIT_S = 900  # the server's compiled decode step (built once, then cached on disk)


BASE = {"k": 3, "method": "superposed", "userStore": False}  # every configuration starts here


@dataclass(frozen=True)
class Config:
    """One configuration: server settings, and whether the codebase store is indexed."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)
    store: bool = True  # False: an empty codebase store (nothing indexed)


PRESETS = {
    c.name: c
    for c in (
        Config("superposed+store", {"memory": True, "mix": "interpolate"}),  # all the memory
        Config("superposed-nostore", {"memory": False, "mix": "interpolate"}, store=False),
        # issue 22's before: the drafts as decoded, near-duplicates kept
        Config("superposed-close", {"memory": True, "mix": "interpolate", "distinctDrafts": False}),
        Config("greedy", {"method": "greedy", "k": 1}),
        Config("nucleus", {"method": "nucleus"}),
        Config("beam", {"method": "beam"}),
        # issue 23: the line modes, each over all the memory; "single" is the default as it was
        # (24 tokens); multi and auto with the server's own block budget (maxNewTokens per line,
        # maxLines) and block end rules
        Config("single", {"memory": True, "mix": "interpolate", "lineMode": "single",
                          "maxNewTokens": 24}),
        Config("multi", {"memory": True, "mix": "interpolate", "lineMode": "multi"}),
        Config("auto", {"memory": True, "mix": "interpolate", "lineMode": "auto"}),
    )
}  # fmt: skip


def cells(
    rows: Sequence[Mapping[str, Any]],
    metrics: Sequence[str],
    subsets: Mapping[str, Callable[[Mapping[str, Any]], bool]],
    cursors: Sequence[str] | None = None,
    no_ms: float | None = math.nan,
) -> dict[str, Any]:
    """config -> cursor -> subset -> each metric's mean and bootstrap interval, n, p50 and p95
    ms (``no_ms`` where no row has a time). ``cursors`` None: the cursors the rows have."""
    out: dict[str, Any] = {}
    for config in dict.fromkeys(r["config"] for r in rows):
        out[config] = {}
        for cursor in cursors or dict.fromkeys(r["cursor"] for r in rows):
            mine = [r for r in rows if r["config"] == config and r["cursor"] == cursor]
            out[config][cursor] = {}
            for subset, keep in subsets.items():
                part = [r for r in mine if keep(r)]
                cell: dict[str, Any] = {m: bootstrap_ci([r[m] for r in part]) for m in metrics}
                ms = [r["ms"] for r in part]
                cell["n"] = len(part)
                cell["p50_ms"] = percentile(ms, 50) if ms else no_ms
                cell["p95_ms"] = percentile(ms, 95) if ms else no_ms
                out[config][cursor][subset] = cell
    return out


def slug(name: str) -> str:
    return name.replace("/", "--")  # no "+": URIs quote it, and lookups by URI would miss


def workspace_of(base: Path, repo: str, snapshot: str) -> Path:
    return base / "ws" / f"{slug(repo)}-{snapshot[:10]}"


def write_snapshot(root: Path, files: Mapping[str, str]) -> None:
    """The snapshot's files on disk (rewritten only where they differ), as index-repo reads."""
    for rel, text in files.items():
        path = root / rel
        if not path.is_file() or path.read_text(encoding="utf-8", errors="replace") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")


def build_stores(data: Mapping[str, Any], repos: Sequence[str], model: str) -> dict[str, Any]:
    """Index each repository's snapshot (cached) and make an empty store; returns their paths."""
    from ngram_db import NgramStore, index_repo
    from superposed.tokenizer import load_tokenizer

    base = store_dir() / "replay"
    tokenizer = load_tokenizer(model)
    tag = hashlib.sha1(model.encode()).hexdigest()[:8]
    out: dict[str, Any] = {"workspace": str(base / "ws"), "repos": {}}
    for repo in repos:
        meta = data["repos"][repo]
        root = workspace_of(base, repo, meta["snapshot"])
        write_snapshot(root, meta["files"])
        db = base / f"{slug(repo)}-{meta['snapshot'][:10]}-{tag}.db"
        start = time.perf_counter()
        with NgramStore.open(db, tokenizer) as store:
            summary = index_repo(root, store, progress=False)
            stats = store.stats()
        seconds = time.perf_counter() - start
        print(f"store {repo}: {stats.get('tokens')} tokens ({seconds:.0f} s)", file=sys.stderr)
        out["repos"][repo] = {
            "root": str(root),
            "db": str(db),
            "files": stats.get("files"),
            "indexed_now": summary.indexed,
            "tokens": stats.get("tokens"),
            "seconds": round(seconds, 1),
        }
    empty = base / f"empty-{tag}.db"
    NgramStore.open(empty, tokenizer).close()
    out["empty"] = str(empty)
    return out


def column_utf16(text: str, column: int) -> int:
    """LSP positions count UTF-16 code units by default."""
    return len(text[:column].encode("utf-16-le")) // 2


async def run_configs(
    configs: Sequence[Config],
    todo: Sequence[Any],  # a Tasks' positions: repo, path, cursor, line, column, document
    stores: Mapping[str, Any],
    model: str,
    max_new_tokens: int | None,
    *,
    row_of: Callable[[Any, list[str]], dict[str, Any]],
    done: Callable[[list[dict[str, Any]]], object] | None = None,
    server_commit: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One server for the whole run; each configuration is applied as didChangeConfiguration.

    ``done`` gets the rows so far after each configuration (a long run keeps what it did).
    ``row_of(position, drafts)``: a row's task fields and metrics (the Tasks' own);
    ``max_new_tokens`` None leaves the budget to each configuration (or the server's default).
    ``server_commit``: run the server of that commit (``git archive``), not the working tree's
    (others' unfinished edits stay out of a measurement).
    """
    from lsprotocol import types

    from bench.lsp_latency import Bench, server, sources_at

    rows: list[dict[str, Any]] = []
    workspace = Path(stores["workspace"])
    with tempfile.TemporaryDirectory(prefix="replay-") as tmp:
        base: dict[str, Any] = {**BASE, "model": model}
        if max_new_tokens is not None:
            base["maxNewTokens"] = max_new_tokens
        sources = None
        if server_commit:
            (Path(tmp) / "src").mkdir()
            sources = sources_at(server_commit, Path(tmp) / "src")
        async with server(workspace, Path(tmp) / "data", base, sources) as lsp:
            client = Bench(lsp, workspace)
            await client.configure(base)
            compiled = await client.wait_compiled(COMPILE_WAIT_S)
            for config in configs:
                for repo in dict.fromkeys(p.repo for p in todo):
                    meta = stores["repos"][repo]
                    db = meta["db"] if config.store else stores["empty"]
                    await client.configure({**base, **config.options, "codebaseDb": db})
                    mine = [p for p in todo if p.repo == repo]
                    # Each cursor's positions in turn (line-start first): a position never follows
                    # its own line's other cursor, so no request extends the one before it.
                    cursors = list(dict.fromkeys(p.cursor for p in todo))
                    mine.sort(key=lambda p: cursors.index(p.cursor))
                    for n, p in enumerate(mine):
                        uri = client.open(str(Path(meta["root"]) / p.path), p.document)
                        line_text = p.document.split("\n")[p.line]
                        at = types.Position(p.line, column_utf16(line_text, p.column))
                        ms, drafts = await client.inline(uri, at)
                        sure = await client.confidence()  # after the answer: not in ms
                        client.close(uri)
                        row = {"config": config.name, "ms": ms, **row_of(p, drafts)}
                        rows.append({**row, **sure})
                        if (n + 1) % 20 == 0:
                            print(f"{config.name} {repo}: {n + 1}/{len(mine)}", file=sys.stderr)
                if done is not None:
                    done(rows)
            stats = await client.stats()
    return rows, {"compiled_step": compiled, "model": stats["model"], "counters": stats["counters"]}


def parse_configs(names: str, defines: Sequence[str]) -> list[Config]:
    """The named configurations: presets, and NAME=JSON definitions (settings over the base).

    A definition's JSON object holds server settings; ``"store": false`` leaves the codebase
    store empty.
    """
    known = dict(PRESETS)
    for item in defines:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"--define {item!r}: write NAME=JSON, e.g. 'mine={{\"alpha\": 0.3}}'")
        try:
            options = json.loads(raw)
        except json.JSONDecodeError as err:
            raise SystemExit(f"--define {name}: the settings are not JSON: {err}") from err
        if not isinstance(options, dict):
            raise SystemExit(f"--define {name}: the settings must be a JSON object")
        store = options.pop("store", True)
        known[name] = Config(name, options, store=bool(store))
    chosen = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise SystemExit(f"unknown configuration {unknown}; known: {', '.join(known)}")
    for name in chosen:
        _settings, errors = parse_settings({**BASE, **known[name].options})
        if errors:
            raise SystemExit(f"configuration {name}: " + "; ".join(errors))
    return [known[n] for n in chosen]


def resolve_commit(ref: str | None) -> str | None:
    """A git ref as a full commit id (None: the working tree's server)."""
    if ref is None:
        return None
    import subprocess

    out = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{ref}^{{commit}}"],
        capture_output=True, text=True,
    )  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"--server-commit {ref}: not a commit ({out.stderr.strip()})")
    return out.stdout.strip()


@dataclass(frozen=True)
class Tasks:
    """What differs between the line replay and the block replay (bench/replay_blocks.py);
    the run around them (configurations, stores, one server, saving as it goes) is one."""

    stem: str  # the results file's stem in bench/results
    description: str
    default_configs: str  # --configs' default
    options: Callable[[argparse.ArgumentParser], object]  # the tasks' own arguments
    count: str  # what the data block counts its tasks as: "targets", "blocks"
    repo_fields: tuple[str, ...]  # each repository's fields the results carry
    load: Callable[[Path], dict[str, Any]]
    positions: Callable[[argparse.Namespace, Mapping[str, Any]], list[Any]]
    row_of: Callable[[Any, list[str]], dict[str, Any]]
    summarize: Callable[[Sequence[Mapping[str, Any]]], dict[str, Any]]
    compare: Callable[[Sequence[Mapping[str, Any]], Sequence[str]], list[dict[str, Any]]]
    settings: Callable[[argparse.Namespace], dict[str, Any]]
    line: Callable[[str, str, Mapping[str, Any]], str]  # printed: a configuration at a cursor


def data_block(
    args: argparse.Namespace, tasks: Tasks, data: Mapping[str, Any], todo: Sequence[Any]
) -> dict[str, Any]:
    """What the results say of the tasks: the frozen file, its split, its repositories."""
    repos = list(dict.fromkeys(p.repo for p in todo))
    return {
        "file": str(args.data.relative_to(ROOT)) if args.data.is_relative_to(ROOT) else "",
        "sha256": hashlib.sha256(args.data.read_bytes()).hexdigest(),
        "split": args.split,
        "repos": {r: {k: data["repos"][r][k] for k in tasks.repo_fields} for r in repos},
        "splits": data["split"],
        tasks.count: len({p.task for p in todo}),
        "cursors": list(dict.fromkeys(p.cursor for p in todo)),
        "positions": len(todo),
    }


def benchmark(tasks: Tasks) -> Benchmark:
    """A replay as a ``pipeline.Benchmark``: the server options and the tasks' own; results in
    --out, else bench/results/<stem>[-quick][-validation].json."""

    def options(parser: argparse.ArgumentParser) -> None:
        server_options(parser, tasks.default_configs, tasks.stem)
        tasks.options(parser)

    def variant(args: argparse.Namespace) -> str:
        quick = "-quick" if getattr(args, "quick", False) else ""
        return quick + ("-validation" if args.split == "validation" else "")

    return Benchmark(tasks.stem, tasks.description, options=options, variant=variant)


def measure(args: argparse.Namespace, tasks: Tasks) -> tuple[dict[str, Any], Stamp]:
    """Run the configurations over the tasks on one server, saving the results after each
    configuration (``partial`` until the server's final stats are in)."""
    configs = parse_configs(args.configs, args.define)
    server_commit = resolve_commit(args.server_commit)
    started = time.perf_counter()
    stamp = Stamp(model=args.model)
    data = tasks.load(args.data)
    todo = tasks.positions(args, data)
    stores = build_stores(data, list(dict.fromkeys(p.repo for p in todo)), args.model)
    fixed = {"data": data_block(args, tasks, data, todo), "settings": tasks.settings(args),
             "server_commit": server_commit}  # fmt: skip

    def result_of(rows: list[dict[str, Any]], server: dict[str, Any] | None) -> dict[str, Any]:
        ran = [c for c in configs if any(r["config"] == c.name for r in rows)]
        if server is not None:  # the server picks the runner as the product does
            stamp.runner = f"the server's (precision auto), compiled step {server['compiled_step']}"
        return {
            **fixed,
            "configs": {c.name: {"options": dict(c.options), "store": c.store} for c in ran},
            "stores": stores,
            "server": server,
            "partial": server is None,
            "summary": tasks.summarize(rows),
            "comparisons": tasks.compare(rows, [c.name for c in ran]),
            "rows": rows,
        }

    def done(rows: list[dict[str, Any]]) -> None:
        save(result_of(rows, None), stamp, started, benchmark(tasks).output(args))

    rows, server = asyncio.run(
        run_configs(configs, todo, stores, args.model, args.max_new_tokens, done=done,
                    row_of=tasks.row_of, server_commit=server_commit)
    )  # fmt: skip
    return result_of(rows, server), stamp


def replay(tasks: Tasks, argv: list[str] | None = None) -> int:
    """Parse, measure and save (``pipeline.run``), and print each configuration's line at
    each cursor (and its malformed shown drafts where the rows count them)."""

    def report(result: dict[str, Any]) -> Iterator[str]:
        for name in result["configs"]:
            for cursor in result["data"]["cursors"]:
                yield tasks.line(name, cursor, result["summary"][name][cursor]["all"])
            if any("shown" in row for row in result["rows"]):
                yield summary_line(result["rows"], name)

    run(benchmark(tasks), lambda args: measure(args, tasks), report, argv)
    return 0


def server_options(parser: argparse.ArgumentParser, default_configs: str, out: str) -> None:
    """The options both replays take: which configurations, the model, the data, the server."""
    parser.add_argument("--split", choices=("validation", "test"), default="test")
    parser.add_argument("--configs", default=default_configs, help="comma-separated names")
    parser.add_argument("--define", action="append", default=[], metavar="NAME=JSON",
                        help="a configuration: server settings over the default ones")  # fmt: skip
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--server-commit", metavar="REF",
                        help="the server of this commit (default: the working tree)")  # fmt: skip
    parser.add_argument("--out", type=Path, help=f"results JSON (default: bench/results/{out}*)")


def summary_line(rows: Sequence[Mapping[str, Any]], config: str) -> str:
    """malformed shown drafts: N of M (x%), for one configuration's rows that count them."""
    mine = [r for r in rows if r["config"] == config and "shown" in r]
    shown, bad = sum(r["shown"] for r in mine), sum(r["malformed"] for r in mine)
    share = bad / shown if shown else 0.0
    return f"{config:24s} malformed shown drafts: {bad} of {shown} ({share:.1%})"
