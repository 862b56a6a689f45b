"""Issue 27 item 4: does an organisation's shared index lift the drafts? Its corpus, its
section of docs/benchmarks.md, and the infini-gram scale table beside it.

The cross-repository question: the codebase store as today, plus a shared infini-gram index
(``sharedIndexes``) of *other* Python projects, against the store alone, on the replay's test
split, the same positions in one run. The replay's repositories (bench/replay_build.py:
rich, flask, black) and any copy of them (pip vendors rich) are kept out of the corpus.
Without network, the corpus is the Python sources installed in this venv:

    python -m bench.replay_shared build --out /tmp/orgidx     # the index + its corpus record
    python -m bench.replay --split test --cursor line-start --configs auto,shared \\
        --define 'shared={"memory": true, "mix": "interpolate", "lineMode": "auto", \\
                          "sharedIndexes": ["/tmp/orgidx"]}' \\
        --out bench/results/replay_shared.json

``sharedWeight`` was tuned on the validation split (``weight_part``): ``--split validation
--limit 50 --configs auto,shared,shared50,shared25``, the last two defined as ``shared`` plus
``"sharedWeight": 0.5`` / ``0.25`` (the exact command is in the results' stamp).

``build`` writes bench/results/replay_shared_corpus.json (packages, versions, tokens).
``shared_section()`` is bench/report.py's hook: the scale table (bench/infini_scale.py's
results) and the replay's answer, with the verdict worked out by ``verdict()`` below.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.measure import RESULTS, percentile
from bench.metrics import paired_diff_ci
from bench.replay import SUBSETS
from bench.tables import points, table

# Other projects than the replay's (rich, flask, black), installed here.
PACKAGES = (
    "matplotlib", "pip", "mypy", "pygments", "huggingface_hub", "setuptools", "pydantic",
    "_pytest", "fsspec", "lsprotocol", "packaging", "jinja2", "click", "urllib3", "pygls",
    "cattrs", "requests", "yaml", "attr", "tokenizers", "safetensors",
)  # fmt: skip
REPLAYED = ("rich", "flask", "black", "blib2to3")  # never in the corpus, vendored or not
RUN = RESULTS / "replay_shared.json"
CORPUS = RESULTS / "replay_shared_corpus.json"
SCALE = RESULTS / "infini_scale.json"
SNAPSHOTS = RESULTS / "replay_shared_snapshots.json"  # the first question, "snapshots" only
BUDGET = RESULTS / "replay_shared_budget.json"  # sharedBudgetMs: auto, shared, budget
LOOKUPS = RESULTS / "replay_shared_lookups.json"  # one lookup's cost, as a request asks it
WEIGHT = RESULTS / "replay_shared_weight.json"  # sharedWeight, on the validation split
BASELINE, SHARED, SNAPSHOTS_CONFIG, BUDGETED = "auto", "shared", "snapshots", "budget"
CURSOR = "line-start"


# ----- the corpus ------------------------------------------------------------------------------


def copy_without_replayed(src: Path, dst: Path) -> list[str]:
    """Copy a package's tree, leaving out any folder named like a replayed repository (pip's
    ``_vendor/rich``) and caches; the paths left out, relative to ``src``."""
    dropped: list[str] = []

    def ignore(folder: str, names: list[str]) -> list[str]:
        out = [n for n in names if n == "__pycache__"]
        for n in names:
            if n in REPLAYED and (Path(folder) / n).is_dir():
                dropped.append(str((Path(folder) / n).relative_to(src)))
                out.append(n)
        return out

    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=ignore)
    return dropped


def versions() -> dict[str, str]:
    """Each package's distribution and version (``_pytest`` is pytest's, ``yaml`` PyYAML's)."""
    dists = metadata.packages_distributions()
    out = {}
    for name in PACKAGES:
        dist = (dists.get(name) or [name])[0]
        out[name] = f"{dist} {metadata.version(dist)}"
    return out


