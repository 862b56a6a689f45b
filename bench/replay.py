"""Repository-history replay: complete lines that later commits added, through the server.

The product's real situation: a codebase indexed at some date, then the user writes the next
lines of that same codebase. The tasks are frozen in ``bench/data/replay.json.gz`` (built by
``bench/replay_build.py`` from git mirrors; this script reads only that file): per repository
an index snapshot (the last commit before a cutoff after 2024-07-01, stored as its .py files'
texts) and target lines that later commits added, each with two cursor positions
(``line-start``: after the indentation; ``mid-line``: the end of the first word ending at or
after a third of the line's text). Split by repository: validation (all tuning) and test (the
report); the file says which repository is which.

Per configuration, as an editor would: the snapshot is indexed into a codebase store
(``ngram_db.index_repo``; cached between runs), the language server starts over stdio with
the configuration's settings, and for each position the document (the post-commit file with
the target line cut at the cursor, the rest of the file present) is opened (didOpen), drafts
are requested (``textDocument/inlineCompletion``) and the document is closed.

Metrics per position, with ``rest`` = the target line after the cursor, trailing whitespace
trimmed, and each draft cut at its first newline and trimmed the same way:

- EM@1 / EM@k: the first draft / any draft equals ``rest``;
- edit similarity@k: the best over drafts of 1 - Levenshtein(draft, rest) / max length;
- characters saved@k: the user accepts a draft up to where it first differs from ``rest``
  (the longest common prefix; VS Code and Neovim accept a draft in part, word by word, so this
  is the most partial acceptance can give); the best draft's accepted length over len(rest);
- distinct drafts: different non-empty drafts; empty: no non-empty draft at all;
- how alike the drafts are: the prefix all drafts share, over the first draft's length
  (``prefix``; ``close``: at least CLOSE_PREFIX of it), the mean normalised edit distance
  between two drafts (``apart``), and what drafts 2..k add (``gain``: EM@k - EM@1);
- latency: request to response, ms (p50, p95).

Positions are also split by where the target line occurs already: ``verbatim`` (its text is
a line of the snapshot), ``in-file`` (another line of the same document has its text). Paired
bootstrap intervals (2,000 resamples) compare configurations over the same positions.

    python -m bench.replay                         # test split, the three main configurations
    python -m bench.replay --split validation --configs superposed+store --limit 20
    python -m bench.replay --define 'mine={"alpha": 0.3}' --configs mine,superposed+store
    python -m bench.replay --quick                 # a small fixed subset (make bench-quick)
    python -m bench.replay --resummarize bench/results/replay.json   # metrics added since
    python -m bench.replay --split test --cursor line-start --configs single,auto \
        --out bench/results/replay_lines_auto.json        # issue 23: no loss on line tasks
    python -m bench.replay --tasks blocks --configs single,auto   # issue 23: bench/replay_blocks.py
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import hashlib
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import store_dir
from bench.measure import RESULTS, ROOT, Stamp, percentile, write_json
from bench.metrics import (
    bootstrap_ci,
    chars_saved,
    edit_similarity,
    paired_diff_ci,
    pairwise_distance,
    shared_prefix_share,
)
from lsp_server.settings import parse_settings

DATA = ROOT / "bench" / "data" / "replay.json.gz"
CURSORS = ("line-start", "mid-line")
REPO_FIELDS = ("snapshot", "snapshot_date", "cutoff", "until", "candidates", "url")  # to results
QUICK_PER_REPO = 5  # --quick: the first targets of each repository of the split
MAX_NEW_TOKENS = 24  # enough for a typical line to finish (drafts stop at the newline)
COMPILE_WAIT_S = 900  # the server's compiled decode step (built once, then cached on disk)
# A request's drafts are "close" when all share at least this much of the first (issue 22: at
# the line start, 43% of requests had all three drafts share 60% of the first's text).
CLOSE_PREFIX = 0.6
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
MAIN = ("superposed+store", "superposed-nostore", "greedy")


# ----- tasks ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Position:
    """One request: a target line of a document, cut at a cursor."""

    task: str  # the task id, e.g. "psf/black#3"
    repo: str
    path: str  # the file, relative to the repository
    cursor: str  # line-start | mid-line
    line: int  # 0-based line of the target
    column: int  # the cursor's character offset in the line
    document: str  # the whole document as the editor has it: the target line cut at the cursor
    rest: str  # what the user would type next: the line after the cursor, trailing ws trimmed
    verbatim: bool  # the target line's text is a line of the snapshot
    in_file: bool  # another line of the document has the target line's text


def load_data(path: Path = DATA) -> dict[str, Any]:
    data = json.loads(gzip.decompress(path.read_bytes()))
    assert isinstance(data, dict)
    return data


def cut_document(document: str, line: int, column: int) -> str:
    """The document with line ``line`` ending at ``column``; every other line kept."""
    rows = document.split("\n")
    rows[line] = rows[line][:column]
    return "\n".join(rows)


def snapshot_lines(files: Mapping[str, str]) -> set[str]:
    """The stripped non-blank lines of a snapshot."""
    return {s for text in files.values() for row in text.split("\n") if (s := row.strip())}


def positions(
    data: Mapping[str, Any],
    split: str,
    per_repo: int | None = None,
    cursors: Sequence[str] = CURSORS,
) -> list[Position]:
    """The positions of a split: the ``cursors`` of the first ``per_repo`` targets per
    repository."""
    repos = data["split"][split]
    known = {r: snapshot_lines(data["repos"][r]["files"]) for r in repos}
    taken: dict[str, int] = {r: 0 for r in repos}
    out: list[Position] = []
    for task in data["tasks"]:
        repo = task["repo"]
        if repo not in taken or (per_repo is not None and taken[repo] >= per_repo):
            continue
        taken[repo] += 1
        document = data["documents"][task["document"]]
        text, line = task["text"], task["line"]
        others = document.split("\n")
        in_file = any(row.strip() == text.strip() for i, row in enumerate(others) if i != line)
        for cursor in cursors:
            column = task["cursors"][cursor]
            out.append(
                Position(
                    task=task["id"],
                    repo=repo,
                    path=task["path"],
                    cursor=cursor,
                    line=line,
                    column=column,
                    document=cut_document(document, line, column),
                    rest=text[column:].rstrip(),
                    verbatim=text.strip() in known[repo],
                    in_file=in_file,
                )
            )
    return out


# ----- metrics -------------------------------------------------------------------------------


def draft_line(draft: str) -> str:
    """What a draft puts on the cursor's line: up to its first newline, trailing ws trimmed."""
    return draft.split("\n", 1)[0].rstrip()


