"""Checks of a shared infini-gram index's files before its C++ engine maps them.

The engine trusts every byte it maps: its own checks are C asserts, compiled out of the
released package, so a damaged file is a crash (a truncated ``tokenized.0``: SIGSEGV; a
random ``offset.0``: ``std::bad_alloc``, SIGABRT), not an error. Everything here reads with
plain ``read`` calls, never a map: a file that shrinks meanwhile gives a short read, not a
SIGBUS. A shard's files relate so (infini-gram v4, u16 tokens; ngram_db/infini.py writes them):

- ``tokenized.0``: 2 bytes a token; each document (file) is 0xFFFF then its ids, so its size
  is ``2 * (tokens + files)`` of the manifest's entry;
- ``offset.0``: one u64 a document, the byte offset of its 0xFFFF in ``tokenized.0``: the
  first 0, increasing, even, inside the file; so its size is ``8 * files``;
- ``table.0``: the suffix array, one pointer a token of ``ptr_size`` bytes (little-endian byte
  offsets into ``tokenized.0``, even and below its size): its size is ``ptr_size * tokens``
  with ``ptr_size`` in 1..8 and wide enough to address ``tokenized.0``.

Sizes and every offset are checked whole; the separators behind the offsets and the table's
pointers are checked at up to ``SAMPLES`` evenly spaced places (a full pass would read the
whole index at every start). What a sample misses can still crash the engine: it runs in a
child process (ngram_db/infini_worker.py), where a crash costs one lookup.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ngram_db.errors import NgramStoreError
from ngram_db.regular import NotRegular, open_regular

MAX_MANIFEST_BYTES = 16 << 20  # about 30,000 shards' entries; a bigger one is not ours
SAMPLES = 4096  # separators and suffix-array pointers checked a shard
TOKEN_BYTES = 2  # u16 token ids
DOC_SEPARATOR = b"\xff\xff"
SHARD_FILES = ("tokenized.0", "offset.0", "table.0")
# infini-gram (its engine and its indexer) tells a shard's files apart by these words found
# anywhere in their whole paths: a folder named after one misleads it (see plain_path).
ENGINE_WORDS = ("tokenized", "table", "offset", "metadata", "metaoff", "unigram")


class InfiniIndexError(NgramStoreError):
    """An infini-gram index cannot be built or opened; the message says why."""


def plain_path(path: str) -> bool:
    """Whether infini-gram can be given ``path``: none of its file words, and only characters
    that its indexer's unquoted shell commands keep as they are."""
    return re.fullmatch(r"[A-Za-z0-9_./-]+", path) is not None and not any(
        word in path for word in ENGINE_WORDS
    )


@dataclass(frozen=True)
class ShardFiles:
    """A checked shard: its files (resolved) and its sizes."""

    folder: Path
    files: dict[str, Path]  # name in SHARD_FILES -> the regular file it is
    tokens: int
    documents: int
    ptr_size: int


def _open_regular(path: Path, max_bytes: int | None = None) -> tuple[int, int]:
    """(fd, size) of ``path`` opened for reading, if it is a regular file (of at most
    ``max_bytes``); raises InfiniIndexError (ngram_db.regular.open_regular: a FIFO or a
    device is refused before a byte is read)."""
    try:
        fd, size = open_regular(path)
    except NotRegular as err:
        raise InfiniIndexError(f"{path} is not a regular file: rebuild the index") from err
    except OSError as err:
        raise InfiniIndexError(f"{path} cannot be opened: {err.strerror or err}") from err
    if max_bytes is not None and size > max_bytes:
        os.close(fd)
        raise InfiniIndexError(f"{path} is {size:,} bytes, more than a manifest's {max_bytes:,}")
    return fd, size


def _pread_all(fd: int, size: int, offset: int = 0) -> bytes:
    """``size`` bytes at ``offset``, or fewer where the file ends (it may shrink meanwhile)."""
    chunks, done = [], 0
    while done < size:
        chunk = os.pread(fd, size - done, offset + done)
        if not chunk:
            break
        chunks.append(chunk)
        done += len(chunk)
    return b"".join(chunks)


