"""Indexing a tree into a store: read and tokenize in chunks, count and write in big transactions.

Each transaction commits whole files, so a killed run leaves a consistent store; the next run
skips the files whose content hash is already stored and completes the rest. While the main
thread counts and writes, a worker thread reads and tokenizes the next chunks (the Rust
tokenizer releases the GIL and uses every core), so both cores stay busy.

At the end, the store's suffix index is written beside it (ngram_db/suffix_store.py), so that
the language server maps it instead of building it at its first request.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ngram_db.files import (
    DEFAULT_MAX_FILE_BYTES,
    Candidate,
    Skipped,
    list_candidates,
    read_text,
)
from ngram_db.store import FileTokens, NgramStore, content_hash, path_key
from ngram_db.suffix_store import write_base

log = logging.getLogger(__name__)

Progress = Callable[[int, int, str], None]  # (files done, files total, message)
CHUNK_BYTES = 1_000_000  # text read and tokenized at a time: ~250k tokens
WRITE_TOKENS = 2_000_000  # tokens per transaction: a killed run loses at most this much work
LOOKAHEAD = 8  # chunks the tokenizer may run ahead of the writer


@dataclass
class IndexSummary:
    """What one index_repo run did."""

    root: str
    files_seen: int = 0
    indexed: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    tokens: int = 0  # tokens of the files (re)indexed in this run
    seconds: float = 0.0
    suffix_seconds: float = 0.0  # of which writing the suffix index
    tokenizer_seconds: float = 0.0  # loading the model's tokenizer before (index-repo's)
    suffix_error: str | None = None  # why it could not be written (the server builds it)
    stats: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The summary as plain JSON-able data."""
        return dict(self.__dict__)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def format(self) -> str:
        """A few lines for a terminal."""
        s = self.stats
        rate = self.tokens / self.seconds if self.seconds else 0.0
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items())) or "none"
        per_token = f"{s['bytes_per_token']:.1f}" if s.get("bytes_per_token") else "-"
        grams = ", ".join(f"{n}: {c:,}" for n, c in s.get("ngrams", {}).items())
        return "\n".join(
            [
                f"indexed {self.root} into {s.get('path') or ':memory:'}",
                f"  files: {self.indexed} indexed, {self.unchanged} unchanged, "
                f"{self.removed} removed; skipped: {skipped}",
                f"  tokens: {self.tokens:,} indexed now ({rate:,.0f}/s), "
                f"{s.get('tokens', 0):,} in the store ({s.get('files', 0)} files)",
                f"  distinct n-grams per order: {grams}",
                f"  size on disk: {s.get('bytes', 0) / 1e6:.1f} MB ({per_token} bytes/token)",
                f"  time: {self.seconds:.1f} s ({self.suffix_seconds:.1f} s of it: the suffix "
                f"index{', not written: ' + self.suffix_error if self.suffix_error else ''})"
                + (
                    f", after {self.tokenizer_seconds:.1f} s loading the model's tokenizer"
                    if self.tokenizer_seconds >= 0.1
                    else ""
                ),
            ]
        )


@dataclass
class _Chunk:
    """One chunk after reading and tokenizing."""

    files: list[FileTokens]
    present: list[str]  # paths read as text (indexed now or unchanged)
    unchanged: int
    skipped: list[str]  # reasons


def _chunks(candidates: Sequence[Candidate], chunk_bytes: int) -> Iterator[list[Candidate]]:
    """Split candidates into chunks of about chunk_bytes of file size."""
    chunk: list[Candidate] = []
    size = 0
    for cand in candidates:
        with contextlib.suppress(OSError):  # read_text reports it
            size += os.lstat(cand.path).st_size
        chunk.append(cand)
        if size >= chunk_bytes:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _prepare(
    store: NgramStore,
    chunk: list[Candidate],
    root: Path,
    known: dict[str, str],
    max_bytes: int,
    skip_secrets: bool = True,
) -> _Chunk:
    """Read a chunk's files, keep the changed ones and tokenize them (runs in the worker)."""
    todo: list[tuple[str, str, str]] = []
    present: list[str] = []
    skipped: list[str] = []
    unchanged = 0
    for cand in chunk:
        try:
            text = read_text(cand, root, max_bytes, skip_secrets)
        except Skipped as why:
            skipped.append(str(why))
            continue
        key = path_key(cand.path)
        present.append(key)
        sha = content_hash(text)
        if known.get(key) == sha:
            unchanged += 1
        else:
            todo.append((key, text, sha))
    ids = store.tokenizer.encode_batch([text for _, text, _ in todo]) if todo else []
    files = [FileTokens(p, sha, i) for (p, _, sha), i in zip(todo, ids, strict=True)]
    return _Chunk(files, present, unchanged, skipped)


