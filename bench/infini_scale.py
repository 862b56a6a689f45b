"""The memory's two engines side by side as the corpus grows (issue 27, item 3).

In-process suffix arrays (ngram_db/suffix.py: libdivsufsort in the building process, the
store's base file of int32 tokens + int32 suffix array, memory-mapped by the server) against
infini-gram 2.6.0 (ngram_db/infini.py: its Rust indexer in a child process; its C++ engine
memory-maps u16 tokens + a suffix array of ceil(log2(bytes)/8)-byte pointers).

Corpus: the Python sources of packages installed in this venv (licences: BSD-3 for torch and
numpy, Apache-2.0 for transformers, BSD for sympy, PSF-based for matplotlib; versions
recorded), files in a fixed order, tokenized once with the default model's tokenizer; each
size is a prefix of that file list. Every 25th file is held out: lookup contexts are drawn
from them (the code a developer writes next, not text in the index).

Each size, each engine, in fresh processes: build time (the building process and its
children; ``nice -n 10``), peak RSS while building, bytes on disk, RSS of a process that
opened the index (private and mapped-file pages, from /proc) before and after the lookups,
and lookup p50/p95 (``match(context, follow=32)``: what the memory asks per step), on the same
contexts. The match lengths must agree between the engines (they answer the same question).

    python -m bench.infini_scale --sizes 1e6,1e7 --work /tmp/infini_scale
    python -m bench.infini_scale --report      # rewrites the markdown from the JSON

Results: bench/results/infini_scale.json and .md. Latency is comparable inside one run only.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from bench.measure import RESULTS, ROOT, write_json
from bench.tables import table

PACKAGES = ("torch", "transformers", "numpy", "sympy", "matplotlib")
HOLD_OUT = 25  # every this-th file is held out: queries come from those
QUERIES = 400
CONTEXT = 128  # tokens of context a lookup gets (the memory gives up to 256)


def _site_packages() -> Path:
    import numpy as np_module

    return Path(np_module.__file__).resolve().parents[1]


def _rss(pid: str = "self") -> dict[str, float]:
    """A process's resident set now, MiB: all, private (anon) and mapped files."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0]) / 1024
    return out


def _footprint(source: Any) -> dict[str, float]:
    """This process's resident set plus, for infini-gram, its engine's worker process's
    (ngram_db/infini_worker.py: the maps are there, and its interpreter counts too)."""
    own = _rss()
    worker = getattr(source, "_worker", None)
    if worker is not None:
        theirs = _rss(str(worker.process.pid))
        own = {key: value + theirs.get(key, 0.0) for key, value in own.items()}
    return own


def _corpus(work: Path, largest: int) -> dict[str, Any]:
    """Tokenize the packages' .py files (cached in ``work``): ids.npy, lengths, held out."""
    meta_path = work / "corpus.json"
    if meta_path.exists():
        meta: dict[str, Any] = json.loads(meta_path.read_text())
        if meta["tokens"] >= largest:
            return meta
    from ngram_db.tokenizer import as_tokenizer
    from superposed.tokenizer import load_tokenizer

    tok = as_tokenizer(load_tokenizer(""))
    site = _site_packages()
    files = [p for pkg in PACKAGES for p in sorted((site / pkg).rglob("*.py"))]
    chunks: list[np.ndarray] = []
    lengths: list[int] = []
    held: list[np.ndarray] = []
    total = 0
    for start in range(0, len(files), 200):
        batch = files[start : start + 200]
        texts = [p.read_text(encoding="utf-8", errors="replace") for p in batch]
        for i, ids in enumerate(tok.encode_batch(texts)):
            if (start + i) % HOLD_OUT == 0:
                held.append(ids.astype(np.uint16))
            elif len(ids):
                chunks.append(ids.astype(np.uint16))
                lengths.append(len(ids))
                total += len(ids)
        if total >= largest and len(held) >= 40:
            break
    work.mkdir(parents=True, exist_ok=True)
    np.save(work / "ids.npy", np.concatenate(chunks))
    np.save(work / "lengths.npy", np.array(lengths, dtype=np.int64))
    rng = random.Random(0)
    queries = []
    for _ in range(QUERIES):
        doc = held[rng.randrange(len(held))]
        while len(doc) <= CONTEXT:
            doc = held[rng.randrange(len(held))]
        end = rng.randrange(CONTEXT, len(doc))
        queries.append(doc[end - CONTEXT : end].tolist())
    (work / "queries.json").write_text(json.dumps(queries))
    meta = {
        "tokens": total,
        "files": len(lengths),
        "held_out_files": len(held),
        "tokenizer": tok.fingerprint,
        "packages": {p: version(p) for p in PACKAGES},
    }
    meta_path.write_text(json.dumps(meta))
    return meta