def read_manifest_file(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, None when there is no such file; raises InfiniIndexError
    when it is not a regular file of at most MAX_MANIFEST_BYTES holding a JSON object."""
    if not os.path.lexists(path):
        return None
    fd, size = _open_regular(path, MAX_MANIFEST_BYTES)
    try:
        raw = _pread_all(fd, min(size, MAX_MANIFEST_BYTES) + 1)
    except OSError as err:
        raise InfiniIndexError(f"{path} is not a readable manifest: {err}") from err
    finally:
        os.close(fd)
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError as err:
        raise InfiniIndexError(f"{path} is not a readable manifest: {err}") from err
    if not isinstance(data, dict):
        raise InfiniIndexError(f"{path} is not a readable manifest: not a JSON object")
    return data


def _count(entry: dict[str, Any], key: str, where: Path) -> int:
    value = entry.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InfiniIndexError(f"the manifest's entry for {where} has no valid {key!r}")
    return value


def _samples(count: int) -> list[int]:
    """Up to SAMPLES evenly spaced indexes in range(count), the first and the last among them."""
    if count <= SAMPLES:
        return list(range(count))
    return sorted({i * (count - 1) // (SAMPLES - 1) for i in range(SAMPLES)})


def _check_offsets(fd: int, documents: int, ds_size: int, ds_fd: int, where: Path) -> None:
    raw = _pread_all(fd, 8 * documents)
    if len(raw) != 8 * documents:
        raise InfiniIndexError(f"{where}/offset.0 changed while it was read: try again")
    offsets = np.frombuffer(raw, dtype="<u8")
    bad = (offsets >= ds_size) | (offsets % TOKEN_BYTES != 0)
    bad[0] |= offsets[0] != 0
    bad[1:] |= offsets[1:] <= offsets[:-1]  # increasing: no empty or overlapping document
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise InfiniIndexError(
            f"{where}/offset.0 is damaged (document {first} at byte {int(offsets[first]):,} "
            f"of {ds_size:,}): rebuild the index"
        )
    for i in _samples(documents):
        if _pread_all(ds_fd, TOKEN_BYTES, int(offsets[i])) != DOC_SEPARATOR:
            raise InfiniIndexError(
                f"{where}/tokenized.0 does not start document {i} where offset.0 says: "
                "rebuild the index"
            )


def _check_table(fd: int, ptr_size: int, tokens: int, ds_size: int, where: Path) -> None:
    for rank in _samples(tokens):
        raw = _pread_all(fd, ptr_size, rank * ptr_size)
        ptr = int.from_bytes(raw, "little")
        if len(raw) != ptr_size or ptr >= ds_size or ptr % TOKEN_BYTES:
            raise InfiniIndexError(
                f"{where}/table.0 is damaged (rank {rank} points at byte {ptr:,} of "
                f"{ds_size:,}): rebuild the index"
            )


def check_shard(folder: Path, entry: Any) -> ShardFiles:
    """The shard at ``folder`` whose manifest entry is ``entry``, once its files agree with
    each other and with the entry (see the module doc); raises InfiniIndexError."""
    if not isinstance(entry, dict):
        raise InfiniIndexError(f"the manifest's entry for {folder} is not an object")
    ids, documents = _count(entry, "tokens", folder), _count(entry, "files", folder)
    missing = [name for name in SHARD_FILES if not os.path.lexists(folder / name)]
    if missing:
        raise InfiniIndexError(f"shard {folder} lacks {', '.join(missing)}")
    if documents == 0:
        raise InfiniIndexError(f"the manifest's entry for {folder} has no file")
    tokens = ids + documents  # the separators are tokens to the engine
    opened: dict[str, tuple[int, int]] = {}
    try:
        for name in SHARD_FILES:
            opened[name] = _open_regular(folder / name)
        (ds_fd, ds_size), (od_fd, od_size), (sa_fd, sa_size) = (opened[n] for n in SHARD_FILES)
        if ds_size != TOKEN_BYTES * tokens:
            raise InfiniIndexError(
                f"{folder}/tokenized.0 is {ds_size:,} bytes where the manifest's "
                f"{ids:,} tokens in {documents:,} files make {TOKEN_BYTES * tokens:,}: "
                "the shard is truncated or replaced; rebuild the index"
            )
        if od_size != 8 * documents:
            raise InfiniIndexError(
                f"{folder}/offset.0 is {od_size:,} bytes where {documents:,} files make "
                f"{8 * documents:,}: rebuild the index"
            )
        ptr_size, rest = divmod(sa_size, tokens)
        if rest or not 1 <= ptr_size <= 8 or 256**ptr_size < ds_size:
            raise InfiniIndexError(
                f"{folder}/table.0 is {sa_size:,} bytes: not a suffix array of {tokens:,} "
                "tokens; rebuild the index"
            )
        _check_offsets(od_fd, documents, ds_size, ds_fd, folder)
        _check_table(sa_fd, ptr_size, tokens, ds_size, folder)
    except OSError as err:
        raise InfiniIndexError(f"shard {folder} cannot be read: {err}") from err
    finally:
        for fd, _ in opened.values():
            os.close(fd)
    paths = {name: (folder / name).resolve() for name in SHARD_FILES}
    return ShardFiles(folder, paths, tokens, documents, ptr_size)
