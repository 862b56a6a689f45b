"""A store's suffix index on disk, beside the store: built when the store is written, mapped.

The memory (lsp_server/match_indexes.py) matches each draft's context against every file of the
stores. Built from a 4.1M-token store at the first request, that index took 17.7 s and 270 MB
(issue 21). So a store's index is built when the store is written (by ``index_repo`` at the end
of a run, by the memory's background thread when it is missing or out of date) and kept in one
file beside the store, ``<store>-suffix``, the *base*:

    b"SPSUFFIX", version, header bytes (uint32 each) | header (JSON) | zeros to a multiple of 64
    | tokens [N] int32 | suffix array [N] int32 (int64 from 2^31 tokens)

The header names the tokenizer, the arrays' checksum and each stream's file (path, sha256,
tokens). ``open_base`` checks the size and checksum before any use. A small base (up to
COPY_BYTES) is then read into memory whole: nothing done to the file afterwards can reach it. A
bigger one is mapped (np.memmap: it costs the pages that lookups touch, not a copy); the file
is written to a temporary file and renamed over the old one, so a reader never sees it
half-written and a mapping keeps the file it mapped. A damaged base (truncated, bytes changed)
raises BaseDamaged, and the memory deletes and rebuilds it.

A mapped file changed in place by someone else (truncated by a sync tool, a full disk, an
editor; overwritten) cannot be trusted: reading a page past a shrunk end raises SIGBUS, which
Python cannot catch, and changed bytes index out of bounds. So before each lookup the index
asks the open file (``MappedBase.intact``: fstat of its descriptor) whether its size and
modification time are still those that were checked; if not, or if a lookup meets an index out
of bounds or a token the file did not hold, the base is left out (SuffixIndex.failed) and the
memory reopens the file at its next use (checked again: rebuilt when damaged).

What changed in the store since the base was built is the memory's to follow: it masks out
the base's streams whose file changed or went away (``Segment.mask``, SuffixIndex.alive) and
indexes the files added or changed since in RAM (``build_segment``, the delta).

Privacy: the base holds the code's tokens as the store does. It is created 0600 in the store's
folder. Whatever erases from the store (NgramStore.forget, clear, prune) calls ``drop_base``:
it deletes the base when it holds an erased file, and every temporary base being written; a
build that read the store before an erase deletes its own result when it finds one of its files
gone from the store. A process that has the deleted file mapped keeps its blocks until it
unmaps it: the memory drops its mapping when it sees the file gone (at its next use).
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import threading
import weakref
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ngram_db.records import FileTokens
from ngram_db.suffix import SuffixArrays, SuffixIndex


class IndexedStore(Protocol):
    """What ``write_base`` reads of a store (ngram_db.store.NgramStore, which imports this
    module: a protocol keeps the two out of a circle)."""

    path: Path | None
    tokenizer: Any

    def file_records(self, paths: Sequence[str] | None = None) -> list[FileTokens]: ...

    def file_table(self) -> dict[str, tuple[str, int]]: ...


SUFFIX = "-suffix"  # the base file is the store's path with this added, as -wal and -shm are
FILE_MODE = 0o600  # as the store's files (ngram_db.store.FILE_MODE)
_MAGIC = b"SPSUFFIX"
_VERSION = 1
_PREFIX = struct.Struct("<8sII")  # magic, version, header bytes
_ALIGN = 64  # the arrays start at a multiple of this many bytes
_CHUNK = 1 << 22  # bytes read at a time for the checksum
_TOKENS = np.dtype("<i4")
# Bases whose arrays hold up to this many bytes are copied into memory when opened, not
# mapped. The checksum reads every byte at open anyway, so a copy costs no more disk reads,
# only RAM equal to the file: 16 MiB is 2M tokens (a large repository), under 4% of the
# server's resident size (about 460 MB with the default model). A copy cannot change under the
# server; a mapped file can (see the module docstring), which only bigger bases risk.
COPY_BYTES = 16 << 20

# One build of a base file at a time per file in this process (index_repo on the server's store
# thread, the memory's compaction on its own): the second finds the first's result.
_build_locks: dict[Path, threading.Lock] = {}
_build_locks_guard = threading.Lock()

FileId = tuple[int, int, int, int]  # (st_dev, st_ino, st_size, st_mtime_ns)


class BaseDamaged(Exception):
    """The store's suffix index file is damaged (it is rebuilt from the store)."""


