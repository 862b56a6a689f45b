"""A store's suffix index on disk, beside the store: built when the store is written, mapped.

The memory (lsp_server/stores/match_indexes.py) matches each draft's context against every file of
the
stores. Built from a 4.1M-token store at the first request, that index took 17.7 s and 270 MB
(issue 21). So a store's index is built when the store is written (by ``index_repo`` at the end
of a run, by the memory's background thread when it is missing or out of date) and kept in one
file beside the store, ``<store>-suffix``, the *base*:

    b"SPSUFFIX", version, header bytes (uint32 each) | header (JSON) | zeros to a multiple of 64
    | tokens [N] int32 | suffix array [N] int32 (int64 from 2^31 tokens)

The header names the tokenizer, the arrays' checksum and each stream's file (path, sha256,
tokens). ``open_base`` checks the size and checksum before any use. A small base (up to
COPY_BYTES) is then read into memory whole: nothing done to the file afterwards can reach it.
The file is written to a temporary file and renamed over the old one, so a reader never sees
it half-written. A damaged base (truncated, bytes changed) raises BaseDamaged, and the memory
deletes and rebuilds it.

A bigger base is never mapped where it can change under a lookup: a mapped file truncated by
another process (a sync tool, a second index-repo, a full disk, an editor) raises SIGBUS at
the next read of a page past its new end, which Python cannot catch (the process dies). So
its arrays are copied, as they are read for the checksum, into a file that no other process
can name (``_private_copy``: O_TMPFILE in the base's folder, or a file unlinked as soon as it
is created), and that copy is mapped (it costs the pages that lookups touch, page cache the
kernel can reclaim, not RAM of the process; the copy's blocks are freed when it is unmapped).
The bytes checked are the bytes used, as for a small base. Where the copy cannot be made (a
read-only folder, a full disk) the arrays are read into memory. The index still asks the copy
before each lookup whether its size and modification time are those it was checked with
(``MappedBase.intact``, an fstat), and bounds-checks what a lookup reads (SuffixIndex.failed):
what only a process of the same user that goes looking for the descriptor could change.

What changed in the store since the base was built is the memory's to follow: it masks out
the base's streams whose file changed or went away (``Segment.mask``, SuffixIndex.alive) and
indexes the files added or changed since in RAM (``build_segment``, the delta).

Privacy: the base holds the code's tokens as the store does. It is created 0600 in the store's
folder. Whatever erases from the store (NgramStore.forget, clear, prune) calls ``drop_base``:
it deletes the base when it holds an erased file, and every temporary base being written; a
build that read the store before an erase deletes its own result when it finds one of its files
gone from the store. A process that maps a base keeps its private copy's blocks until it
unmaps it: the memory drops its mapping when it sees the base file gone (at its next use).
"""

from __future__ import annotations

import contextlib
import errno
import json
import mmap
import os
import struct
import tempfile
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
# Bases whose arrays hold up to this many bytes are copied into memory when opened. The
# checksum reads every byte at open anyway, so a copy costs no more disk reads, only RAM equal
# to the file: 16 MiB is 2M tokens (a large repository), under 4% of the server's resident
# size (about 460 MB with the default model). Bigger ones are copied to a private file and
# mapped (see the module docstring).
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
        copy = _private_copy(handle, path, start, size, n * _TOKENS.itemsize, crc)
        if copy is None:  # the bytes checked are the bytes used
            raw = _read_checked(handle, path, start, size, crc)
        else:
            fd, max_token = copy
            try:
                raw = np.frombuffer(mmap.mmap(fd, size, access=mmap.ACCESS_READ), np.uint8)
                backing = MappedBase(fd, path, os.fstat(fd), max_token)
            finally:
                os.close(fd)
        tokens = raw[: n * _TOKENS.itemsize].view(_TOKENS)
        sa = raw[n * _TOKENS.itemsize :].view(sa_type)
    ends = np.cumsum(lengths + 1) - 1
    index = SuffixIndex(SuffixArrays(tokens, sa, ends), backing=backing, **options)
    if backing is not None:  # the descriptor lives as long as the mapping's index
        weakref.finalize(index, backing.close)
    identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    return Segment(index, [(p, sha) for p, sha, _ in files], lengths, identity)


class MappedBase:
    """The private copy under a mapped base, kept open: whether it still holds what was
    checked. ``intact`` is one fstat (about a microsecond), asked before each lookup. No other
    process can open the copy by a name; this guards against one that finds its descriptor
    (/proc/PID/fd) all the same, as the lookups' bounds checks do (SuffixIndex.failed)."""

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


def _private_copy(
    handle: Any, path: Path, start: int, size: int, token_bytes: int, crc: int
) -> tuple[int, int] | None:
    """The arrays' ``size`` bytes copied into a file no other process can name, checked as
    they are copied: (its descriptor, the largest token id: the lookups' bound on what a match
    may propose). None for a base of up to COPY_BYTES, on a system that cannot unlink an open
    file, or where the copy cannot be written (the caller reads the arrays into memory)."""
    if size <= COPY_BYTES or os.name != "posix":
        return None
    try:
        fd = _unnamed_file(path.parent)
    except OSError:
        return None
    try:
        handle.seek(start)
        value, max_token, done = 0, -1, 0
        while done < size:
            chunk = handle.read(min(_CHUNK, size - done))
            if not chunk:
                raise BaseDamaged(f"{path} shrank while it was being read")
            value = zlib.crc32(chunk, value)
            tokens = chunk[: max(0, token_bytes - done)]  # the tokens come first
            if len(tokens) % _TOKENS.itemsize:
                raise BaseDamaged(f"{path} shrank while it was being read")
            if tokens:
                max_token = max(max_token, int(np.frombuffer(tokens, dtype=_TOKENS).max()))
            _write_all(fd, chunk)
            done += len(chunk)
        if value != crc:
            raise BaseDamaged(f"{path}: its checksum does not match")
    except OSError:  # a full disk: read into memory instead
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd, max_token


def _unnamed_file(folder: Path) -> int:
    """A new file in ``folder``, read-write, that no other process can open by a name:
    O_TMPFILE where the file system has it, else created 0600 and unlinked at once."""
    flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)
    if hasattr(os, "O_TMPFILE"):
        try:
            return os.open(folder, flags | os.O_TMPFILE, FILE_MODE)
        except OSError as err:  # a file system without it
            if err.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
    fd, name = tempfile.mkstemp(prefix=".suffix-copy-", dir=folder)
    os.unlink(name)
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


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
