"""The stores' suffix indexes (codebase and user), current with each store.

Per store, over the token ids the store keeps for every file: its *base*, the index of a
snapshot of its files that ngram_db/suffix_store.py keeps in a file beside the store,
memory-mapped (index-repo writes it; so does this module's background thread when it is
missing or out of date: never a request); and a *delta* in RAM over the files added or
changed since. Each use looks at the store's change counter (SQLite's data_version: a commit
by this server, index-repo or any other process) and, when it moved, masks out the streams
whose file changed or was erased before answering (``Segment.mask``): forgetting from the
shell reaches the next request. The delta is rebuilt in the background (on first use of a
small store, at once), the previous indexes serving meanwhile.

lsp_server/stores/match_indexes.py's MatchIndexes holds one StoreIndexes beside the open documents'
indexes.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ngram_db import languages
from ngram_db.errors import NgramStoreError
from ngram_db.store import NgramStore
from ngram_db.suffix import MatchSet, SuffixIndex
from ngram_db.suffix_store import (
    BaseDamaged,
    FileId,
    Segment,
    base_path,
    build_segment,
    file_id,
    lasting,
    open_base,
    unlink_if_same,
    write_base,
)

log = logging.getLogger(__name__)

# An occurrence (in any of the memory's indexes) counts only when this many tokens follow it
# before its file's end. The requesting document's text before the cursor's line ends where
# the prompt does, up to the healed line break and indentation: matched there, the prompt
# would "continue" with a blank line (and an open copy of the prompt, with the healed
# characters only).
FOLLOW_AT_LEAST = 4
# A store's files that no index holds yet are indexed on the request path only at its first
# use, and only this many tokens (a new or small store: tens of ms); more, and every later
# refresh, in the background. A big store's first request answers without them.
INLINE_TOKENS = 100_000
# The base is rebuilt (its file written again) once the files changed since it was built hold
# more than this many tokens, or a quarter of it: the delta is rebuilt in RAM at every save
# (about 40 ms for 100k tokens), and masked-out text stays in the base file until then.
COMPACT_TOKENS = 200_000


class _StoreEntry:
    """A store's suffix indexes: the base (its file, mapped; in RAM for an in-memory store or
    where the file cannot be written) and the delta (in RAM: files added or changed since)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # syncing with the store, swapping segments
        self.base: Segment | None = None
        self.delta: Segment | None = None
        self.version: tuple[int, int] | None = None  # the store's change counter when synced
        self.table: dict[str, tuple[str, int]] = {}  # then: path -> (sha256, tokens)
        self.missing = 0  # tokens of the table's files that no alive stream holds
        self.missing_lasting = 0  # of them, in files that a base holds (suffix_store.lasting)
        self.on_disk: FileId | None = None  # the base file last looked at
        self.in_ram = False  # the base file cannot be written: the base lives in RAM
        self.queued = False  # a background refresh is queued (guarded by StoreIndexes._lock)

    def indexes(self) -> list[SuffixIndex]:
        """The delta first: of equally long matches, the newer text continues."""
        return [s.index for s in (self.delta, self.base) if s is not None and len(s.index)]