def build(out: Path, work: Path) -> dict[str, Any]:
    """Copy the packages to ``work`` (without replayed code) and index them into ``out``."""
    from ngram_db.cli import load_tokenizer
    from ngram_db.infini import build_index
    from superposed.embedded import DEFAULT_MODEL

    site = Path(str(metadata.distribution("pip").locate_file("")))
    roots, dropped = [], {}
    for name in PACKAGES:
        if name in REPLAYED:
            raise SystemExit(f"{name} is a replayed repository")
        dropped[name] = copy_without_replayed(site / name, work / name)
        roots.append(work / name)
    tokenizer = load_tokenizer(DEFAULT_MODEL)
    summary = build_index(out, roots, tokenizer, DEFAULT_MODEL, progress=print).as_dict()
    record = {
        "index": str(out),
        "packages": versions(),
        "left_out": {k: v for k, v in dropped.items() if v},
        "tokens": sum(s["tokens"] for s in summary["shards"]),
        "files": sum(s["files"] for s in summary["shards"]),
        "shards": {
            s["name"]: {"files": s["files"], "tokens": s["tokens"]} for s in summary["shards"]
        },
        "seconds": summary["seconds"],
    }
    CORPUS.write_text(json.dumps(record, indent=1) + "\n")
    return record


def lookups(index: Path, roots: list[Path], count: int = 120) -> dict[str, Any]:
    """The cost of one shared lookup as a request asks it: 256 tokens of context from the
    replayed repositories' files (seeded positions), a 32-token continuation, without
    (a draft's step) and with 8 other continuations (the prompt's match, seeds on)."""
    import os
    import random
    import time

    from ngram_db.cli import load_tokenizer
    from ngram_db.infini import read_manifest
    from ngram_db.infini_source import MAX_CONTEXT, InfiniSource
    from ngram_db.tokenizer import as_tokenizer
    from superposed.embedded import DEFAULT_MODEL

    tokenizer = as_tokenizer(load_tokenizer(DEFAULT_MODEL))
    source = InfiniSource([index], str(tokenizer.fingerprint))
    rng = random.Random(0)
    contexts: list[list[int]] = []
    for path in sorted(p for root in roots for p in root.rglob("*.py")):
        ids = tokenizer.encode_batch([path.read_text(errors="replace")])[0].tolist()
        if len(ids) > MAX_CONTEXT:
            for _ in range(4):
                at = rng.randrange(MAX_CONTEXT, len(ids))
                contexts.append(ids[at - MAX_CONTEXT : at])
    contexts = rng.sample(contexts, min(count, len(contexts)))
    load_start = os.getloadavg()[0]
    shapes: dict[str, Any] = {}
    for name, others in (("step", 0), ("prompt", 8)):
        times, lengths = [], []
        for context in contexts:
            start = time.perf_counter()
            found = source.match(context, 32, others)
            times.append((time.perf_counter() - start) * 1e3)
            lengths.append(found.length if found else 0)
        shapes[name] = {"others": others, "p50_ms": percentile(times, 50),
                        "p95_ms": percentile(times, 95),
                        "mean_length": sum(lengths) / len(lengths)}  # fmt: skip
    manifest = read_manifest(index) or {}  # InfiniSource opened it: it has one
    record = {"index": str(index), "shards": len(manifest.get("shards", {})),
              "tokens": len(source), "lookups": len(contexts), "follow": 32,
              "load": [load_start, os.getloadavg()[0]], **shapes}  # fmt: skip
    LOOKUPS.write_text(json.dumps(record, indent=1) + "\n")
    return record


# ----- the answer --------------------------------------------------------------------------------


