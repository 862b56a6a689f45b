"""A store's writes: exact per-file updates (the old ids subtracted, the new added, in one
``BEGIN IMMEDIATE`` transaction), renames, and forgetting (secure delete,
the WAL folded back, the suffix index dropped when it holds a forgotten file, and older
versions' leftovers beside the store deleted).

``StoreWrites`` is a part of ``ngram_db.store.NgramStore``, which sets the connections and locks
it uses.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import sqlite_utils

from ngram_db import keys as K
from ngram_db import suffix_store
from ngram_db.records import FileTokens, content_hash, pack_ids, path_key, unpack_ids
from ngram_db.store_files import drop_leftovers
from ngram_db.store_reads import StoreReads
from ngram_db.store_sql import (
    DELETE_EMPTY,
    ROWS_PER_INSERT,
    UPSERT,
    UPSERT_MANY,
    in_chunks,
)


class StoreWrites(StoreReads):
    """A store's writes and forgetting (a part of NgramStore)."""

    db: sqlite_utils.Database  # set by NgramStore.__init__: plain inserts

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
        return self.write([FileTokens(p, h, i) for (p, _, h), i in zip(todo, ids, strict=True)])

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
            self._write_locked([FileTokens(new_key, row[0], unpack_ids(row[1]))], [old_key])
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
        with self._lock, self._sqlite_errors():
            self.conn.execute("VACUUM")  # drop the freed pages from the file
        return int(files)

    @contextmanager
    def _erasing(self, paths: Sequence[str] | None = None) -> Iterator[None]:
        """Deletions overwrite the freed content, and the WAL is folded back at the end; the
        suffix index file is deleted if it holds one of ``paths`` (None: everything), and
        the files older versions left beside the store (store_files.LEFTOVERS) are deleted."""
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
                drop_leftovers(self.path)

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
        self.db.table("files").insert_all(
            ({"path": f.path, "sha256": f.sha256, "tokens": len(f.ids), "ids": pack_ids(f.ids)}
             for f in files),
            replace=True,
        )  # fmt: skip
        return len(files) + len(gone)

    def _apply(self, delta: K.Counts) -> None:
        """Add a delta to ``grams``; drop rows whose counts reach zero."""
        # Many rows per statement: the per-row cost of executemany dominates bulk indexing.
        flat = np.column_stack([delta.keys, delta.g, delta.c]).ravel().tolist()
        full = len(delta) - len(delta) % ROWS_PER_INSERT
        width = 3 * ROWS_PER_INSERT
        batches = (flat[i : i + width] for i in range(0, 3 * full, width))
        self.conn.executemany(UPSERT_MANY, batches)
        self.conn.executemany(UPSERT, (flat[i : i + 3] for i in range(3 * full, len(flat), 3)))
        shrinking = delta.keys[(delta.g < 0) | (delta.c < 0)].tolist()
        in_chunks(self.conn, DELETE_EMPTY, shrinking)

    def checkpoint(self) -> None:
        """Fold the WAL back into the database file (after a bulk index)."""
        with self._lock, self._sqlite_errors():
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
