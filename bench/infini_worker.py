"""What running infini-gram's engine in a worker process costs a lookup (issue 34, item 2).

ngram_db/infini_source.py sends each lookup over a pipe to a persistent worker process
(ngram_db/infini_worker.py), so that a damaged shard kills the worker, not the server. This
times the same lookups through the worker and in this process (the worker's own ``lookup``
on an engine opened here over the same files), interleaved in ABBA order so that a drift of
the machine's load falls on both, and checks that both answer the same.

Corpus: this repository's Python files, byte tokens (ByteTokenizer: no model needed), one
shard; contexts: ``CONTEXT``-byte windows ending at random places of those files, the memory's
per-step shape ``match(context, follow=32)``.

    python -m bench.infini_worker [--lookups 400] [--work /tmp/infini_worker]

Result: bench/results/infini_worker.json (medians and p95 of each side, their difference).
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.measure import RESULTS, ROOT, Stamp, percentile, write_json

CONTEXT = 128  # bytes of context a lookup gets
FOLLOW = 32
FOLDERS = ("ngram_db", "lsp_server", "superposed", "bench", "tests")


def _contexts(count: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    texts = [p.read_bytes() for f in FOLDERS for p in sorted((ROOT / f).rglob("*.py"))]
    texts = [t for t in texts if len(t) > 2 * CONTEXT]
    out = []
    for _ in range(count):
        text = rng.choice(texts)
        end = rng.randrange(CONTEXT, len(text))
        out.append(list(text[end - CONTEXT : end]))
    return out


def _time(fn: Any, context: list[int]) -> tuple[float, Any]:
    start = time.perf_counter()
    found = fn(context)
    return (time.perf_counter() - start) * 1e3, found


def run(lookups: int, work: Path) -> dict[str, Any]:
    from ngram_db.infini import END_TOKEN, build_index
    from ngram_db.infini_check import plain_path
    from ngram_db.infini_source import InfiniSource
    from ngram_db.infini_worker import lookup, open_engine
    from ngram_db.tokenizer import ByteTokenizer

    started = time.perf_counter()
    stamp = Stamp(model="bytes")
    shutil.rmtree(work, ignore_errors=True)
    repo = work / "repo"
    for folder in FOLDERS:  # the index's rules skip nothing here but what the stores skip
        shutil.copytree(ROOT / folder, repo / folder, ignore=shutil.ignore_patterns("__pycache__"))
    tokenizer = ByteTokenizer()
    summary = build_index(work / "index", [repo], tokenizer, "bytes", cpus=2, mem_gib=2)
    t0 = time.perf_counter()
    source = InfiniSource([work / "index"], tokenizer.fingerprint)
    open_ms = (time.perf_counter() - t0) * 1e3
    scratch = source._worker.scratch  # type: ignore[union-attr]
    assert plain_path(scratch), scratch  # the in-process engine reads the same links
    engine = open_engine([f"{scratch}/s0"], END_TOKEN)

    def worker(context: list[int]) -> Any:
        return source.match(context, FOLLOW)

    def in_process(context: list[int]) -> Any:
        return lookup(engine, context, FOLLOW, 0, END_TOKEN)

    contexts = _contexts(lookups)
    for context in contexts[:20]:  # warm both: the pages of the index in the page cache
        worker(context), in_process(context)
    times: dict[str, list[float]] = {"worker": [], "in_process": []}
    differ = 0
    for i, context in enumerate(contexts):
        order = [("worker", worker), ("in_process", in_process)]
        if i % 2:
            order.reverse()  # ABBA: each side goes first half the time
        answers = {}
        for name, fn in order:
            ms, answers[name] = _time(fn, context)
            times[name].append(ms)
        theirs, ours = answers["in_process"], answers["worker"]
        same = (theirs is None and ours is None) or (
            theirs is not None and ours is not None and (theirs[0], theirs[1]) == (
                ours.length, ours.next_counts)
        )  # fmt: skip
        differ += not same
    source.close()
    sides = {
        name: {"p50_ms": round(percentile(v, 50), 4), "p95_ms": round(percentile(v, 95), 4)}
        for name, v in times.items()
    }
    extra = sides["worker"]["p50_ms"] - sides["in_process"]["p50_ms"]
    return {
        "stamp": stamp.finish(started),
        "corpus": {"folders": list(FOLDERS), "tokens": summary.shards[0].tokens,
                   "files": summary.shards[0].files},  # fmt: skip
        "lookups": lookups, "context_tokens": CONTEXT, "follow": FOLLOW,
        "open_worker_ms": round(open_ms, 1),
        **sides,
        "extra_p50_ms": round(extra, 4),
        "ratio_p50": round(sides["worker"]["p50_ms"] / sides["in_process"]["p50_ms"], 3),
        "answers_that_differ": differ,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lookups", type=int, default=400)
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (a temp one)")
    parser.add_argument("--out", type=Path, default=RESULTS / "infini_worker.json")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="infini-worker-bench-"))
    try:
        record = run(args.lookups, work)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    write_json(args.out, record)
    print(
        f"p50 worker {record['worker']['p50_ms']:.3f} ms, in-process "
        f"{record['in_process']['p50_ms']:.3f} ms: +{record['extra_p50_ms']:.3f} ms "
        f"({record['ratio_p50']:.2f}x); answers that differ: {record['answers_that_differ']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
