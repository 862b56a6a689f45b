"""Issue 27 item 4: does an organisation's shared index lift the drafts? Its corpus, and one
shared lookup's cost (the runs' section of docs/benchmarks.md: bench/report_shared.py).

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

``sharedWeight`` was tuned on the validation split (bench/report_shared.py's rule):
``--split validation --limit 50 --configs auto,shared,shared50,shared25``, the last two
defined as ``shared`` plus ``"sharedWeight": 0.5`` / ``0.25`` (the exact command is in the
results' stamp).

``build`` writes bench/results/replay_shared_corpus.json (packages, versions, tokens);
``lookups`` bench/results/replay_shared_lookups.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.measure import percentile
from bench.report_shared import CORPUS, LOOKUPS

# Other projects than the replay's (rich, flask, black), installed here.
PACKAGES = (
    "matplotlib", "pip", "mypy", "pygments", "huggingface_hub", "setuptools", "pydantic",
    "_pytest", "fsspec", "lsprotocol", "packaging", "jinja2", "click", "urllib3", "pygls",
    "cattrs", "requests", "yaml", "attr", "tokenizers", "safetensors",
)  # fmt: skip
REPLAYED = ("rich", "flask", "black", "blib2to3")  # never in the corpus, vendored or not


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