def position_metrics(drafts: Sequence[str], rest: str) -> dict[str, float]:
    """EM@1, EM@k, edit similarity@k, characters saved@k, distinct and empty for one request."""
    lines = [draft_line(d) for d in drafts]
    shown = [d for d in lines if d.strip()]
    first = lines[0] if lines else ""
    return {
        "em1": float(first == rest),
        "emk": float(rest in lines),
        "es1": edit_similarity(first, rest),
        "esk": max((edit_similarity(d, rest) for d in lines), default=0.0),
        "csk": max((chars_saved(d, rest) for d in lines), default=0.0),
        "distinct": float(len(set(shown))),
        "empty": float(not shown),
        # how alike the drafts are (nan for fewer than two), and what drafts 2..k add
        "prefix": shared_prefix_share(lines),
        "close": nan_or(shared_prefix_share(lines), lambda v: float(v >= CLOSE_PREFIX)),
        "apart": pairwise_distance(lines),
        "gain": float(rest in lines) - float(first == rest),
    }


def nan_or(value: float, then: Callable[[float], float]) -> float:
    return value if math.isnan(value) else then(value)


METRICS: tuple[str, ...] = ("em1", "emk", "es1", "esk", "csk", "distinct", "empty")
LIKENESS = ("prefix", "close", "apart", "gain")  # how alike the drafts are (issue 22)
METRICS += LIKENESS
SUBSETS = {
    "all": lambda r: True,
    "verbatim": lambda r: r["verbatim"],
    "in-file": lambda r: r["in_file"],
    "new": lambda r: not r["verbatim"] and not r["in_file"],
}


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per configuration, cursor (both, run or not) and subset: each metric's mean and
    interval, latency."""
    return cells(rows, METRICS, SUBSETS, CURSORS)


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


def compare(rows: Sequence[Mapping[str, Any]], configs: Sequence[str]) -> list[dict[str, Any]]:
    """Paired differences (a - b) over the same positions for each pair of configurations.

    Each later configuration against each earlier one, for EM@1, EM@k, edit similarity@k,
    characters saved@k and the gain of drafts 2..k (EM@k - EM@1); and every configuration's
    EM@k against greedy's EM@1 where greedy ran.
    """
    key = {(r["config"], r["task"], r["cursor"]): r for r in rows}
    pairs = [
        (a, b, m, m)
        for i, a in enumerate(configs)
        for b in configs[i + 1 :]
        for m in ("em1", "emk", "esk", "csk", "gain")
    ]
    if "greedy" in configs:
        pairs += [(a, "greedy", "emk", "em1") for a in configs if a != "greedy"]
    out = []
    for a, b, ma, mb in pairs:
        for cursor in CURSORS:
            both = [
                (ra, key[(b, ra["task"], cursor)])
                for (c, _t, cur), ra in key.items()
                if c == a and cur == cursor and (b, ra["task"], cursor) in key
            ]
            nan = math.nan  # a metric a row lacks (a run from before it) pairs as missing
            diff = paired_diff_ci(
                [x.get(ma, nan) for x, _ in both], [y.get(mb, nan) for _, y in both]
            )
            out.append({"a": a, "b": b, "metric_a": ma, "metric_b": mb, "cursor": cursor, **diff})
    return out


def line_row(p: Position, drafts: list[str]) -> dict[str, Any]:
    """A line task's row: the position's fields, the drafts and their metrics (with how many
    shown drafts are malformed there: bench/replay_wellformed.py)."""
    from bench.replay_wellformed import row_fields

    return {
        "task": p.task,
        "repo": p.repo,
        "cursor": p.cursor,
        "verbatim": p.verbatim,
        "in_file": p.in_file,
        "rest": p.rest,
        "drafts": drafts,
        **position_metrics(drafts, p.rest),
        **row_fields(p, drafts),
    }


# ----- stores and the server -----------------------------------------------------------------


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
    todo: Sequence[Position],
    stores: Mapping[str, Any],
    model: str,
    max_new_tokens: int | None,
    done: Callable[[list[dict[str, Any]]], object] | None = None,
    row_of: Callable[[Any, list[str]], dict[str, Any]] | None = None,
    server_commit: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One server for the whole run; each configuration is applied as didChangeConfiguration.

    ``done`` gets the rows so far after each configuration (a long run keeps what it did).
    ``row_of(position, drafts)``: a row's task fields and metrics (default: a line task's);
    ``max_new_tokens`` None leaves the budget to each configuration (or the server's default).
    ``server_commit``: run the server of that commit (``git archive``), not the working tree's
    (others' unfinished edits stay out of a measurement).
    """
    row_of = row_of or line_row
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
                        client.close(uri)
                        rows.append({"config": config.name, "ms": ms, **row_of(p, drafts)})
                        if (n + 1) % 20 == 0:
                            print(f"{config.name} {repo}: {n + 1}/{len(mine)}", file=sys.stderr)
                if done is not None:
                    done(rows)
            stats = await client.stats()
    return rows, {"compiled_step": compiled, "model": stats["model"], "counters": stats["counters"]}


