"""The SQLite n-gram store: schema, opening checks, exact per-file updates, the batched lookup.

All SQL of the package lives in this module. Tables:

- ``meta``: schema version, n-gram orders, tokenizer fingerprint.
- ``grams``: one row per token tuple key (see ``keys``): ``g`` = count as an n-gram,
  ``c`` = count as a context. WITHOUT ROWID, so a lookup is one B-tree descent.
- ``files``: per file its path, content sha256, token count and its token ids
  (zlib-compressed uint32). Removing or changing a file re-counts its stored ids and
  subtracts them, so updates are exact without re-reading the old text.
- ``symbols`` (schema 2): per definition of a file its name, kind, line, enclosing class and
  header (ngram_db/symbols.py). A changed file's rows are replaced in the transaction that
  replaces its counts, and removed with them, so they follow the same privacy rules, saves
  and forgetting as the n-grams.

Schema versions: a store of schema 1 (before ``symbols``) is migrated in place when opened
(the table is added, nothing else changes) and marked ``symbols_missing``: its files' rows
are filled by the next index-repo run, which then clears the mark. A newer schema than this
code's raises SchemaMismatch and leaves the file untouched.

Every write is one ``BEGIN IMMEDIATE`` transaction (it takes the write lock up front, so
two processes wait on the busy timeout instead of failing), in WAL mode.

Store files hold every indexed file's tokens (they decode back to the text): they are created
0600 in folders created 0700, whatever the umask (SQLite gives -wal/-shm the database's mode).
SQLite's errors become the named errors of ``ngram_db.errors``: StoreCorrupt (damaged inside),
StoreBusy (locked longer than the busy timeout), StoreUnwritable (permissions, disk). Their
messages state facts (the path, what is wrong); what the user can do differs between
index-repo and the editor, so ngram_db/cli.py and lsp_server/stores.py say it.
"""

from __future__ import annotations

import errno
import functools
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import sqlite_utils

from ngram_db import keys as K
from ngram_db import suffix_store, symbols
from ngram_db.errors import (
    NgramStoreError,
    NotAStore,
    OrdersMismatch,
    SchemaMismatch,
    StoreBusy,
    StoreClosed,
    StoreCorrupt,
    StoreFull,
    StoreUnwritable,
    TokenizerMismatch,
)
from ngram_db.records import (
    FileTokens,
    content_hash,
    pack_ids,
    parse_orders,
    path_key,
    unpack_ids,
)
from ngram_db.symbols import Symbol
from ngram_db.tokenizer import Tokenizer, as_tokenizer
from superposed.ngram import DEFAULT_LAMBDAS, NgramResult, interpolate

__all__ = ["FileTokens", "NgramStore", "StoreSource", "content_hash", "parse_orders", "path_key"]

SCHEMA_VERSION = 2
DEFAULT_ORDERS: tuple[int, ...] = (2, 3, 4, 5, 6)
# How long a write waits for another writer's lock; SUPERPOSED_BUSY_TIMEOUT_MS overrides it
# (tests use a short one to show what happens after the wait).
BUSY_TIMEOUT_MS = int(os.environ.get("SUPERPOSED_BUSY_TIMEOUT_MS") or 60_000)
FILE_MODE = 0o600  # store files: readable by their owner only
DIR_MODE = 0o700  # folders created for stores
CACHE_KIB = 64 * 1024
MMAP_BYTES = 1 << 30
_SQLITE_HEADER = b"SQLite format 3\x00"
_MAX_PARAMS = 30_000  # below SQLite's default limit of 32766 bound parameters
_LOOKUP_PAD = 16  # lookups bind a multiple of this many keys