def index_repo(
    root: str | os.PathLike[str],
    store: NgramStore,
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    skip_secrets: bool = True,
    progress: bool | Progress | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    write_tokens: int = WRITE_TOKENS,
) -> IndexSummary:
    """Bring the store up to date with the files under root; returns what was done.

    progress: None shows a bar only when stderr is a terminal; True/False force it on/off;
    a callable is called as progress(files done, files total, message) after each chunk.
    Files are read and tokenized in chunks of about ``chunk_bytes`` and written (committed)
    in transactions of about ``write_tokens`` tokens.
    """
    from tqdm import tqdm

    start = time.perf_counter()
    root_path = Path(root).expanduser().resolve()
    summary = IndexSummary(root=str(root_path))
    candidates, skipped = list_candidates(root_path, include, exclude, skip_secrets)
    summary.skipped.update(skipped)
    summary.files_seen = len(candidates) + sum(skipped.values())
    prefix = path_key(os.path.join(root_path, ""))
    known = {p: h for p, h in store.file_hashes().items() if p.startswith(prefix)}
    prepare = functools.partial(
        _prepare,
        store,
        root=root_path,
        known=known,
        max_bytes=max_file_bytes,
        skip_secrets=skip_secrets,
    )
    present: set[str] = set()
    done = 0  # files read (the bar keeps no count when it is off)
    tokenized = 0  # tokens of the files read so far that need (re)indexing
    show = sys.stderr.isatty() if progress is None else progress is True
    bar = tqdm(total=len(candidates), unit="file", disable=not show, dynamic_ncols=True)
    with bar, ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenize") as pool:
        chunks = _chunks(candidates, chunk_bytes)
        # the worker reads and tokenizes up to LOOKAHEAD chunks ahead while this thread writes
        queue: deque[Future[_Chunk]] = deque(
            pool.submit(prepare, c) for c in itertools.islice(chunks, LOOKAHEAD)
        )
        unwritten: list[FileTokens] = []
        try:
            while queue:
                chunk = queue.popleft().result()
                for nxt in itertools.islice(chunks, 1):
                    queue.append(pool.submit(prepare, nxt))
                unwritten.extend(chunk.files)
                tokenized += sum(len(f.ids) for f in chunk.files)
                # Large transactions: each commit rewrites the pages it touches, and new keys
                # land all over the tree, so fewer, larger writes are much faster.
                if not queue or sum(len(f.ids) for f in unwritten) >= write_tokens:
                    store.write(unwritten)
                    summary.indexed += len(unwritten)
                    summary.tokens += sum(len(f.ids) for f in unwritten)
                    unwritten = []
                summary.unchanged += chunk.unchanged
                for reason in chunk.skipped:
                    summary.skip(reason)
                present.update(chunk.present)
                done += len(chunk.present) + len(chunk.skipped)
                bar.update(len(chunk.present) + len(chunk.skipped))
                elapsed = time.perf_counter() - start
                rate = f"{tokenized / max(elapsed, 1e-9):,.0f} tokens/s"
                bar.set_postfix_str(rate)
                if callable(progress):
                    progress(done, len(candidates), rate)
        finally:  # on an error or Ctrl-C, drop the chunks not yet started
            for future in queue:
                future.cancel()
    gone = sorted(set(known) - present)
    if gone:
        summary.removed = store.write([], removed=gone)
    store.checkpoint()
    _write_suffix_index(store, summary)
    summary.seconds = time.perf_counter() - start
    summary.stats = store.stats()
    return summary


def _write_suffix_index(store: NgramStore, summary: IndexSummary) -> None:
    """The store's suffix index, beside it. Not writing it fails nothing: the language server
    builds it in the background (and serves without it meanwhile)."""
    if store.path is None:
        return
    began = time.perf_counter()
    try:
        write_base(store)
    except OSError as err:
        summary.suffix_error = f"{err.strerror or err}"
        log.warning("the suffix index of %s was not written: %s", store.path, err)
    summary.suffix_seconds = time.perf_counter() - began