def base_path(store_path: str | os.PathLike[str]) -> Path:
    """The base file of the store at ``store_path``."""
    return Path(f"{os.fspath(store_path)}{SUFFIX}")


def lasting(path: str) -> bool:
    """Whether a stored file belongs in a base: a file (an absolute path), not a pseudo-file
    (an accepted draft, ``accepted:<time>``). Those come and go by the thousand, pruned one
    at a time: in a base, each prune would delete it (it holds an erased file)."""
    return os.path.isabs(path)


def file_id(path: Path) -> FileId | None:
    """What tells a file from the one that replaced it, or None when there is none."""
    try:
        st = os.stat(path)
    except OSError:  # none there, or none that can be looked at (a folder that is a file)
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass
class Segment:
    """A suffix index over some of a store's files, each stream known by (path, sha256)."""

    index: SuffixIndex
    files: list[tuple[str, str]]  # [S] each stream's file: (path, sha256)
    lengths: np.ndarray  # [S] tokens per stream
    identity: FileId | None = None  # the base file it maps; None: in RAM

    def mask(
        self, table: Mapping[str, tuple[str, int]], covered: Mapping[str, str] | None = None
    ) -> None:
        """Count only the streams whose file the store holds with that content now
        (``table``: path -> (sha256, tokens), NgramStore.file_table), and that ``covered``
        (path -> sha256: another segment's) does not hold."""
        covered = covered or {}
        alive = np.fromiter(
            (
                table.get(path, ("",))[0] == sha and covered.get(path) != sha
                for path, sha in self.files
            ),
            dtype=bool,
            count=len(self.files),
        )
        self.index.alive = None if alive.all() else alive

    def alive_files(self) -> dict[str, str]:
        """path -> sha256 of the streams that count."""
        alive = self.index.alive
        if alive is None:
            return dict(self.files)
        return {path: sha for (path, sha), on in zip(self.files, alive.tolist(), strict=True) if on}

    def dead_tokens(self) -> int:
        """Tokens of the streams masked out."""
        alive = self.index.alive
        return 0 if alive is None else int(self.lengths[~alive].sum())


def build_segment(files: Sequence[FileTokens], **options: Any) -> Segment:
    """A segment in RAM over ``files`` (``options``: SuffixIndex's)."""
    index = SuffixIndex([f.ids for f in files], **options)
    lengths = np.array([len(f.ids) for f in files], dtype=np.int64)
    return Segment(index, [(f.path, f.sha256) for f in files], lengths)


# ----- writing ------------------------------------------------------------------------------


@contextlib.contextmanager
def _build_lock(target: Path) -> Iterator[None]:
    with _build_locks_guard:
        lock = _build_locks.setdefault(target, threading.Lock())
    with lock:
        yield


def write_base(store: IndexedStore) -> Path | None:
    """Index the store's files (the ``lasting`` ones) into its base file; returns its path.

    None when a file that it holds was erased from the store meanwhile (the result is then
    deleted: the store's erase may have run before it was in place). Raises OSError when the
    file cannot be written (a read-only folder, a full disk).
    """
    assert store.path is not None, "an in-memory store has no base file"
    target = base_path(store.path)
    with _build_lock(target):
        files = [f for f in store.file_records() if lasting(f.path)]
        arrays = SuffixArrays.build([f.ids for f in files])
        header = {
            "tokenizer": store.tokenizer.fingerprint,
            "tokens": len(arrays.tokens),
            "sa": np.dtype(arrays.sa.dtype).newbyteorder("<").str,
            "files": [[f.path, f.sha256, len(f.ids)] for f in files],
        }
        if not _write_atomically(target, header, arrays):
            return None
        # An erase committed after the read above may have found no base to delete.
        stored = store.file_table()
        if any(f.path not in stored for f in files):
            target.unlink(missing_ok=True)
            return None
    return target