# ----- the command ---------------------------------------------------------------------------


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


def resummarize(path: Path) -> dict[str, Any]:
    """A saved run's metrics computed again from its rows (each request's drafts and rest),
    as this script computes them now: a metric added since (issue 22's likeness) covers the
    run's requests without running them again. The stamp stays the run's; ``resummarized``
    says when and at which commit the metrics were recomputed."""
    result = json.loads(path.read_text())
    for row in result["rows"]:
        row.update(position_metrics(row["drafts"], row["rest"]))
    names = list(result["configs"])
    result["summary"] = summarize(result["rows"])
    result["comparisons"] = compare(result["rows"], names)
    now = Stamp(model=result["stamp"]["model"])
    result["resummarized"] = {"date": now.date, "commit": now.commit, "command": now.command}
    write_json(path, result)
    return result


@dataclass(frozen=True)
class Tasks:
    """What differs between the line replay and the block replay (bench/replay_blocks.py);
    the run around them (configurations, stores, one server, saving as it goes) is one."""

    stem: str  # the results file's stem in bench/results
    count: str  # what the data block counts its tasks as: "targets", "blocks"
    repo_fields: tuple[str, ...]  # each repository's fields the results carry
    load: Callable[[Path], dict[str, Any]]
    positions: Callable[[argparse.Namespace, Mapping[str, Any]], list[Any]]
    row_of: Callable[[Any, list[str]], dict[str, Any]]
    summarize: Callable[[Sequence[Mapping[str, Any]]], dict[str, Any]]
    compare: Callable[[Sequence[Mapping[str, Any]], Sequence[str]], list[dict[str, Any]]]
    settings: Callable[[argparse.Namespace], dict[str, Any]]
    line: Callable[[str, str, Mapping[str, Any]], str]  # printed: a configuration at a cursor
    # the configurations to run (default: --configs and --define), and what the results say
    # of the run before its configurations (default: the data block and the settings)
    configs: Callable[[argparse.Namespace], list[Config]] | None = None
    header: Callable[[argparse.Namespace, Mapping[str, Any], Sequence[Any]], dict] | None = None


def line_positions(args: argparse.Namespace, data: Mapping[str, Any]) -> list[Position]:
    per_repo = QUICK_PER_REPO if args.quick else args.limit
    return positions(data, args.split, per_repo, [args.cursor] if args.cursor else CURSORS)