# SQL, not sqlite-utils' create_table, which cannot declare a table WITHOUT ROWID.
SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE grams (
    key INTEGER PRIMARY KEY,  -- packed token tuple, see ngram_db.keys
    g INTEGER NOT NULL,       -- count as an n-gram
    c INTEGER NOT NULL        -- count as a context (followed by a token)
) WITHOUT ROWID;
CREATE TABLE files (
    path TEXT PRIMARY KEY,
    sha256 TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    ids BLOB NOT NULL         -- zlib(uint32 little-endian token ids)
);
CREATE TABLE symbols (
    path TEXT NOT NULL,       -- a key of files
    name TEXT NOT NULL,
    kind TEXT NOT NULL,       -- function, method, class
    line INTEGER NOT NULL,    -- 0-based
    scope TEXT NOT NULL,      -- the enclosing class of a method, '' at the top level
    header TEXT NOT NULL      -- Python text stating the definition (ngram_db/symbols.py)
);
CREATE INDEX symbols_name ON symbols (name);
CREATE INDEX symbols_path ON symbols (path);
"""
_SYMBOLS_SCHEMA = SCHEMA[SCHEMA.index("CREATE TABLE symbols") :]  # what schema 1 -> 2 adds
_UPSERT = (
    "INSERT INTO grams (key, g, c) VALUES (?, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET g = g + excluded.g, c = c + excluded.c"
)
_ROWS_PER_INSERT = 256
_UPSERT_MANY = (
    f"INSERT INTO grams (key, g, c) VALUES {','.join(['(?, ?, ?)'] * _ROWS_PER_INSERT)} "
    "ON CONFLICT (key) DO UPDATE SET g = g + excluded.g, c = c + excluded.c"
)


def _check_header(path: Path) -> None:
    if path.is_dir():
        raise NotAStore(f"{path} is a directory, not an n-gram store")
    if path.exists() and path.stat().st_size > 0:
        with path.open("rb") as f:
            header = f.read(len(_SQLITE_HEADER))
        if header != _SQLITE_HEADER:
            raise NotAStore(
                f"{path} is not an n-gram store (not an SQLite database); it was left untouched"
            )


def delete_store_files(path: Path) -> None:
    """Remove a store, its WAL side files and its suffix index (what --rebuild does)."""
    for suffix in ("", "-wal", "-shm", "-journal", suffix_store.SUFFIX):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def make_private_dirs(folder: Path) -> None:
    """Create ``folder`` and its missing parents with mode 0700 (whatever the umask).

    Raises StoreUnwritable (what to fix) when a folder cannot be created.
    """
    missing: list[Path] = []
    here = folder
    while not here.exists() and here != here.parent:
        missing.append(here)
        here = here.parent
    try:
        for path in reversed(missing):
            path.mkdir(mode=DIR_MODE, exist_ok=True)
            os.chmod(path, DIR_MODE)
        if not folder.is_dir():
            raise NotADirectoryError(f"{folder} is not a folder")
    except OSError as err:
        raise StoreUnwritable(
            f"cannot create the folder {folder} for an n-gram store ({err.strerror or err})"
        ) from err


def _create_private(file: Path, tok: Tokenizer, orders: tuple[int, ...] | None) -> None:
    """Create an absent store file, mode 0600, whole: the schema is written to a private
    temporary file that is then linked into place, so no other process ever sees a store
    file without its schema (a second server opening the same store took the 0-byte file of
    one being created for a damaged one). Existing store files are made 0600."""
    if not file.exists():
        temporary = file.with_name(f".{file.name}.{os.getpid()}-{threading.get_ident()}.new")
        try:
            os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
            conn = _connect(str(temporary))
            try:
                _init_or_read_meta(conn, temporary, tok, orders)
                conn.execute("PRAGMA journal_mode = WAL")
            finally:
                conn.close()
            _link_or_move(temporary, file)
        except FileExistsError:
            pass  # theirs is whole too: use it
        except (OSError, sqlite3.Error) as err:
            raise StoreUnwritable(
                f"cannot create the n-gram store {file} ({getattr(err, 'strerror', None) or err})"
            ) from err
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{temporary}{suffix}").unlink(missing_ok=True)
    for suffix in ("", "-wal", "-shm", "-journal"):
        side = Path(f"{file}{suffix}")
        try:
            if side.exists() and side.stat().st_mode & 0o077:
                os.chmod(side, FILE_MODE)
        except OSError:
            pass  # not ours to change (another user's file): SQLite says what it can do


def _link_or_move(source: Path, target: Path) -> None:
    """Put ``source`` at ``target`` unless it exists (FileExistsError): a hard link, which
    never replaces; where the filesystem has none, a rename after a check."""
    try:
        os.link(source, target)
    except FileExistsError:
        raise
    except OSError as err:
        if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK):
            raise
        if target.exists():
            raise FileExistsError(target) from err
        os.rename(source, target)


# SQLite's primary result codes (sqlite3.h) that name what went wrong
_BUSY_CODES = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED
_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB
_FULL_CODE = 13  # SQLITE_FULL: the disk, or PRAGMA max_page_count
_ACCESS_CODES = {3, 8, 10, 14, 23}  # PERM, READONLY, IOERR, CANTOPEN, AUTH


def store_error(name: str, err: sqlite3.Error) -> NgramStoreError:
    """The named error for an SQLite error on store ``name`` (what to do is the caller's to
    say: ngram_db.cli for index-repo, lsp_server.stores for the editor)."""
    code = (getattr(err, "sqlite_errorcode", None) or 0) & 0xFF
    if code in _BUSY_CODES:
        return StoreBusy(
            f"{name} is locked: another writer held it for over {BUSY_TIMEOUT_MS // 1000} s "
            f"({err}); this write was not made, earlier ones are kept"
        )
    if code in _CORRUPT_CODES:
        return StoreCorrupt(f"{name} is damaged ({err}); it was left untouched")
    if code == _FULL_CODE:
        return StoreFull(f"{name} cannot grow: the disk is full ({err}); this write was not made")
    if code in _ACCESS_CODES:
        return StoreUnwritable(f"{name} cannot be opened or written ({err})")
    return NotAStore(f"{name} is not a usable n-gram store ({err}); it was left untouched")


class NgramStore:
    """One n-gram store file (or an in-memory one): the engine's NgramSource over its counts."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path | None,
        tokenizer: Tokenizer,
        orders: tuple[int, ...],
        lambdas: Mapping[int, float] | None = None,
    ) -> None:
        self._lock = threading.RLock()  # a connection is used by one thread at a time
        self.conn = conn  # writes, and reads that must see this connection's transaction
        self.db = sqlite_utils.Database(conn)  # plain inserts; the counting upserts are SQL
        # Lookups and stats read through their own connection: in WAL mode they then never
        # wait for a write in progress (a long index_repo chunk, another process's save).
        self._reader = conn if path is None else _connect(str(path), query_only=True)
        self._read_lock = self._lock if path is None else threading.Lock()
        self.path = path
        self.name = ":memory:" if path is None else str(path)
        self.tokenizer = tokenizer
        self._orders = orders
        self._lambdas = _lambda_array(orders, lambdas)
        self.notices: list[str] = []  # what the user should know about opening it (once)
        self.closed = False
        self.identity = file_identity(path)  # the file opened (set by open, before connecting)

    # ----- opening -----------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        tokenizer: Any,
        orders: str | Iterable[int] | None = None,
        *,
        rebuild: bool = False,
        lambdas: Mapping[int, float] | None = None,
    ) -> NgramStore:
        """Open (creating if absent) the store at ``path`` (``":memory:"`` for a throwaway one).

        ``orders`` None means the stored orders (or 2..6 for a new store); other orders than
        the stored ones raise OrdersMismatch. ``rebuild`` deletes the file first.
        """
        tok = as_tokenizer(tokenizer)
        wanted = None if orders is None else parse_orders(orders)
        memory = os.fspath(path) == ":memory:"
        file = None if memory else Path(path).expanduser()
        notices: list[str] = []
        if file is not None:
            if rebuild:
                delete_store_files(file)
            _check_header(file)
            if file.is_file() and file.stat().st_size == 0:
                notices.append(
                    f"{file} was empty (0 bytes), so a new store was started in its place: "
                    "if it held an index, run index-repo to fill it again"
                )
            make_private_dirs(file.parent)
            _create_private(file, tok, wanted)
        conn: sqlite3.Connection | None = None
        # Before connecting: a file renamed over this one meanwhile then reads as replaced.
        identity = file_identity(file)
        try:
            conn = _connect(":memory:" if file is None else str(file))
            stored = _init_or_read_meta(conn, file, tok, wanted)
            if file is not None:
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            store = cls(conn, file, tok, stored, lambdas)
            store.identity = identity
        except sqlite3.Error as err:
            if conn is not None:
                conn.close()
            raise store_error(str(file), err) from err
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        store.notices = notices
        return store

    @contextmanager
    def _sqlite_errors(self) -> Iterator[None]:
        """SQLite's errors as the store's named errors (each says what to do)."""
        try:
            yield
        except sqlite3.Error as err:
            if self.closed:  # closed by another thread meanwhile: the file is not at fault
                raise StoreClosed(f"{self.name} was closed during this call") from err
            raise store_error(self.name, err) from err

    def replaced(self) -> bool:
        """Whether the file at this store's path is no longer the one it opened: deleted, or
        another renamed over it (index-repo --rebuild). Its writes would then go to a file that
        nobody reads: the owner closes it and opens the path again."""
        if self.path is None or self.identity is None:  # in memory, or not known at open
            return False
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return True
        except OSError:  # cannot be looked at now (permissions): no sign of another file
            return False
        return (st.st_dev, st.st_ino) != self.identity

    def close(self) -> None:
        """Close the connections; a later call on this object raises StoreClosed."""
        with self._lock, self._read_lock:
            self.closed = True
            if self._reader is not self.conn:
                self._reader.close()
            self.conn.close()

    def __enter__(self) -> NgramStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----- the engine's NgramSource ------------------------------------------------------

    @property
    def orders(self) -> tuple[int, ...]:
        return self._orders

    def probabilities(
        self, contexts: Sequence[Sequence[int]], candidates: np.ndarray
    ) -> NgramResult:
        """Interpolated probabilities of ``candidates[d, c]`` after ``contexts[d]``."""
        next_counts, context_counts = self.counts(contexts, candidates)
        return interpolate(next_counts, context_counts, self._lambdas)

    def source(self, lambdas: Mapping[int, float]) -> StoreSource:
        """This store's counts under other interpolation weights."""
        return StoreSource(self, lambdas)

    def counts(
        self, contexts: Sequence[Sequence[int]], candidates: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """All counts for D drafts x O orders x C candidates, in at most O SQL statements.

        Returns next_counts [D, O, C] = count(ctx_n x) and context_counts [D, O] = count(ctx_n),
        0 where a context is shorter than n - 1 tokens.
        """
        candidates = np.asarray(candidates)
        d, c = candidates.shape
        o = len(self._orders)
        ctx_len = np.array(self._orders) - 1  # [O]
        width = int(ctx_len.max())
        window = np.zeros((d, width), dtype=np.uint64)  # right-aligned last tokens
        have = np.zeros(d, dtype=np.int64)
        for i, context in enumerate(contexts):
            tail = np.asarray(context[-width:] if len(context) else [], dtype=np.int64)
            window[i, width - len(tail) :] = tail
            have[i] = len(tail)
        states = K.seed_states((d, o))  # [D, O]
        for j in range(width):
            # order n hashes the last n - 1 tokens: column j joins once j >= width - (n - 1)
            active = (j >= width - ctx_len)[None, :]  # [1, O]
            states = np.where(active, K.step(states, window[:, j : j + 1]), states)
        ctx_keys = K.pack(states, ctx_len[None, :])  # [D, O]
        next_keys = K.pack(
            K.step(states[:, :, None], candidates[:, None, :]), (ctx_len + 1)[None, :, None]
        )  # [D, O, C]
        valid = have[:, None] >= ctx_len[None, :]  # [D, O]: context long enough

        # 1. every context, and the candidates after the shortest one
        g, c_found = self._lookup(np.concatenate([ctx_keys.ravel(), next_keys[:, 0].ravel()]))
        context_counts = np.where(valid, c_found[: d * o].reshape(d, o), 0)  # [D, O]
        next_counts = np.zeros((d, o, c), dtype=np.int64)
        next_counts[:, 0] = np.where(valid[:, :1], g[d * o :].reshape(d, c), 0)
        # 2. each longer context in turn, only where a count can be non-zero: an n-gram's
        # suffix occurs wherever it does, so what is unseen after a context is unseen after
        # every longer one (a step costs about as much as 20 keys; this prunes far more)
        for i in range(1, o):
            need = (context_counts[:, i, None] > 0) & (next_counts[:, i - 1] > 0)  # [D, C]
            if not need.any():
                break
            next_counts[:, i][need] = self._lookup(next_keys[:, i][need])[0]
        return next_counts, context_counts

    def _lookup(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """g and c of each wanted key ([N] each, 0 where absent), in one SQL statement."""
        keys = wanted.tolist()
        if not keys:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        keys += keys[:1] * (-len(keys) % _LOOKUP_PAD)  # few distinct statements to cache
        with self._read_lock, self._sqlite_errors():
            found = {key: (g, c) for key, g, c in _in_chunks(self._reader, _SELECT_KEYS, keys)}
        counts = np.array([found.get(k, (0, 0)) for k in keys[: len(wanted)]], dtype=np.int64)
        return counts[:, 0], counts[:, 1]

    # ----- writes --------------------------------------------------------------------------

    def update_file(self, path: str | os.PathLike[str], text: str) -> bool:
        """Count ``text`` as the content of ``path``, replacing its old content exactly.

        Returns False when the content is unchanged (nothing written).
        """
        return self.update_files([(path, text)]) > 0

    def update_files(self, items: Sequence[tuple[str | os.PathLike[str], str]]) -> int:
        """update_file for several files in one transaction; returns how many changed."""
        known = self.file_hashes([path_key(p) for p, _ in items])
        todo = [(path_key(p), t, content_hash(t)) for p, t in items]
        todo = [(p, t, h) for p, t, h in todo if known.get(p) != h]
        if not todo:
            return 0
        ids = self.tokenizer.encode_batch([t for _, t, _ in todo])
        return self.write(
            [
                FileTokens(p, h, i, symbols.extract_safely(p, t))
                for (p, t, h), i in zip(todo, ids, strict=True)
            ]
        )

    def remove_file(self, path: str | os.PathLike[str]) -> bool:
        """Subtract a file's counts and forget it; False if it was not in the store."""
        return self.write([], removed=[path_key(path)]) > 0

    def rename_file(self, old: str | os.PathLike[str], new: str | os.PathLike[str]) -> bool:
        """Move a file's record to a new path (counts unchanged); False if ``old`` is unknown."""
        old_key, new_key = path_key(old), path_key(new)
        if old_key == new_key:
            return self.file_hashes([old_key]) != {}
        with self._transaction():
            row = self.conn.execute(
                "SELECT sha256, ids FROM files WHERE path = ?", [old_key]
            ).fetchone()
            if row is None:
                return False
            moved = [replace(s, path=new_key) for s in self._symbols_of(self.conn, [old_key])]
            self._write_locked([FileTokens(new_key, row[0], unpack_ids(row[1]), moved)], [old_key])
            return True

    def write(self, files: Sequence[FileTokens], removed: Sequence[str] = ()) -> int:
        """Apply new file contents and removals in one transaction; returns files changed."""
        with self._transaction():
            return self._write_locked(files, removed)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._sqlite_errors(), self._lock, self.conn:  # commits, or rolls back
            self.conn.execute("BEGIN IMMEDIATE")
            yield

    # ----- forgetting ------------------------------------------------------------------------

    def paths(self, prefix: str = "") -> list[str]:
        """Stored file keys that start with ``prefix``, sorted."""
        with self._lock, self._sqlite_errors():
            rows = self.conn.execute(
                "SELECT path FROM files WHERE substr(path, 1, ?) = ? ORDER BY path",
                [len(prefix), prefix],
            )
            return [path for (path,) in rows]

    def forget(self, path: str | os.PathLike[str]) -> int:
        """Remove a file, or every file under a folder, erasing it from disk; returns how many."""
        key = path_key(path)
        under = self.paths(key.rstrip("/\\") + os.sep) if key else []
        gone = [p for p in [key, *under] if p]
        with self._erasing(gone):
            return self.write([], removed=gone)

    def prune(self, prefix: str, keep: int) -> int:
        """Keep the ``keep`` last (by sorted key) files whose key starts with ``prefix``."""
        paths = self.paths(prefix)
        old = paths[: max(0, len(paths) - keep)]
        if not old:
            return 0
        with self._erasing(old):
            return self.write([], removed=old)

    def clear(self) -> int:
        """Forget every file and count, erasing them from disk; returns files removed."""
        with self._erasing(), self._transaction():
            files = self.conn.execute("SELECT count(*) FROM files").fetchone()[0]
            self.conn.execute("DELETE FROM grams")
            self.conn.execute("DELETE FROM files")
            self.conn.execute("DELETE FROM symbols")
        with self._lock, self._sqlite_errors():
            self.conn.execute("VACUUM")  # drop the freed pages from the file
        return int(files)

    @contextmanager
    def _erasing(self, paths: Sequence[str] | None = None) -> Iterator[None]:
        """Deletions overwrite the freed content, and the WAL is folded back at the end; the
        suffix index file is deleted if it holds one of ``paths`` (None: everything)."""
        with self._lock, self._sqlite_errors():
            self.conn.execute("PRAGMA secure_delete = ON")
        try:
            yield
        finally:
            with self._lock, self._sqlite_errors():
                self.conn.execute("PRAGMA secure_delete = OFF")
                if self.path is not None:
                    self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            if self.path is not None:
                suffix_store.drop_base(self.path, paths)

    def _write_locked(self, files: Sequence[FileTokens], removed: Sequence[str]) -> int:
        files = list({f.path: f for f in files}.values())  # the last content of a path wins
        paths = [f.path for f in files] + list(removed)
        old = self._stored(paths)  # read inside the transaction: exact under concurrency
        files = [f for f in files if old.get(f.path, ("",))[0] != f.sha256]
        gone = [p for p in removed if p in old]
        old_ids = [old[p][1] for p in [f.path for f in files] + gone if p in old]
        new_counts = K.count_sequences([f.ids for f in files], self._orders)
        if old_ids:
            delta = K.difference(new_counts, K.count_sequences(old_ids, self._orders))
        else:
            delta = new_counts
        self._apply(delta)
        if gone:
            self.conn.executemany("DELETE FROM files WHERE path = ?", [(p,) for p in gone])
        self._replace_symbols([f.path for f in files] + gone, files)
        self.db.table("files").insert_all(
            ({"path": f.path, "sha256": f.sha256, "tokens": len(f.ids), "ids": pack_ids(f.ids)}
             for f in files),
            replace=True,
        )  # fmt: skip
        return len(files) + len(gone)

    def _replace_symbols(self, paths: Sequence[str], files: Sequence[FileTokens]) -> None:
        """The rows of ``paths`` gone, those of ``files`` (their new content) written."""
        self.conn.executemany("DELETE FROM symbols WHERE path = ?", [(p,) for p in paths])
        self.conn.executemany(
            "INSERT INTO symbols (path, name, kind, line, scope, header) VALUES (?,?,?,?,?,?)",
            [
                (f.path, s.name, s.kind, s.line, s.scope, s.header)
                for f in files
                for s in f.symbols or ()
            ],
        )

    def set_symbols(self, rows: Mapping[str, Sequence[Symbol]]) -> None:
        """Replace the symbols of stored files (path -> rows) without touching their counts:
        how index-repo fills the rows of a store migrated from schema 1 (paths not stored
        are ignored: a file's rows never outlive it)."""
        with self._transaction():
            stored = set(self._stored_paths(list(rows)))
            items = [FileTokens(p, "", np.zeros(0), r) for p, r in rows.items() if p in stored]
            self._replace_symbols([f.path for f in items], items)

    def _stored_paths(self, paths: Sequence[str]) -> list[str]:
        return [p for p, _ in _in_chunks(self.conn, _SELECT_HASHES, list(dict.fromkeys(paths)))]

    # ----- symbols (read through the reader connection) ---------------------------------------

    def symbols_named(self, names: Sequence[str]) -> list[Symbol]:
        """The stored definitions of these names, by path and line."""
        with self._read_lock, self._sqlite_errors():
            rows = _in_chunks(self._reader, _SELECT_SYMBOLS_NAMED, list(dict.fromkeys(names)))
        return sorted((_symbol(r) for r in rows), key=lambda s: (s.path, s.line))

    def symbols_in(self, path: str | os.PathLike[str]) -> list[Symbol]:
        """The stored definitions of one file, by line."""
        with self._read_lock, self._sqlite_errors():
            return sorted(self._symbols_of(self._reader, [path_key(path)]), key=lambda s: s.line)

    @staticmethod
    def _symbols_of(conn: sqlite3.Connection, paths: Sequence[str]) -> list[Symbol]:
        return [_symbol(r) for r in _in_chunks(conn, _SELECT_SYMBOLS_IN, list(paths))]

    def symbols_missing(self) -> bool:
        """Whether files were stored before the store had symbols (schema 1): index-repo
        then extracts the rows of unchanged files too, and clears the mark."""
        with self._read_lock, self._sqlite_errors():
            row = self._reader.execute(
                "SELECT value FROM meta WHERE key = 'symbols_missing'"
            ).fetchone()
        return row is not None and row[0] == "1"

    def symbols_filled(self) -> None:
        """Clear the symbols_missing mark (index-repo, after a whole run)."""
        with self._transaction():
            self.conn.execute("DELETE FROM meta WHERE key = 'symbols_missing'")

    def _apply(self, delta: K.Counts) -> None:
        """Add a delta to ``grams``; drop rows whose counts reach zero."""
        # Many rows per statement: the per-row cost of executemany dominates bulk indexing.
        flat = np.column_stack([delta.keys, delta.g, delta.c]).ravel().tolist()
        full = len(delta) - len(delta) % _ROWS_PER_INSERT
        width = 3 * _ROWS_PER_INSERT
        batches = (flat[i : i + width] for i in range(0, 3 * full, width))
        self.conn.executemany(_UPSERT_MANY, batches)
        self.conn.executemany(_UPSERT, (flat[i : i + 3] for i in range(3 * full, len(flat), 3)))
        shrinking = delta.keys[(delta.g < 0) | (delta.c < 0)].tolist()
        _in_chunks(self.conn, _DELETE_EMPTY, shrinking)

    def _stored(self, paths: Sequence[str]) -> dict[str, tuple[str, np.ndarray]]:
        """path -> (sha256, token ids) of the given paths that are stored."""
        rows = _in_chunks(self.conn, _SELECT_FILES, list(dict.fromkeys(paths)))
        return {path: (sha, unpack_ids(blob)) for path, sha, blob in rows}

    # ----- reading bookkeeping -------------------------------------------------------------

    def file_hashes(self, paths: Sequence[str] | None = None) -> dict[str, str]:
        """path -> content sha256 of all stored files (or of the given paths)."""
        with self._lock, self._sqlite_errors():
            if paths is None:
                return dict(self.conn.execute("SELECT path, sha256 FROM files"))
            return dict(_in_chunks(self.conn, _SELECT_HASHES, paths))

    def file_ids(self, path: str | os.PathLike[str]) -> np.ndarray | None:
        """The stored token ids of a file, or None."""
        with self._lock, self._sqlite_errors():
            stored = self._stored([path_key(path)])
        entry = stored.get(path_key(path))
        return None if entry is None else entry[1]

    # ----- the memory's suffix indexes (ngram_db/suffix_store.py) ----------------------------
    # Read through the reader connection: a write in progress does not block them.

    def change_counter(self) -> tuple[int, int]:
        """A value that changes whenever the store changed: SQLite's data_version on the reader
        (a commit by any other connection, this store's writer or another process) and the
        writer's own changes (an in-memory store has no second connection)."""
        with self._read_lock, self._sqlite_errors():
            version = self._reader.execute("PRAGMA data_version").fetchone()[0]
            return int(version), self.conn.total_changes

    def file_table(self) -> dict[str, tuple[str, int]]:
        """path -> (content sha256, token count) of every stored file."""
        with self._read_lock, self._sqlite_errors():
            rows = self._reader.execute("SELECT path, sha256, tokens FROM files").fetchall()
        return {path: (sha, tokens) for path, sha, tokens in rows}

    def file_records(self, paths: Sequence[str] | None = None) -> list[FileTokens]:
        """The stored files (or those of ``paths`` that are stored) with their token ids,
        sorted by path: what the memory's suffix indexes are built on."""
        with self._read_lock, self._sqlite_errors():
            if paths is None:
                rows = self._reader.execute("SELECT path, sha256, ids FROM files").fetchall()
            else:
                rows = _in_chunks(self._reader, _SELECT_FILES, list(dict.fromkeys(paths)))
        return [FileTokens(path, sha, unpack_ids(blob)) for path, sha, blob in sorted(rows)]

    def all_counts(self) -> K.Counts:
        """Every (key, g, c) row, sorted by key: for tests and checks."""
        with self._lock:
            rows = self.conn.execute("SELECT key, g, c FROM grams ORDER BY key").fetchall()
        if not rows:
            return K.Counts.empty()
        a = np.array(rows, dtype=np.int64)
        return K.Counts(a[:, 0], a[:, 1], a[:, 2])

    def is_consistent(self) -> bool:
        """Whether the counts equal a recount of the stored files' token ids (a full check)."""
        with self._lock:
            ids = [unpack_ids(blob) for (blob,) in self.conn.execute("SELECT ids FROM files")]
        expected = K.count_sequences(ids, self._orders)
        actual = self.all_counts()
        return all(
            np.array_equal(a, b)
            for a, b in [
                (expected.keys, actual.keys),
                (expected.g, actual.g),
                (expected.c, actual.c),
            ]
        )

    def stats(self) -> dict[str, Any]:
        """Files, tokens, definitions, distinct n-grams and contexts per order, bytes on disk."""
        with self._read_lock, self._sqlite_errors():
            files, tokens = self._reader.execute(
                "SELECT count(*), coalesce(sum(tokens), 0) FROM files"
            ).fetchone()
            definitions = self._reader.execute("SELECT count(*) FROM symbols").fetchone()[0]
            ngrams: dict[int, int] = {}
            contexts: dict[int, int] = {}
            for n in self._orders:
                low, high = K.key_range(n)
                ngrams[n] = self._reader.execute(
                    "SELECT count(*) FROM grams WHERE key >= ? AND key < ? AND g > 0", [low, high]
                ).fetchone()[0]
                low, high = K.key_range(n - 1)
                contexts[n] = self._reader.execute(
                    "SELECT count(*) FROM grams WHERE key >= ? AND key < ? AND c > 0", [low, high]
                ).fetchone()[0]
        size = self.size_bytes()
        return {
            "path": None if self.path is None else str(self.path),
            "orders": list(self._orders),
            "tokenizer": self.tokenizer.fingerprint,
            "files": files,
            "tokens": tokens,
            "symbols": definitions,  # rows of the symbols table (definitions)
            "ngrams": ngrams,
            "contexts": contexts,
            "bytes": size,
            "bytes_per_token": size / tokens if tokens else None,
        }

    def size_bytes(self) -> int:
        """Bytes on disk (database plus its WAL), or the page total in memory."""
        if self.path is None:
            with self._lock:
                pages = self.conn.execute("PRAGMA page_count").fetchone()[0]
                page = self.conn.execute("PRAGMA page_size").fetchone()[0]
            return int(pages * page)
        return sum(
            Path(f"{self.path}{s}").stat().st_size
            for s in ("", "-wal")
            if Path(f"{self.path}{s}").exists()
        )

    def checkpoint(self) -> None:
        """Fold the WAL back into the database file (after a bulk index)."""
        with self._lock, self._sqlite_errors():
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


class StoreSource:
    """A store's counts interpolated with given weights: an NgramSource."""

    def __init__(self, store: NgramStore, lambdas: Mapping[int, float]) -> None:
        self.store = store
        self._lambdas = _lambda_array(store.orders, lambdas)

    @property
    def orders(self) -> tuple[int, ...]:
        return self.store.orders

    def probabilities(
        self, contexts: Sequence[Sequence[int]], candidates: np.ndarray
    ) -> NgramResult:
        next_counts, context_counts = self.store.counts(contexts, candidates)
        return interpolate(next_counts, context_counts, self._lambdas)


# Statements over a list of values: {marks} becomes one "?" per value of a chunk.
_SELECT_KEYS = "SELECT key, g, c FROM grams WHERE key IN ({marks})"
_DELETE_EMPTY = "DELETE FROM grams WHERE key IN ({marks}) AND g <= 0 AND c <= 0"
_SELECT_FILES = "SELECT path, sha256, ids FROM files WHERE path IN ({marks})"
_SELECT_HASHES = "SELECT path, sha256 FROM files WHERE path IN ({marks})"
_SYMBOL_COLUMNS = "name, kind, path, line, header, scope"  # Symbol's fields, in order
_SELECT_SYMBOLS_NAMED = f"SELECT {_SYMBOL_COLUMNS} FROM symbols WHERE name IN ({{marks}})"
_SELECT_SYMBOLS_IN = f"SELECT {_SYMBOL_COLUMNS} FROM symbols WHERE path IN ({{marks}})"


def _symbol(row: Sequence[Any]) -> Symbol:
    name, kind, path, line, header, scope = row
    return Symbol(name, kind, path, int(line), header, scope)


def _in_chunks(conn: sqlite3.Connection, template: str, values: Sequence[Any]) -> list[Any]:
    """The rows of ``template`` run over ``values``, in chunks below SQLite's parameter limit."""
    rows: list[Any] = []
    for start in range(0, len(values), _MAX_PARAMS):
        chunk = list(values[start : start + _MAX_PARAMS])
        rows.extend(conn.execute(_statement(template, len(chunk)), chunk))
    return rows


@functools.cache
def _statement(template: str, n: int) -> str:
    """``template`` for n values (cached: each text is built once, and SQLite's statement
    cache then finds it)."""
    return template.format(marks=",".join("?" * n))


def _connect(target: str, query_only: bool = False) -> sqlite3.Connection:
    """A connection with the busy timeout and a page cache sized for random lookups."""
    conn = sqlite3.connect(
        target,
        timeout=BUSY_TIMEOUT_MS / 1000,
        isolation_level=None,  # autocommit; writes issue BEGIN IMMEDIATE themselves
        check_same_thread=False,  # guarded by the store's locks
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    # lookups touch random pages: keep them in memory (mmap avoids a read() per page)
    conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
    if query_only:
        conn.execute("PRAGMA query_only = 1")
    return conn


def file_identity(path: Path | None) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``; None: in memory, or none to be seen."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _lambda_array(orders: tuple[int, ...], lambdas: Mapping[int, float] | None) -> np.ndarray:
    """Weights per order, in store order; orders without a weight get 0."""
    weights = DEFAULT_LAMBDAS if lambdas is None else lambdas
    return np.array([float(weights.get(n, 0.0)) for n in orders])


def _init_or_read_meta(
    conn: sqlite3.Connection, file: Path | None, tok: Tokenizer, wanted: tuple[int, ...] | None
) -> tuple[int, ...]:
    """Create the schema in an empty database, or check an existing one; returns the orders."""
    name = ":memory:" if file is None else str(file)
    db = sqlite_utils.Database(conn)
    tables = set(db.table_names())
    if not tables:
        with conn:
            conn.execute("BEGIN IMMEDIATE")
            # another process may have created it while we waited for the lock
            tables = set(db.table_names())
            if not tables:
                orders = wanted or DEFAULT_ORDERS
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                meta = {
                    "schema_version": str(SCHEMA_VERSION),
                    "orders": _fmt(orders),
                    "tokenizer": tok.fingerprint,
                }
                db.table("meta").insert_all({"key": k, "value": v} for k, v in meta.items())
                return orders
    if "meta" not in tables or "grams" not in tables:
        raise NotAStore(
            f"{name} is an SQLite database but not an n-gram store; it was left untouched"
        )
    meta = {row["key"]: row["value"] for row in db["meta"].rows}
    if meta.get("schema_version") == "1":
        meta = _migrate_1_to_2(conn, db)
    if meta.get("schema_version") != str(SCHEMA_VERSION):
        raise SchemaMismatch(
            f"{name} has schema version {meta.get('schema_version')}, this ngram_db writes "
            f"{SCHEMA_VERSION}"
        )
    if meta.get("tokenizer") != tok.fingerprint:
        raise TokenizerMismatch(
            f"{name} was built with tokenizer {meta.get('tokenizer')}, but the tokenizer in use "
            f"is {tok.fingerprint}"
        )
    stored = parse_orders(meta.get("orders", ""))
    if wanted is not None and wanted != stored:
        raise OrdersMismatch(f"{name} holds orders {_fmt(stored)}, not {_fmt(wanted)}")
    return stored


def _migrate_1_to_2(conn: sqlite3.Connection, db: sqlite_utils.Database) -> dict[str, str]:
    """Add the ``symbols`` table to a schema 1 store, in one transaction (another process may
    have migrated it while this one waited for the lock); returns the meta rows after it.

    Nothing else changes: the counts and files stay valid. The store is marked
    ``symbols_missing`` until index-repo has extracted its files' rows.
    """
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        meta = {row["key"]: row["value"] for row in db["meta"].rows}
        if meta.get("schema_version") != "1":
            return meta
        for statement in _SYMBOLS_SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        filled = conn.execute("SELECT count(*) FROM files").fetchone()[0]
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
        if filled:
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('symbols_missing', '1')")
    return {row["key"]: row["value"] for row in db["meta"].rows}


def _fmt(orders: tuple[int, ...]) -> str:
    return ",".join(map(str, orders))