def _write_atomically(target: Path, header: dict[str, Any], arrays: SuffixArrays) -> bool:
    """Write a base to a private temporary file and rename it over ``target``; False when the
    temporary file was deleted meanwhile (an erase: ``drop_base``)."""
    tokens = np.ascontiguousarray(arrays.tokens, dtype=_TOKENS)
    sa = np.ascontiguousarray(arrays.sa, dtype=np.dtype(arrays.sa.dtype).newbyteorder("<"))
    header["crc32"] = zlib.crc32(sa.data, zlib.crc32(tokens.data))
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    start = _PREFIX.size + len(text)
    pad = b"\0" * (-start % _ALIGN)
    _remove_orphans(target)
    temporary = target.with_name(f"{target.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    temporary.unlink(missing_ok=True)  # left by a crash of this very thread's earlier build
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(_PREFIX.pack(_MAGIC, _VERSION, len(text)) + text + pad)
            out.write(tokens.data)
            out.write(sa.data)
        os.replace(temporary, target)
    except FileNotFoundError:
        return False  # deleted by an erase while being written
    finally:
        temporary.unlink(missing_ok=True)
    return True


def _temporaries(target: Path) -> list[Path]:
    return [p for p in target.parent.glob("*.tmp") if p.name.startswith(f"{target.name}.")]


def _remove_orphans(target: Path) -> None:
    """Delete temporary bases left by processes that died while writing them."""
    if os.name != "posix":  # os.kill(pid, 0) asks after a process on POSIX only
        return
    for temporary in _temporaries(target):
        pid = temporary.name[len(target.name) + 1 :].split("-", 1)[0]
        if pid.isdigit() and not _running(int(pid)):
            temporary.unlink(missing_ok=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ----- reading --------------------------------------------------------------------------------


def open_base(store_path: Path, tokenizer: str, **options: Any) -> Segment | None:
    """The store's base file, read into memory (up to COPY_BYTES) or mapped (``options``:
    SuffixIndex's); None when there is none.

    Raises BaseDamaged when it is not whole (truncated, bytes changed, another tokenizer's),
    or when it changed while it was being opened.
    """
    path = base_path(store_path)
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return None
    with handle:
        st = os.fstat(handle.fileno())
        header, start = _read_header(handle, path)
        try:
            n = int(header["tokens"])
            sa_type = np.dtype(header["sa"])
            files = [(str(p), str(sha), int(length)) for p, sha, length in header["files"]]
            crc = int(header["crc32"])
        except (KeyError, TypeError, ValueError) as err:
            raise BaseDamaged(f"{path}: its header is incomplete ({err!r})") from err
        if sa_type not in (np.dtype("<i4"), np.dtype("<i8")):
            raise BaseDamaged(f"{path}: its suffix array has the type {sa_type}")
        size = n * (_TOKENS.itemsize + sa_type.itemsize)
        if n < 0 or st.st_size != start + size:
            raise BaseDamaged(f"{path}: {st.st_size} bytes, not the {n} tokens its header says")
        if header.get("tokenizer") != tokenizer:
            raise BaseDamaged(f"{path} was built with another tokenizer")
        lengths = np.array([length for _, _, length in files], dtype=np.int64)
        if int(lengths.sum()) + len(files) != n or (lengths < 0).any():
            raise BaseDamaged(f"{path}: its streams do not add up to its tokens")
        backing: MappedBase | None = None
        if size <= COPY_BYTES:  # the bytes checked are the bytes used
            raw = _read_checked(handle, path, start, size, crc)
        else:
            max_token = _check(handle, path, start, n * _TOKENS.itemsize, crc)
            raw = np.asarray(np.memmap(handle, dtype=np.uint8, mode="r", offset=start))
            backing = MappedBase(handle.fileno(), path, st, max_token)
            if not backing.intact():  # changed between the checksum and the mapping
                backing.close()
                raise BaseDamaged(f"{path} changed while it was being opened")
        tokens = raw[: n * _TOKENS.itemsize].view(_TOKENS)
        sa = raw[n * _TOKENS.itemsize :].view(sa_type)
    ends = np.cumsum(lengths + 1) - 1
    index = SuffixIndex(SuffixArrays(tokens, sa, ends), backing=backing, **options)
    if backing is not None:  # the descriptor lives as long as the mapping's index
        weakref.finalize(index, backing.close)
    identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    return Segment(index, [(p, sha) for p, sha, _ in files], lengths, identity)


class MappedBase:
    """The file under a mapped base, kept open: whether it still holds what was checked.

    ``intact`` is one fstat (about a microsecond), asked before each lookup. What it cannot
    close: a truncation between that fstat and the lookup's page reads (a lookup takes well
    under a millisecond) still raises SIGBUS; and a write in place that keeps the size and
    lands within the file system's timestamp granularity (a few ms) goes unseen, which the
    lookups' bounds checks catch (SuffixIndex.failed). Our own writers never do either: they
    write a new file and rename it over the old one, which leaves this mapping whole.
    """

    def __init__(self, fd: int, path: Path, st: os.stat_result, max_token: int) -> None:
        self._fd: int | None = os.dup(fd)
        self.path = path
        self._checked = (st.st_size, st.st_mtime_ns)
        self.max_token = max_token  # the largest token id the file held when checked

    def intact(self) -> bool:
        """Whether the open file still has the size and modification time it was checked
        with (False once closed)."""
        fd = self._fd
        if fd is None:
            return False
        try:
            st = os.fstat(fd)
        except OSError:
            return False
        return (st.st_size, st.st_mtime_ns) == self._checked

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _read_checked(handle: Any, path: Path, start: int, size: int, crc: int) -> np.ndarray:
    """The arrays' ``size`` bytes read into memory, their checksum checked."""
    handle.seek(start)
    raw = bytearray(size)
    if handle.readinto(raw) != size:
        raise BaseDamaged(f"{path} shrank while it was being read")
    if zlib.crc32(raw) != crc:
        raise BaseDamaged(f"{path}: its checksum does not match")
    return np.frombuffer(raw, dtype=np.uint8)


def _check(handle: Any, path: Path, start: int, token_bytes: int, crc: int) -> int:
    """Check the arrays' checksum, read in chunks (through the page cache, not mapped);
    returns the largest token id (the lookups' bound on what a match may propose)."""
    handle.seek(start)
    value, max_token, left = 0, -1, token_bytes
    while chunk := handle.read(min(_CHUNK, left) if left > 0 else _CHUNK):
        value = zlib.crc32(chunk, value)
        if left > 0:  # the tokens come first; _CHUNK keeps their chunks whole int32s
            if len(chunk) % _TOKENS.itemsize:
                raise BaseDamaged(f"{path} shrank while it was being read")
            max_token = max(max_token, int(np.frombuffer(chunk, dtype=_TOKENS).max()))
            left -= len(chunk)
    if value != crc:
        raise BaseDamaged(f"{path}: its checksum does not match")
    return max_token


def _read_header(handle: Any, path: Path) -> tuple[dict[str, Any], int]:
    """The header and the offset of the arrays."""
    prefix = handle.read(_PREFIX.size)
    if len(prefix) != _PREFIX.size:
        raise BaseDamaged(f"{path} is too short to be a suffix index")
    magic, version, size = _PREFIX.unpack(prefix)
    if magic != _MAGIC or version != _VERSION:
        raise BaseDamaged(f"{path} is not a suffix index of this version")
    try:
        header = json.loads(handle.read(size))
        if not isinstance(header, dict) or not isinstance(header.get("files"), list):
            raise ValueError("no file list")
    except ValueError as err:  # JSONDecodeError and UnicodeDecodeError included
        raise BaseDamaged(f"{path}: its header cannot be read ({err})") from err
    start = _PREFIX.size + size
    return header, start + (-start % _ALIGN)


def _held_paths(target: Path) -> set[str] | None:
    """The files a base holds, from its header; None when it cannot be read."""
    try:
        with target.open("rb") as handle:
            header, _ = _read_header(handle, target)
        return {str(path) for path, _, _ in header["files"]}
    except (OSError, BaseDamaged, TypeError, ValueError):
        return None


# ----- erasing ----------------------------------------------------------------------------------


def drop_base(store_path: str | os.PathLike[str], paths: Iterable[str] | None = None) -> bool:
    """Delete the store's base file if it holds one of ``paths`` (None: whatever it holds),
    and every temporary base being written; True when the base was deleted.

    Called by whatever erases from the store (NgramStore.forget, clear, prune), after the
    erase committed: a base built from the store before it could still hold the text.
    """
    target = base_path(store_path)
    for temporary in _temporaries(target):
        temporary.unlink(missing_ok=True)
    if not target.exists():
        return False
    if paths is not None:
        held = _held_paths(target)
        if held is not None and held.isdisjoint(paths):
            return False
    target.unlink(missing_ok=True)
    return True


def unlink_if_same(path: Path, identity: FileId | None) -> None:
    """Delete ``path`` if it is still the file of that identity (not one written since)."""
    if identity is not None and file_id(path) == identity:
        path.unlink(missing_ok=True)