def _erased(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether files of ``old`` were erased in ``new``: a file gone, or accepted drafts gone
    with none come (a clear; a prune makes room for a new one, which is no erasure)."""
    gone = old.keys() - new.keys()
    return any(lasting(p) for p in gone) or bool(gone and new.keys() <= old.keys())


class StoreIndexes:
    """The stores' suffix indexes, each current with its store; thread-safe."""

    def __init__(self) -> None:
        self._stores = weakref.WeakKeyDictionary[NgramStore, _StoreEntry]()
        self._lock = threading.Lock()  # held briefly: indexes are built outside it
        # the stores' bases and deltas, on a thread of their own (never the documents')
        self._store_builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-indexes")
        self._erased = 0  # times a file was seen erased from a store (``erasures``)

    def store_index(self, store: NgramStore) -> MatchSet | None:
        """The store's indexes as one source, current with the store: a file erased or changed
        since they were built is masked out before this returns, whoever wrote the store.

        Files that no index holds yet are indexed in the background (the previous indexes
        serving meanwhile), or here at the store's first use when they are few
        (INLINE_TOKENS): a big store's index is never built on the request path.
        """
        with self._lock:
            entry = self._stores.get(store)
            if entry is None:
                entry = self._stores[store] = _StoreEntry()
        try:
            first = entry.version is None
            missing = self._sync_store(store, entry)
            if missing and first and missing <= INLINE_TOKENS:
                self._build_delta(store, entry)
            elif missing:
                self._schedule(store, entry)
        except NgramStoreError as err:  # a closed or broken store: serve without it
            log.warning("memory: store %s not read: %s", store.name, err)
            return None
        indexes = entry.indexes()
        return MatchSet(indexes) if indexes else None

    def store_segments(self, store: NgramStore) -> list[Segment]:
        """The store's segments (the delta first), current as ``store_index`` makes them:
        where next edits find the files that hold a token sequence
        (lsp_server/next_edits/workspace.py)."""
        if self.store_index(store) is None:
            return []
        with self._lock:
            entry = self._stores.get(store)
        if entry is None:
            return []
        return [s for s in (entry.delta, entry.base) if s is not None and len(s.index)]

    def _sync_store(self, store: NgramStore, entry: _StoreEntry) -> int:
        """Bring ``entry`` in line with the store: map a base file written since (drop one
        deleted), mask out the files changed or erased. Returns the tokens no index holds."""
        with entry.lock:
            moved, base = self._look_at_base(store, entry)
            version = store.change_counter()
            if version != entry.version or moved:
                table = store.file_table()  # read after the counter: at least as new
                if _erased(entry.table, table):
                    with self._lock:
                        self._erased += 1
                entry.table = table
                entry.version = version
                self._publish(entry, base if moved else entry.base, entry.delta)
            return entry.missing

    def _publish(self, entry: _StoreEntry, base: Segment | None, delta: Segment | None) -> None:
        """(Under entry.lock.) Mask the segments with the table, then serve them: a stream
        counts while the store holds its file with that content, and the base does not hold
        it too (a delta built before a new base). Lists the files that neither holds."""
        for old in (entry.base, entry.delta):  # still in the hands of requests in flight
            if old is not None and old is not base and old is not delta:
                old.mask(entry.table)
        if base is not None:
            base.mask(entry.table)
        held = base.alive_files() if base is not None else {}
        if delta is not None:
            delta.mask(entry.table, covered=held)
            held.update(delta.alive_files())
        entry.base, entry.delta = base, delta
        for segment in (base, delta):  # each stream's language, for the requests' filters
            if segment is not None and segment.index.languages is None:
                segment.index.languages = languages.codes(path for path, _ in segment.files)
        missing = [(p, n) for p, (sha, n) in entry.table.items() if held.get(p) != sha]
        entry.missing = sum(n for _, n in missing)
        entry.missing_lasting = sum(n for p, n in missing if lasting(p))

    def _look_at_base(self, store: NgramStore, entry: _StoreEntry) -> tuple[bool, Segment | None]:
        """(Under entry.lock.) The store's base file, mapped, when it was written or deleted
        since it was last looked at (index-repo, a forget, a compaction): (True, the new base
        or None); (False, None) when it is the same.

        Once a deleted file's segment is no longer served (and the last request that holds
        it is done), its private copy is unmapped and its blocks on disk freed (ngram_db/
        suffix_store.py): forgetting erases.
        """
        if store.path is None or entry.in_ram:
            return False, None
        path = base_path(store.path)
        identity = file_id(path)
        # A mapped base whose file changed unseen (SuffixIndex.failed: bytes changed in place
        # within the file system's timestamp granularity) is opened again, so checked again.
        failed = entry.base is not None and entry.base.index.failed is not None
        if identity == entry.on_disk and not failed:
            return False, None
        entry.on_disk = identity
        try:
            base = open_base(store.path, store.tokenizer.fingerprint, min_follow=FOLLOW_AT_LEAST)
        except (BaseDamaged, OSError) as err:  # rebuilt from the store by the next refresh
            log.warning("memory: %s; it is rebuilt", err)
            unlink_if_same(path, identity)
            entry.on_disk = None
            return True, None
        if base is not None:
            entry.on_disk = base.identity
        return True, base

    def _build_delta(self, store: NgramStore, entry: _StoreEntry) -> None:
        """Index the files that the base does not hold (alive) in RAM: the delta."""
        with entry.lock:
            base = entry.base
            held = base.alive_files() if base is not None else {}
            paths = [p for p, (sha, _) in entry.table.items() if held.get(p) != sha]
        files = store.file_records(paths)
        delta = build_segment(files, min_follow=FOLLOW_AT_LEAST) if files else None
        with entry.lock:
            if entry.base is not base:  # a new base meanwhile: the next refresh builds anew
                return
            # masked with the newest table: what was erased meanwhile stays out
            self._publish(entry, entry.base, delta)
        tokens = sum(len(f.ids) for f in files)
        log.info("memory: %s: %d changed files indexed (%d tokens)", store.name, len(files), tokens)

    def _wants_base(self, entry: _StoreEntry) -> bool:
        """Whether the base is to be (re)built: missing for a big store, or outgrown."""
        with entry.lock:
            base, missing = entry.base, entry.missing_lasting
            if base is None:
                return missing > INLINE_TOKENS
            stale = missing + base.dead_tokens()
            return stale > max(COMPACT_TOKENS, int(base.lengths.sum()) // 4)

    def _compact(self, store: NgramStore, entry: _StoreEntry) -> None:
        """Build the store's base: its file when it can be written, else in RAM."""
        if store.path is not None and not entry.in_ram:
            try:
                written = write_base(store)
            except OSError as err:  # a read-only folder, a full disk
                log.warning("memory: cannot write %s (%s); kept in RAM", base_path(store.path), err)
                entry.in_ram = True
            else:
                log.info(
                    "memory: %s: wrote %s", store.name, written or "nothing (erased meanwhile)"
                )
                return  # the next sync maps it
        files = [f for f in store.file_records() if lasting(f.path)]
        base = build_segment(files, min_follow=FOLLOW_AT_LEAST)
        with entry.lock:
            self._publish(entry, base, entry.delta)

    def _schedule(self, store: NgramStore, entry: _StoreEntry) -> None:
        """Refresh ``entry`` on the stores' builder thread (once, however often asked)."""
        with self._lock:
            if entry.queued:
                return
            entry.queued = True
        self._store_builder.submit(self._refresh, store, entry)

    def _refresh(self, store: NgramStore, entry: _StoreEntry) -> None:
        """In the background: the base rebuilt if it is missing or outgrown, then the delta."""
        with self._lock:
            entry.queued = False  # a change from now on queues another refresh
        try:
            if self._sync_store(store, entry) and self._wants_base(entry):
                self._compact(store, entry)
                self._sync_store(store, entry)
                if entry.base is None:
                    return  # erased while it was built: the next request asks again
            if self._sync_store(store, entry):
                self._build_delta(store, entry)
        except NgramStoreError as err:  # a closed store (settings changed): nothing to do
            log.info("memory: store %s not indexed: %s", store.name, err)
        except Exception:  # a bug: say it in the log, keep serving the previous indexes
            log.exception("memory: could not index %s", store.name)

    def stores_changed(self, forgotten: bool = False) -> None:
        """A store was written (save, accept, index run, forget): refresh its indexes now, in
        the background. (Each use checks the store's change counter anyway, so writes by other
        processes are seen too.)

        ``forgotten``: text was erased; the indexes mask it out here, at once, so that even a
        request in flight stops matching it (and a deleted base file is unmapped).
        """
        with self._lock:
            entries = list(self._stores.items())
        for store, entry in entries:
            if forgotten:
                try:
                    self._sync_store(store, entry)
                except NgramStoreError as err:
                    log.info("memory: store %s not read: %s", store.name, err)
            self._schedule(store, entry)

    def erasures(self, stores: Sequence[NgramStore]) -> tuple[int, int]:
        """A stamp that moves whenever a file was erased from one of ``stores`` (a forget, a
        save that stopped qualifying) by this server or any other process (``index-repo
        --forget``): each store is synced with its change counter first. Drafts shown before
        it moved may hold erased text (ahead.DraftsAhead drops them)."""
        for store in stores:
            with self._lock:
                entry = self._stores.get(store)
                if entry is None:
                    entry = self._stores[store] = _StoreEntry()
            try:
                self._sync_store(store, entry)
            except NgramStoreError as err:  # a closed or broken store: nothing erased here
                log.info("memory: store %s not read: %s", store.name, err)
        with self._lock:
            return id(self), self._erased

    def wait(self) -> None:
        """Block until the builds started so far, and those they queue, are done (tests,
        benchmarks)."""
        while True:
            self._store_builder.submit(lambda: None).result()
            with self._lock:
                if not any(entry.queued for entry in self._stores.values()):
                    return