def line_summary(name: str, cursor: str, c: Mapping[str, Any]) -> str:
    return (
        f"{name:24s} {cursor:10s} n={c['n']:3d} EM@1 {c['em1']['mean']:.3f} "
        f"EM@k {c['emk']['mean']:.3f} ES@k {c['esk']['mean']:.3f} "
        f"CS@k {c['csk']['mean']:.3f} distinct {c['distinct']['mean']:.2f} "
        f"empty {c['empty']['mean']:.2f} p50 {c['p50_ms']:.0f} ms p95 {c['p95_ms']:.0f} ms"
    )


LINES = Tasks(
    stem="replay",
    count="targets",
    repo_fields=REPO_FIELDS,
    load=load_data,
    positions=line_positions,
    row_of=line_row,
    summarize=summarize,
    compare=compare,
    settings=lambda a: {**BASE, "maxNewTokens": a.max_new_tokens, "model": a.model},
    line=line_summary,
)


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


def output_of(args: argparse.Namespace, tasks: Tasks) -> Path:
    """--out, else bench/results/<stem>[-quick][-validation].json."""
    quick = "-quick" if getattr(args, "quick", False) else ""
    validation = "-validation" if args.split == "validation" else ""
    return Path(args.out or RESULTS / f"{tasks.stem}{quick}{validation}.json")


def replay(args: argparse.Namespace, tasks: Tasks) -> int:
    """Run the configurations over the tasks on one server, saving the results after each
    configuration (``partial`` until the server's final stats are in), and print a summary."""
    configs = tasks.configs(args) if tasks.configs else parse_configs(args.configs, args.define)
    server_commit = resolve_commit(args.server_commit)
    started = time.perf_counter()
    stamp = Stamp(model=args.model)
    data = tasks.load(args.data)
    todo = tasks.positions(args, data)
    stores = build_stores(data, list(dict.fromkeys(p.repo for p in todo)), args.model)
    if tasks.header is not None:
        fixed = tasks.header(args, data, todo)
    else:
        fixed = {"data": data_block(args, tasks, data, todo), "settings": tasks.settings(args)}
    fixed["server_commit"] = server_commit

    def save(rows: list[dict[str, Any]], server: dict[str, Any] | None = None) -> dict[str, Any]:
        ran = [c for c in configs if any(r["config"] == c.name for r in rows)]
        if server is not None:  # the server picks the runner as the product does
            stamp.runner = f"the server's (precision auto), compiled step {server['compiled_step']}"
        result = {
            "stamp": stamp.finish(started),
            **fixed,
            "configs": {c.name: {"options": dict(c.options), "store": c.store} for c in ran},
            "stores": stores,
            "server": server,
            "partial": server is None,
            "summary": tasks.summarize(rows),
            "comparisons": tasks.compare(rows, [c.name for c in ran]),
            "rows": rows,
        }
        write_json(output_of(args, tasks), result)
        return result

    rows, server = asyncio.run(
        run_configs(configs, todo, stores, args.model, args.max_new_tokens, done=save,
                    row_of=tasks.row_of, server_commit=server_commit)
    )  # fmt: skip
    result = save(rows, server)
    from bench.replay_wellformed import summary_line

    for name in result["configs"]:
        for cursor in dict.fromkeys(p.cursor for p in todo):
            print(tasks.line(name, cursor, result["summary"][name][cursor]["all"]))
        if any("shown" in row for row in rows):
            print(summary_line(rows, name))
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


def line_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", choices=("lines", "blocks"), default="lines",
                        help="blocks: issue 23's block tasks (bench/replay_blocks.py)")  # fmt: skip
    server_options(parser, ",".join(MAIN), "replay")
    parser.add_argument("--limit", type=int, help="targets per repository (each has 2 cursors)")
    parser.add_argument("--quick", action="store_true",
                        help=f"the first {QUICK_PER_REPO} targets per repository")  # fmt: skip
    parser.add_argument("--cursor", choices=CURSORS,
                        help="one cursor only (half the requests); default: both")  # fmt: skip
    parser.add_argument("--max-new-tokens", type=int, default=MAX_NEW_TOKENS)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--resummarize", type=Path, metavar="JSON",
                        help="recompute a saved run's metrics from its rows")  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    tasks = argparse.ArgumentParser(add_help=False)
    tasks.add_argument("--tasks", choices=("lines", "blocks"), default="lines")
    which, rest = tasks.parse_known_args(argv)
    if which.tasks == "blocks":
        from bench.replay_blocks import main as blocks_main

        return blocks_main(rest)
    args = line_parser().parse_args(argv)
    if args.resummarize:
        resummarize(args.resummarize)
        return 0
    return replay(args, LINES)


if __name__ == "__main__":
    sys.exit(main())
