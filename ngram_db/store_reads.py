"""What a store reads back besides the engine's counts: its files' records (hashes, token ids,
the table the memory's suffix indexes are built on), stats and the full check.

``StoreReads`` is a part of ``ngram_db.store.NgramStore``, which sets the connections and locks
it uses. Lookups go through the reader connection where they can: a write in progress never
blocks them.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ngram_db import keys as K
from ngram_db.records import FileTokens, path_key, unpack_ids
from ngram_db.store_sql import SELECT_FILES, SELECT_HASHES, in_chunks
from ngram_db.tokenizer import Tokenizer


class StoreReads:
    """A store's reads of its files and counts (a part of NgramStore)."""

    # set by NgramStore.__init__ (ngram_db/store.py)
    conn: sqlite3.Connection
    _reader: sqlite3.Connection
    _lock: threading.RLock
    _read_lock: AbstractContextManager[Any]
    path: Path | None
    tokenizer: Tokenizer
    _orders: tuple[int, ...]

    if TYPE_CHECKING:  # defined by NgramStore (it names SQLite's errors)

        def _sqlite_errors(self) -> AbstractContextManager[None]: ...

    def _stored(self, paths: Sequence[str]) -> dict[str, tuple[str, np.ndarray]]:
        """path -> (sha256, token ids) of the given paths that are stored."""
        rows = in_chunks(self.conn, SELECT_FILES, list(dict.fromkeys(paths)))
        return {path: (sha, unpack_ids(blob)) for path, sha, blob in rows}

    # ----- reading bookkeeping -------------------------------------------------------------

    def file_hashes(self, paths: Sequence[str] | None = None) -> dict[str, str]:
        """path -> content sha256 of all stored files (or of the given paths)."""
        with self._lock, self._sqlite_errors():
            if paths is None:
                return dict(self.conn.execute("SELECT path, sha256 FROM files"))
            return dict(in_chunks(self.conn, SELECT_HASHES, paths))

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
                rows = in_chunks(self._reader, SELECT_FILES, list(dict.fromkeys(paths)))
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
        """Files, tokens, distinct n-grams and contexts per order, bytes on disk."""
        with self._read_lock, self._sqlite_errors():
            files, tokens = self._reader.execute(
                "SELECT count(*), coalesce(sum(tokens), 0) FROM files"
            ).fetchone()
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