def _streams(work: Path, size: int) -> list[np.ndarray]:
    """The files whose tokens make the first ``size`` of the corpus (whole files)."""
    ids = np.load(work / "ids.npy", mmap_mode="r")
    lengths = np.load(work / "lengths.npy")
    ends = np.cumsum(lengths)
    n = int(np.searchsorted(ends, size)) + 1
    starts = ends - lengths
    return [np.asarray(ids[starts[i] : ends[i]]) for i in range(min(n, len(lengths)))]


def _build(engine: str, work: Path, size: int, out: Path) -> dict[str, Any]:
    """In this process (a child of the main one): build one index; time and peak RSS."""
    streams = _streams(work, size)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    import ngram_db.infini  # noqa: F401 - both engines' code loaded before the baseline
    import ngram_db.suffix  # noqa: F401

    baseline = _rss()["VmRSS"]
    started = time.perf_counter()
    if engine == "suffix":
        from ngram_db.suffix import SuffixArrays

        arrays = SuffixArrays.build(streams)
        for name in ("tokens", "sa", "ends"):  # what the store's base file holds
            np.save(out / f"{name}.npy", getattr(arrays, name))
    else:
        from ngram_db import infini

        shard = out / infini.SHARDS / "corpus"  # one shard: an index-repo layout
        shard.mkdir(parents=True)
        with open(shard / "tokenized.0", "wb") as ds, open(shard / "offset.0", "wb") as od:
            offset = 0
            for ids in streams:
                doc = np.concatenate([[infini.DOC_SEPARATOR], ids]).astype(np.uint16)
                od.write(np.array([offset], dtype=np.uint64).tobytes())
                ds.write(doc.tobytes())
                offset += doc.nbytes
        threads = max(1, min(os.cpu_count() or 1, offset // 1_000_000))
        infini._suffix_array(shard, threads, 8)
        fingerprint = json.loads((work / "corpus.json").read_text())["tokenizer"]
        (out / "fingerprint").write_text(json.dumps(fingerprint))
        shards = {"corpus": {"tokens": int(sum(len(s) for s in streams)), "files": len(streams)}}
        infini._write_manifest(out, {"format": infini.FORMAT, "tokenizer": fingerprint,
                                     "shards": shards})  # fmt: skip
    seconds = time.perf_counter() - started
    # VmHWM, not ru_maxrss: a process's ru_maxrss keeps its parent's RSS from before exec
    own = _rss()["VmHWM"]
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {
        "tokens": int(sum(len(s) for s in streams)),
        "files": len(streams),
        "build_s": seconds,
        # over the process's RSS before building (its own peak) or the indexer child's
        "build_peak_mib": max(own - baseline, children),
        "disk_mb": sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 1e6,
    }


def _query(engine: str, out: Path, queries_path: Path) -> dict[str, Any]:
    """In a fresh process: open the index, run the lookups; RSS and latency."""
    queries = json.loads(queries_path.read_text())
    import infini_gram.engine  # noqa: F401 - both engines' code loaded before the baseline

    import ngram_db.infini_source  # noqa: F401
    import ngram_db.suffix  # noqa: F401

    before = _rss()
    if engine == "suffix":
        from ngram_db.suffix import SuffixArrays, SuffixIndex

        arrays = SuffixArrays(
            *(np.load(out / f"{n}.npy", mmap_mode="r") for n in ("tokens", "sa", "ends"))
        )
        source: Any = SuffixIndex(arrays)
    else:
        from ngram_db.infini_source import InfiniSource

        source = InfiniSource([out], json.loads((out / "fingerprint").read_text()))
    opened = _footprint(source)
    source.match(queries[0], 32)  # first touch
    times, lengths = [], []
    for context in queries:
        t0 = time.perf_counter()
        found = source.match(context, 32)
        times.append((time.perf_counter() - t0) * 1000)
        lengths.append(found.length if found is not None else 0)
    after = _footprint(source)
    return {
        "p50_ms": float(np.percentile(times, 50)),
        "p95_ms": float(np.percentile(times, 95)),
        "rss_open_mib": opened["VmRSS"] - before["VmRSS"],
        "rss_after_mib": after["VmRSS"] - before["VmRSS"],
        "private_after_mib": after["RssAnon"] - before["RssAnon"],
        "file_after_mib": after["RssFile"] - before["RssFile"],
        "mean_match": float(np.mean(lengths)),
        "lengths": lengths,
    }


def _child(*args: str, nice: int = 0) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.infini_scale", *args]
    if nice:
        command = ["nice", "-n", str(nice), *command]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def run(sizes: list[int], work: Path) -> dict[str, Any]:
    started = time.time()
    load = os.getloadavg()[0]
    meta = _corpus(work, max(sizes))
    rows = []
    for size in sizes:
        for engine in ("suffix", "infini-gram"):
            out = work / f"{engine}-{size}"
            built = _child("_build", engine, str(work), str(size), str(out), nice=10)
            queried = _child("_query", engine, str(out), str(work / "queries.json"))
            rows.append({"size": size, "engine": engine, **built, **queried})
            print(f"{size:>12,} {engine:<12} build {built['build_s']:.1f} s, "
                  f"p50 {queried['p50_ms']:.2f} ms", flush=True)  # fmt: skip
            shutil.rmtree(out, ignore_errors=True)  # mind the disk
    for size in sizes:
        a, b = (r for r in rows if r["size"] == size)
        same = np.array(a.pop("lengths")) == np.array(b.pop("lengths"))
        agree = np.mean(same)
        a["differing_queries"] = np.flatnonzero(~same).tolist()[:20]
        a["lengths_agree"] = b["lengths_agree"] = float(agree)
    return {
        "corpus": meta,
        "queries": QUERIES,
        "context_tokens": CONTEXT,
        "engines": {"infini-gram": version("infini-gram"), "pydivsufsort": version("pydivsufsort")},
        "machine": f"{os.cpu_count()} cores, load {load:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after",
        "seconds": time.time() - started,
        "rows": rows,
    }


def report(data: dict[str, Any]) -> str:
    rows = []
    for r in data["rows"]:
        rows.append([
            f"{r['tokens'] / 1e6:.1f}M", r["engine"], f"{r['build_s']:.1f}",
            f"{r['build_peak_mib']:.0f}",
            f"{r['disk_mb']:.1f}", f"{r['disk_mb'] * 1e6 / r['tokens']:.1f}",
            f"{r['rss_open_mib']:.1f}", f"{r['rss_after_mib']:.1f}",
            f"{r['private_after_mib']:.1f} / {r['file_after_mib']:.1f}",
            f"{r['p50_ms']:.2f}", f"{r['p95_ms']:.2f}", f"{r['mean_match']:.1f}",
            f"{r['lengths_agree'] * 100:.0f}%",
        ])  # fmt: skip
    header = ["tokens", "engine", "build s", "build peak MiB", "disk MB", "bytes/token",
              "RSS open MiB", "RSS after MiB", "private / file MiB", "p50 ms", "p95 ms",
              "mean match", "same length"]  # fmt: skip
    c = data["corpus"]
    packages = ", ".join(f"{p} {v}" for p, v in c["packages"].items())
    return "\n".join(
        [
            "# The memory's engines side by side: in-process suffix arrays vs infini-gram",
            "",
            f"Generated by `python -m bench.infini_scale` (issue 27, item 3). Corpus: the Python "
            f"files of {packages} (installed here), tokenized with the default model's tokenizer; "
            f"each size a prefix of one file list. {data['queries']} lookups of "
            f"{data['context_tokens']} tokens of context, from {c['held_out_files']} held-out "
            "files, "
            f"the same for both engines. Machine: {data['machine']}; builds under `nice -n 10`. "
            f"Engines: infini-gram {data['engines']['infini-gram']}, pydivsufsort "
            f"{data['engines']['pydivsufsort']}.",
            "",
            "Build peak: the building process's peak RSS (VmHWM) over its RSS before building "
            "(its corpus loaded), or the indexer's child processes' peak (ru_maxrss, which also "
            "counts the building process's RSS when it started them: an upper bound), whichever "
            "is larger. "
            "RSS: of a fresh process that opened the index, over what it held before: right after "
            "opening, and after the lookups (private heap / mapped-file pages, which the kernel "
            "shares between processes and can reclaim). Same length: lookups whose longest match "
            "has the "
            "same length under both engines.",
            "",
            table(header, rows, "llrrrrrrrrrrr"),
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_build":
        print(json.dumps(_build(argv[1], Path(argv[2]), int(argv[3]), Path(argv[4]))))
        return 0
    if argv and argv[0] == "_query":
        print(json.dumps(_query(argv[1], Path(argv[2]), Path(argv[3]))))
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1e6,1e7", help="corpus sizes in tokens, comma-separated")
    p.add_argument("--work", type=Path, default=Path("/tmp/infini_scale"))
    p.add_argument("--report", action="store_true", help="rewrite the markdown from the JSON")
    p.add_argument("--out", type=Path, default=RESULTS / "infini_scale.json", help="the JSON")
    args = p.parse_args(argv)
    if args.report:
        data = json.loads(args.out.read_text())
    else:
        data = run([int(float(s)) for s in args.sizes.split(",")], args.work)
        write_json(args.out, data)
    args.out.with_suffix(".md").write_text(report(data))
    print(report(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
