"""The SQLite n-gram store: opening (checks, creation, connections), SQLite's errors named,
and the engine's batched lookup. Its other jobs live beside it, as parts of ``NgramStore``:

- ngram_db/schema.py: the tables (``meta``, ``grams``, ``files``), the checks of ``meta``
  on opening, the migration of older schemas;
- ngram_db/store_files.py: the store's files on disk (private folders and files, deletion);
- ngram_db/store_writes.py: exact per-file updates, renames, forgetting;
- ngram_db/store_reads.py: files' records, stats, the full check;
- ngram_db/store_sql.py: the statements over lists of values, run in chunks.

All SQL of the package lives in these modules.

Every write is one ``BEGIN IMMEDIATE`` transaction (it takes the write lock up front, so
two processes wait on the busy timeout instead of failing), in WAL mode.

Store files hold every indexed file's tokens (they decode back to the text): they are created
0600 in folders created 0700, whatever the umask (SQLite gives -wal/-shm the database's mode).
SQLite's errors become the named errors of ``ngram_db.errors``: StoreCorrupt (damaged inside),
StoreBusy (locked longer than the busy timeout), StoreUnwritable (permissions, disk). Their
messages state facts (the path, what is wrong); what the user can do differs between
index-repo and the editor, so ngram_db/cli.py and lsp_server/stores/stores.py say it.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import sqlite_utils

from ngram_db import keys as K
from ngram_db.errors import (
    NgramStoreError,
    NotAStore,
    StoreBusy,
    StoreClosed,
    StoreCorrupt,
    StoreFull,
    StoreUnwritable,
)
from ngram_db.records import FileTokens, content_hash, parse_orders, path_key
from ngram_db.schema import DEFAULT_ORDERS, SCHEMA, SCHEMA_VERSION, init_or_read_meta
from ngram_db.store_files import (
    DIR_MODE,
    FILE_MODE,
    check_header,
    delete_store_files,
    file_identity,
    link_or_move,
    make_private_dirs,
)
from ngram_db.store_sql import SELECT_KEYS, in_chunks
from ngram_db.store_writes import StoreWrites
from ngram_db.tokenizer import Tokenizer, as_tokenizer
from superposed.ngram import DEFAULT_LAMBDAS, NgramResult, interpolate

__all__ = [
    "DEFAULT_ORDERS",
    "DIR_MODE",
    "FILE_MODE",
    "SCHEMA",
    "SCHEMA_VERSION",
    "FileTokens",
    "NgramStore",
    "StoreSource",
    "content_hash",
    "delete_store_files",
    "file_identity",
    "make_private_dirs",
    "parse_orders",
    "path_key",
    "store_error",
]

# How long a write waits for another writer's lock; SUPERPOSED_BUSY_TIMEOUT_MS overrides it
# (tests use a short one to show what happens after the wait).
BUSY_TIMEOUT_MS = int(os.environ.get("SUPERPOSED_BUSY_TIMEOUT_MS") or 60_000)
CACHE_KIB = 64 * 1024
MMAP_BYTES = 1 << 30
_LOOKUP_PAD = 16  # lookups bind a multiple of this many keys


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
                init_or_read_meta(conn, temporary, tok, orders)
                conn.execute("PRAGMA journal_mode = WAL")
            finally:
                conn.close()
            link_or_move(temporary, file)
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


# SQLite's primary result codes (sqlite3.h) that name what went wrong
_BUSY_CODES = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED
_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB
_FULL_CODE = 13  # SQLITE_FULL: the disk, or PRAGMA max_page_count
_ACCESS_CODES = {3, 8, 10, 14, 23}  # PERM, READONLY, IOERR, CANTOPEN, AUTH


def store_error(name: str, err: sqlite3.Error) -> NgramStoreError:
    """The named error for an SQLite error on store ``name`` (what to do is the caller's to
    say: ngram_db.cli for index-repo, lsp_server.stores.stores for the editor)."""
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


class NgramStore(StoreWrites):
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
            check_header(file)
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
            stored = init_or_read_meta(conn, file, tok, wanted)
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
            found = {key: (g, c) for key, g, c in in_chunks(self._reader, SELECT_KEYS, keys)}
        counts = np.array([found.get(k, (0, 0)) for k in keys[: len(wanted)]], dtype=np.int64)
        return counts[:, 0], counts[:, 1]


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


def _lambda_array(orders: tuple[int, ...], lambdas: Mapping[int, float] | None) -> np.ndarray:
    """Weights per order, in store order; orders without a weight get 0."""
    weights = DEFAULT_LAMBDAS if lambdas is None else lambdas
    return np.array([float(weights.get(n, 0.0)) for n in orders])