def compare(
    result: Mapping[str, Any], subset: str, config: str = SHARED, against: str = BASELINE
) -> dict[str, Any]:
    """``config`` against ``against`` on one subset of the line-start positions: EM@3 and
    ES@3 (means and paired differences) and the p50 of each, over the same positions."""
    keep = SUBSETS[subset]
    rows = [r for r in result["rows"] if r["cursor"] == CURSOR and keep(r)]
    base = {r["task"]: r for r in rows if r["config"] == against}
    shared = {r["task"]: r for r in rows if r["config"] == config}
    tasks = [t for t in base if t in shared]
    n = max(1, len(tasks))

    def mean(side: Mapping[str, Mapping[str, Any]], m: str) -> float:
        return sum(side[t][m] for t in tasks) / n

    p50_base = percentile([base[t]["ms"] for t in tasks], 50)
    p50_shared = percentile([shared[t]["ms"] for t in tasks], 50)
    return {
        "n": len(tasks),
        **{f"{m}_{s}": mean(side, m) for m in ("emk", "esk") for s, side in
           (("base", base), ("shared", shared))},
        "emk": paired_diff_ci([shared[t]["emk"] for t in tasks], [base[t]["emk"] for t in tasks]),
        "esk": paired_diff_ci([shared[t]["esk"] for t in tasks], [base[t]["esk"] for t in tasks]),
        "p50_base": p50_base,
        "p50_shared": p50_shared,
        "p95_base": percentile([base[t]["ms"] for t in tasks], 95),
        "p95_shared": percentile([shared[t]["ms"] for t in tasks], 95),
        "ratio": p50_shared / p50_base if p50_base else float("nan"),
        "differ": sum(shared[t]["drafts"] != base[t]["drafts"] for t in tasks),
    }  # fmt: skip


def verdict(c: Mapping[str, Any]) -> str:
    """The answer on the new lines: a lift or a loss only where ES@3's interval excludes 0."""
    d = c["esk"]
    if d["lo"] > 0:
        return f"lifts edit similarity@3 on new lines by {100 * d['mean']:.1f} points"
    if d["hi"] < 0:
        return f"lowers edit similarity@3 on new lines by {-100 * d['mean']:.1f} points"
    return "does not measurably lift the drafts on new lines: the interval includes 0"


def scale_table(data: Mapping[str, Any]) -> str:
    from bench.infini_scale import report

    body = report(dict(data)).split("\n", 2)[2]  # without its own title
    return body.rstrip("\n")


