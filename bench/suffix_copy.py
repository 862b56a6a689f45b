"""What mapping a big suffix base from a private copy costs (issue 51, item 10).

A base bigger than COPY_BYTES was mapped in place (np.memmap of ``<store>-suffix``) until
issue 51; a truncation of that file by another process during a lookup killed the process
with SIGBUS. Now its arrays are copied, as the checksum reads them, into a file no other
process can name, and the copy is mapped (ngram_db/suffix_store.py). This script builds one
base from a corpus (default: the transformers package's Python files, as bench/results/
big_store.md did), then times, interleaved on the same machine:

- opening it: in place (the 9e635f3 way: the checksum read, then np.memmap of the file), as a
  private copy (open_base now), and read into memory (what a base up to COPY_BYTES gets);
- the memory's lookup (SuffixIndex.match) on each, over contexts cut from the indexed files,
  their last tokens changed for some (partial matches).

    python -m bench.suffix_copy [--corpus DIR] [--max-mb 14.5] [--lookups 3000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import statistics
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.measure import RESULTS, Stamp, write_json
from ngram_db import suffix_store
from ngram_db.cli import load_tokenizer
from ngram_db.records import FileTokens
from ngram_db.suffix import SuffixArrays, SuffixIndex
from ngram_db.suffix_store import MappedBase, base_path, open_base, write_base
from ngram_db.tokenizer import as_tokenizer
from superposed.embedded import DEFAULT_MODEL


class Corpus:
    """What write_base reads of a store: the corpus's files, tokenized."""

    def __init__(self, path: Path, tokenizer: Any, files: list[FileTokens]) -> None:
        self.path: Path | None = path
        self.tokenizer, self._files = tokenizer, files

    def file_records(self, paths: Any = None) -> list[FileTokens]:
        return self._files

    def file_table(self) -> dict[str, tuple[str, int]]:
        return {f.path: (f.sha256, len(f.ids)) for f in self._files}


def corpus_files(root: Path, max_bytes: int, tokenizer: Any) -> list[FileTokens]:
    texts: list[tuple[str, str]] = []
    size = 0
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if size + len(text) > max_bytes:
            break
        texts.append((str(path), text))
        size += len(text)
    ids = tokenizer.encode_batch([t for _, t in texts])
    return [
        FileTokens(p, hashlib.sha256(t.encode()).hexdigest(), i)
        for (p, t), i in zip(texts, ids, strict=True)
    ]


def open_in_place(store: Path) -> SuffixIndex:
    """The base mapped as 9e635f3 mapped it: its checksum read, then the file itself mapped."""
    path = base_path(store)
    with path.open("rb") as handle:
        header, start = suffix_store._read_header(handle, path)
        n, sa_type = int(header["tokens"]), np.dtype(header["sa"])
        handle.seek(start)
        value, max_token, left = 0, -1, n * 4
        while chunk := handle.read(1 << 22):
            value = zlib.crc32(chunk, value)
            if left > 0:
                tokens = chunk[:left]
                max_token = max(max_token, int(np.frombuffer(tokens, dtype="<i4").max()))
                left -= len(tokens)
        assert value == header["crc32"]
        raw = np.asarray(np.memmap(handle, dtype=np.uint8, mode="r", offset=start))
        backing = MappedBase(handle.fileno(), path, path.stat(), max_token)
    lengths = np.array([length for _, _, length in header["files"]], dtype=np.int64)
    ends = np.cumsum(lengths + 1) - 1
    arrays = SuffixArrays(raw[: n * 4].view("<i4"), raw[n * 4 :].view(sa_type), ends)
    return SuffixIndex(arrays, backing=backing)


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    began = time.perf_counter()
    result = call()
    return (time.perf_counter() - began) * 1e3, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=None, help="default: transformers")
    parser.add_argument("--max-mb", type=float, default=14.5)
    parser.add_argument("--lookups", type=int, default=3000)
    parser.add_argument("--opens", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS / "suffix_copy")
    args = parser.parse_args()
    started = time.perf_counter()
    stamp = Stamp(model=DEFAULT_MODEL)
    if args.corpus is None:
        import transformers

        args.corpus = Path(transformers.__file__).parent
    tokenizer = as_tokenizer(load_tokenizer(DEFAULT_MODEL))
    files = corpus_files(args.corpus, int(args.max_mb * 1e6), tokenizer)
    folder = Path(tempfile.mkdtemp(prefix="suffix-copy-"))
    store = folder / "store.sqlite"
    write_base(Corpus(store, tokenizer, files))
    fingerprint = tokenizer.fingerprint

    def opened(copy_bytes: int) -> SuffixIndex:
        suffix_store.COPY_BYTES = copy_bytes  # 0: the big base's path, whatever its size
        segment = open_base(store, fingerprint)
        assert segment is not None
        return segment.index

    modes: dict[str, Callable[[], SuffixIndex]] = {
        "in place (9e635f3)": lambda: open_in_place(store),
        "private copy (now)": lambda: opened(0),
        "in memory": lambda: opened(1 << 62),
    }
    opens: dict[str, list[float]] = {m: [] for m in modes}
    segments: dict[str, SuffixIndex] = {}
    for _ in range(args.opens):
        for mode, call in modes.items():
            ms, segments[mode] = timed(call)
            opens[mode].append(ms)
    rng = random.Random(0)
    tokens = np.concatenate([f.ids for f in files])
    contexts = []
    for i in range(args.lookups):
        at = rng.randrange(256, len(tokens))
        context = tokens[at - 256 : at].tolist()
        if i % 2:  # its last token changed: a shorter match
            context[-1] = rng.randrange(int(tokens.max()) + 1)
        contexts.append(context)
    lookups: dict[str, list[float]] = {m: [] for m in modes}
    for context in contexts:
        for mode, index in segments.items():
            began = time.perf_counter()
            index.match(context)
            lookups[mode].append((time.perf_counter() - began) * 1e6)
    results = {
        mode: {
            "open_ms": round(statistics.median(opens[mode]), 1),
            "lookup_us_median": round(statistics.median(lookups[mode]), 1),
            "lookup_us_mean": round(statistics.fmean(lookups[mode]), 1),
            "lookup_us_p90": round(statistics.quantiles(lookups[mode], n=10)[-1], 1),
        }
        for mode in modes
    }
    data = {
        "stamp": stamp.finish(started),
        "tokens": int(len(tokens)),
        "files": len(files),
        "base_bytes": base_path(store).stat().st_size,
        "results": results,
    }
    segments.clear()
    shutil.rmtree(folder)
    write_json(args.out.with_suffix(".json"), data)
    args.out.with_suffix(".md").write_text(report(data))
    print(json.dumps(data["results"], indent=1))


def report(data: dict[str, Any]) -> str:
    stamp = data["stamp"]
    lines = [
        "# A big suffix base: mapped in place, from a private copy, in memory (issue 51)",
        "",
        f"Base: {data['tokens']:,} tokens of {data['files']} files, {data['base_bytes']:,} "
        f"bytes. `{stamp['command']}` at {stamp['commit']}, {stamp['machine']}, load "
        f"{stamp['load_start']} -> {stamp['load_end']}. Page cache warm (the base just "
        "written); opens and lookups interleaved across the modes.",
        "",
        "| mode | open ms (median) | lookup us median | mean | p90 |",
        "|---|---:|---:|---:|---:|",
    ]
    for mode, r in data["results"].items():
        lines.append(
            f"| {mode} | {r['open_ms']:,} | {r['lookup_us_median']:,} | "
            f"{r['lookup_us_mean']:,} | {r['lookup_us_p90']:,} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