def load(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return None if data.get("partial") else data


def replay_part(result: Mapping[str, Any], corpus: Mapping[str, Any] | None) -> list[str]:
    cells = {s: compare(result, s) for s in ("all", "new")}
    rows = [
        [s, c["n"], f"{100 * c['emk_base']:.1f} → {100 * c['emk_shared']:.1f}", points(c["emk"]),
         f"{100 * c['esk_base']:.1f} → {100 * c['esk_shared']:.1f}", points(c["esk"]),
         f"{c['p50_base']:.0f} / {c['p50_shared']:.0f} ms = {c['ratio']:.2f}x", c["differ"]]
        for s, c in cells.items()
    ]  # fmt: skip
    header = ["lines", "n", "EM@3 store → +shared", "EM@3 difference", "ES@3 store → +shared",
              "ES@3 difference", "p50 store / +shared", "drafts differ"]  # fmt: skip
    what = (
        f"{corpus['tokens'] / 1e6:.1f}M tokens, {corpus['files']} files of "
        f"{len(corpus['packages'])} installed projects ({', '.join(corpus['packages'].values())}"
        f"; left out as copies of replayed code: "
        f"{', '.join(f'{k}/{p}' for k, v in corpus['left_out'].items() for p in v) or 'none'}; "
        f"`{CORPUS.name}`)"
        if corpus is not None
        else "other projects' sources"
    )
    stamp = result["stamp"]
    return [
        "#### Does a shared index of other projects lift the drafts? (item 4)",
        "",
        f"The replay's test split ({', '.join(result['data']['splits']['test'])}), the line "
        f"start, through the language server (`{RUN.name}`, {stamp['model']}, commit "
        f"{stamp['commit']}): `{BASELINE}` (the codebase store as today) against `{SHARED}` "
        f"(the same plus `sharedIndexes`: an infini-gram index of {what}), the same positions "
        "in one run. Paired bootstrap intervals (2,000 resamples), in points. New lines: not "
        "verbatim in the snapshot, not elsewhere in the file. Latency: the configurations run "
        "one after the other in one server on a shared CPU (load "
        f"{stamp['load_start'][0]} → {stamp['load_end'][0]}).",
        "",
        table(header, rows, "lrllllll"),
        "",
        f"**Answer:** the organisation's index {verdict(cells['new'])} "
        f"(EM@3 {points(cells['new']['emk'])}; all lines ES@3 {points(cells['all']['esk'])}), "
        f"at {cells['all']['ratio']:.2f}x the p50 latency. The shared source enters the "
        "memory's mix like the stores (longest match, counts added), at `sharedWeight` 1.0 (a "
        "shared match weighs as a store match; its own weight is tuned below).",
    ]


def same_within(c: Mapping[str, Any]) -> bool:
    """The first question's rule: the same quality when both intervals include 0."""
    return all(c[m]["lo"] <= 0 <= c[m]["hi"] for m in ("emk", "esk"))


def snapshots_part(run: Mapping[str, Any], snaps: Mapping[str, Any]) -> list[str]:
    """The test snapshots served from a shared index (no codebase store) against the store:
    ``snapshots`` ran alone (its own file), paired with ``auto``'s rows of the main run; the
    quality is deterministic, so the pairs hold, but latencies of two runs do not compare."""
    merged = {"rows": [*run["rows"], *snaps["rows"]]}
    cells = {s: compare(merged, s, SNAPSHOTS_CONFIG) for s in ("all", "new")}
    rows = [
        [s, c["n"], f"{100 * c['emk_base']:.1f} → {100 * c['emk_shared']:.1f}", points(c["emk"]),
         f"{100 * c['esk_base']:.1f} → {100 * c['esk_shared']:.1f}", points(c["esk"]),
         "same within intervals" if same_within(c) else "differs"]
        for s, c in cells.items()
    ]  # fmt: skip
    header = ["lines", "n", "EM@3 store → index", "EM@3 difference", "ES@3 store → index",
              "ES@3 difference", "quality"]  # fmt: skip
    stamp = snaps["stamp"]
    return [
        "",
        "#### The test snapshots served from a shared index instead of the codebase store",
        "",
        f"`{SNAPSHOTS_CONFIG}` (`{SNAPSHOTS.name}`, commit {stamp['commit']}): no codebase "
        "store; `sharedIndexes` names one infini-gram index with a shard for each test "
        "repository's snapshot (the same files the store indexes; each request sees both "
        f"shards), against `{BASELINE}`'s rows above, the same positions.",
        "",
        table(header, rows, "lrlllll"),
    ]


QUALITY_HEADER = ["pair", "lines", "n", "EM@3", "EM@3 difference", "ES@3", "ES@3 difference",
                  "drafts differ"]  # fmt: skip


def default_budget(commit: str) -> str | None:
    """``sharedBudgetMs``'s default in lsp_server/settings.py at ``commit`` (None: unknown)."""
    import re
    import subprocess

    shown = subprocess.run(
        ["git", "show", f"{commit.split('+')[0]}:lsp_server/settings.py"],
        capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent,
    )  # fmt: skip
    found = re.search(r"shared_budget_ms: int = ([0-9_]+)", shown.stdout)
    return found.group(1) if found else None


def budget_part(run: Mapping[str, Any]) -> list[str]:
    """sharedBudgetMs: the store alone, the shared index unbudgeted, and with the default
    budget, in one run: latency side by side, quality paired."""
    options = {name: c["options"] for name, c in run["configs"].items()}
    budget = options[BUDGETED].get("sharedBudgetMs")
    if budget is None:  # the server's default at the run's commit
        default = default_budget(run.get("server_commit") or run["stamp"]["commit"])
        budget_text = f"the default, {default} ms" if default else "the default"
    else:
        budget_text = f"{budget} ms"
    cells = {
        (s, config, against): compare(run, s, config, against)
        for s in ("all", "new")
        for config, against in ((SHARED, BASELINE), (BUDGETED, BASELINE), (BUDGETED, SHARED))
    }
    latency = cells[("all", BUDGETED, BASELINE)]
    unbudgeted = cells[("all", SHARED, BASELINE)]
    speed = [
        [name, f"{p50:.0f}", f"{p95:.0f}", f"{p50 / latency['p50_base']:.2f}x"]
        for name, p50, p95 in (
            (f"`{BASELINE}` (store)", latency["p50_base"], latency["p95_base"]),
            (f"`{SHARED}` (+index, unbudgeted)", unbudgeted["p50_shared"],
             unbudgeted["p95_shared"]),
            (f"`{BUDGETED}` (+index, {budget_text})", latency["p50_shared"],
             latency["p95_shared"]),
        )
    ]  # fmt: skip
    quality = [
        [f"`{config}` vs `{against}`", s, c["n"],
         f"{100 * c['emk_base']:.1f} → {100 * c['emk_shared']:.1f}", points(c["emk"]),
         f"{100 * c['esk_base']:.1f} → {100 * c['esk_shared']:.1f}", points(c["esk"]),
         c["differ"]]
        for (s, config, against), c in cells.items()
    ]  # fmt: skip
    stamp = run["stamp"]
    commit = (run.get("server_commit") or stamp["commit"])[:7]
    cost = load(LOOKUPS)
    one = (
        f" One lookup as a request asks it (`{LOOKUPS.name}`: {cost['lookups']} contexts of the "
        f"test repositories, 256 tokens, a 32-token continuation; this index, {cost['shards']} "
        f"shards): p50 {cost['step']['p50_ms']:.0f} ms, p95 {cost['step']['p95_ms']:.0f} ms "
        f"for a draft's step, p50 {cost['prompt']['p50_ms']:.0f} ms for the prompt's match "
        f"with {cost['prompt']['others']} other continuations."
        if cost is not None
        else ""
    )
    return [
        "",
        "#### Lookups within a time budget (`sharedBudgetMs`)",
        "",
        f"`{BUDGET.name}` (server commit {commit}, {run['data']['positions']} line-start "
        f"positions: the first {run['data']['targets'] // len(run['data']['splits']['test'])} "
        "targets of each test repository): the store alone, the store plus the index above "
        f"with no effective budget (`sharedBudgetMs` {options[SHARED].get('sharedBudgetMs')}), "
        f"and with {budget_text}. One server, the configurations one after the other on a "
        f"shared CPU (load {stamp['load_start'][0]} → {stamp['load_end'][0]}): the latencies "
        "compare within this run only. Each request's shared lookups stop once they have "
        f"spent the budget (this run's server also kept a per-request cache of answers, since "
        f"removed: it answered no question twice).{one}",
        "",
        table(["configuration", "p50 ms", "p95 ms", "p50 / store"], speed, "lrrr"),
        "",
        table(QUALITY_HEADER, quality, "llrlllll"),
    ]


def weights(run: Mapping[str, Any]) -> dict[str, float]:
    """The run's configurations with a shared index, each with its ``sharedWeight``."""
    return {
        name: float(c["options"].get("sharedWeight", 1.0))
        for name, c in run["configs"].items()
        if c["options"].get("sharedIndexes")
    }


def pick_weight(run: Mapping[str, Any]) -> tuple[float, str]:
    """The rule: the weight with the best ES@3 over all line starts, if its paired ES@3
    difference against weight 1.0 excludes 0; else 1.0 (a tie keeps the default)."""
    named = weights(run)
    one = next(name for name, w in named.items() if w == 1.0)
    es = {name: compare(run, "all", name, BASELINE)["esk_shared"] for name in named}
    best = max(named, key=lambda name: (es[name], named[name] == 1.0))
    if best == one:
        return 1.0, f"weight 1.0 has the best ES@3 ({100 * es[one]:.1f})"
    d = compare(run, "all", best, one)["esk"]
    if d["lo"] > 0:
        return named[best], (
            f"weight {named[best]:g} has the best ES@3 ({100 * es[best]:.1f}), "
            f"{points(d)} against 1.0"
        )
    return 1.0, (
        f"weight {named[best]:g} has the best ES@3 ({100 * es[best]:.1f}) but within the "
        f"interval of 1.0's ({points(d)}): a tie keeps 1.0"
    )


def weight_part(run: Mapping[str, Any]) -> list[str]:
    """sharedWeight on the validation split: the store alone and the index at each weight,
    in one run; quality paired against the store and against weight 1.0."""
    named = sorted(weights(run).items(), key=lambda kv: -kv[1])
    one = next(name for name, w in named if w == 1.0)
    rows = []
    for s in ("all", "new"):
        for name, w in named:
            c = compare(run, s, name, BASELINE)
            against_one = points(compare(run, s, name, one)["esk"]) if name != one else "—"
            rows.append(
                [f"`{name}` ({w})", s, c["n"], f"{100 * c['emk_shared']:.1f}", points(c["emk"]),
                 f"{100 * c['esk_shared']:.1f}", points(c["esk"]), against_one,
                 f"{c['p50_shared']:.0f}", c["differ"]]
            )  # fmt: skip
        base = compare(run, s, one, BASELINE)
        rows.append([f"`{BASELINE}` (store only)", s, base["n"], f"{100 * base['emk_base']:.1f}",
                     "—", f"{100 * base['esk_base']:.1f}", "—", "—",
                     f"{base['p50_base']:.0f}", "—"])  # fmt: skip
    header = ["configuration (sharedWeight)", "lines", "n", "EM@3", "EM@3 vs store", "ES@3",
              "ES@3 vs store", "ES@3 vs 1.0", "p50 ms", "drafts differ from store"]  # fmt: skip
    chosen, why = pick_weight(run)
    stamp = run["stamp"]
    commit = (run.get("server_commit") or stamp["commit"])[:7]
    repos = ", ".join(run["data"]["splits"]["validation"])
    return [
        "",
        "#### The shared index's own weight (`sharedWeight`), tuned on validation",
        "",
        f"`{WEIGHT.name}` (server commit {commit}): the validation split ({repos}), "
        f"{run['data']['positions']} line-start positions (the first "
        f"{run['data']['targets'] // len(run['data']['splits']['validation'])} targets of each "
        "repository), the same index and settings as above with the "
        "default `sharedBudgetMs`; `sharedWeight` scales the memory's lambda for a shared "
        "index's match (a store or open document matching as long keeps 1.0). One server, "
        f"the configurations one after the other (load {stamp['load_start'][0]} → "
        f"{stamp['load_end'][0]}). Paired bootstrap intervals, in points.",
        "",
        table(header, rows, "llrlllllrr"),
        "",
        f"**Rule** (the best ES@3 on validation; a tie within intervals keeps 1.0): {why}. "
        f"Default: `sharedWeight` {chosen}.",
    ]


def shared_section() -> str | None:
    """The section, or None before any of its results exist."""
    scale, run = load(SCALE), load(RUN)
    if scale is None and run is None:
        return None
    parts = ["### Issue 27: shared infini-gram indexes", ""]
    if scale is not None:
        parts += [
            "#### The memory's engines side by side (item 3): in-process suffix arrays "
            "(`ngram_db/suffix.py`) vs infini-gram (`infini_scale.json`)",
            "",
            scale_table(scale),
            "",
        ]
    if run is not None:
        parts += replay_part(run, load(CORPUS))
        snaps = load(SNAPSHOTS)
        if snaps is not None:
            parts += snapshots_part(run, snaps)
    budgeted = load(BUDGET)
    if budgeted is not None:
        parts += budget_part(budgeted)
    weighted = load(WEIGHT)
    if weighted is not None:
        parts += weight_part(weighted)
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="index the other projects' sources")
    b.add_argument("--out", type=Path, required=True, help="the index folder")
    b.add_argument("--work", type=Path, default=Path("/tmp/replay_shared_src"),
                   help="where the sources are copied without replayed code")  # fmt: skip
    m = sub.add_parser("lookups", help="one shared lookup's cost, as a request asks it")
    m.add_argument("--index", type=Path, required=True)
    m.add_argument("roots", type=Path, nargs="+", help="folders whose .py files give contexts")
    args = parser.parse_args(argv)
    if args.command == "lookups":
        print(json.dumps(lookups(args.index, args.roots), indent=1))
        return 0
    record = build(args.out, args.work)
    print(f"{record['tokens']:,} tokens, {record['files']} files -> {args.out}; {CORPUS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
