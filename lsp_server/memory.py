"""The memory's suffix indexes: the stores' files and the documents open in the editor.

Superposed decoding looks up the longest suffix of each draft's context in everything the
user has (superposed/memory.py); this module keeps the indexes (ngram_db.suffix) current:

- per store (codebase and user), over the token ids the store keeps for every file: its
  *base*, the index of a snapshot of its files that ngram_db/suffix_store.py keeps in a file
  beside the store, memory-mapped (index-repo writes it; so does this module's background
  thread when it is missing or out of date: never a request); and a *delta* in RAM over the
  files added or changed since. Each use looks at the store's change counter (SQLite's
  data_version: a commit by this server, index-repo or any other process) and, when it moved,
  masks out the streams whose file changed or was erased before answering (``Segment.mask``):
  forgetting from the shell reaches the next request. The delta is rebuilt in the background
  (on first use of a small store, at once), the previous indexes serving meanwhile;
- one over the other open documents as the editor has them now (didOpen/didChange, not
  only saved text), rebuilt at request time when one of them changed;
- one over the requesting document without the cursor's line (else the text before the
  cursor would match itself and propose what already follows it), rebuilt when a line
  other than the cursor's changed: typing along one line reuses it.

A request's documents are indexed off the request path (``source_later``): from the
request's arrival, on a thread of their own, while the request waits out its debounce and
the engine prefills its prompt; its first lookup (after the prefill) waits for what is left.
The indexes are the ones ``source`` builds: the drafts are the same, only sooner.
A request's sources over these indexes (the stores' and the documents' in one, a
document's language first) are lsp_server/match_sources.py's.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from lsp_server.match_sources import PendingSource, match_set
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
from ngram_db.tokenizer import as_tokenizer
from superposed.ngram import MatchSource

log = logging.getLogger(__name__)

Select = Callable[[Mapping[str, str]], Mapping[str, str]]  # open documents -> those kept

# Characters of an open document indexed at most (before and after the cursor's line for
# the requesting one): a huge generated file would otherwise be tokenized at every change.
DOCUMENT_CHARS = 400_000
# An occurrence counts only when this many tokens follow it before its file's end. The
# requesting document's text before the cursor's line ends where the prompt does, up to the
# healed line break and indentation: matched there, the prompt would "continue" with a blank
# line (and an open copy of the prompt, with the healed characters only).
FOLLOW_AT_LEAST = 4
# The other open documents' index is rebuilt on the request path while they hold at most
# this many characters (a save or a switch of files is seen at once); beyond, in the
# background, the previous index serving meanwhile (an editor with many large files open
# rebuilt hundreds of thousands of tokens at every switch: bench/results/lsp_latency.md).
OTHERS_INLINE_CHARS = 200_000
# A store's files that no index holds yet are indexed on the request path only at its first
# use, and only this many tokens (a new or small store: tens of ms); more, and every later
# refresh, in the background. A big store's first request answers without them.
INLINE_TOKENS = 100_000
# The base is rebuilt (its file written again) once the files changed since it was built hold
# more than this many tokens, or a quarter of it: the delta is rebuilt in RAM at every save
# (about 40 ms for 100k tokens), and masked-out text stays in the base file until then.
COMPACT_TOKENS = 200_000


class _StoreMemory:
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
        self.queued = False  # a background refresh is queued (guarded by Memory._lock)

    def indexes(self) -> list[SuffixIndex]:
        """The delta first: of equally long matches, the newer text continues."""
        return [s.index for s in (self.delta, self.base) if s is not None and len(s.index)]


def _erased(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether files of ``old`` were erased in ``new``: a file gone, or accepted drafts gone
    with none come (a clear; a prune makes room for a new one, which is no erasure)."""
    gone = old.keys() - new.keys()
    return any(lasting(p) for p in gone) or bool(gone and new.keys() <= old.keys())


class Memory:
    """Suffix indexes over the stores' files and the open documents; thread-safe."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = as_tokenizer(tokenizer)
        self._stores = weakref.WeakKeyDictionary[NgramStore, _StoreMemory]()
        self._lock = threading.Lock()  # held briefly: indexes are built outside it
        self._builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory")
        # the stores' bases and deltas, so that a base's build never delays the documents'
        self._store_builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-store")
        # the requests' documents, indexed from each request's arrival (source_later)
        self._requests = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-request")
        self._documents: dict[str, tuple[str, np.ndarray]] = {}  # uri -> (text, ids)
        self._versions: dict[str, int] = {}  # uri -> changes seen (keys the others' index)
        self._changes = 0
        self._others: tuple[frozenset[tuple[str, int]], SuffixIndex | None] = (frozenset(), None)
        self._others_building: frozenset[tuple[str, int]] | None = None
        self._current: dict[str, tuple[tuple[int, int], SuffixIndex]] = {}
        self._erased = 0  # times a file was seen erased from a store (``erasures``)

    # -- stores ----------------------------------------------------------------------------

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
                entry = self._stores[store] = _StoreMemory()
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

    def _sync_store(self, store: NgramStore, entry: _StoreMemory) -> int:
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

    def _publish(self, entry: _StoreMemory, base: Segment | None, delta: Segment | None) -> None:
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

    def _look_at_base(self, store: NgramStore, entry: _StoreMemory) -> tuple[bool, Segment | None]:
        """(Under entry.lock.) The store's base file, mapped, when it was written or deleted
        since it was last looked at (index-repo, a forget, a compaction): (True, the new base
        or None); (False, None) when it is the same.

        Once a deleted file's segment is no longer served (and the last request that holds
        it is done), its pages are unmapped and its blocks on disk freed: forgetting erases.
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

    def _build_delta(self, store: NgramStore, entry: _StoreMemory) -> None:
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

    def _wants_base(self, entry: _StoreMemory) -> bool:
        """Whether the base is to be (re)built: missing for a big store, or outgrown."""
        with entry.lock:
            base, missing = entry.base, entry.missing_lasting
            if base is None:
                return missing > INLINE_TOKENS
            stale = missing + base.dead_tokens()
            return stale > max(COMPACT_TOKENS, int(base.lengths.sum()) // 4)

    def _compact(self, store: NgramStore, entry: _StoreMemory) -> None:
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

    def _schedule(self, store: NgramStore, entry: _StoreMemory) -> None:
        """Refresh ``entry`` on the stores' builder thread (once, however often asked)."""
        with self._lock:
            if entry.queued:
                return
            entry.queued = True
        self._store_builder.submit(self._refresh, store, entry)

    def _refresh(self, store: NgramStore, entry: _StoreMemory) -> None:
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
        it moved may hold erased text (ahead.Drafts drops them)."""
        for store in stores:
            with self._lock:
                entry = self._stores.get(store)
                if entry is None:
                    entry = self._stores[store] = _StoreMemory()
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
            self._builder.submit(lambda: None).result()
            with self._lock:
                if not any(entry.queued for entry in self._stores.values()):
                    return

    # -- open documents ----------------------------------------------------------------------

    def _ids(self, text: str) -> np.ndarray:
        return self._tokenizer.encode_batch([text])[0] if text else np.zeros(0, dtype=np.int64)

    def _sync(self, documents: Mapping[str, str]) -> None:
        """The open documents' texts as the editor has them now (from pygls' workspace,
        which didOpen/didChange keep current); closed ones are forgotten."""
        for uri in [u for u in self._documents if u not in documents]:
            del self._documents[uri]
            self._current.pop(uri, None)
            self._versions.pop(uri, None)
        for uri, text in documents.items():
            known = self._documents.get(uri)
            if known is None or known[0] != text:
                self._documents[uri] = (text, np.zeros(0, dtype=np.int64))
                self._changes += 1
                self._versions[uri] = self._changes

    def close(self, uri: str) -> None:
        """The document ``uri`` closed: its text, token ids and index go now, not at the next
        request (which may never come); the other documents' index that holds it is rebuilt
        without it in the background (it serves meanwhile, as it would until that request).
        Opening and closing 2,000 documents four times kept growing the resident set."""
        with self._lock:
            self._documents.pop(uri, None)
            self._versions.pop(uri, None)
            self._current.pop(uri, None)
            building = self._others_building
            if building is not None and any(u == uri for u, _ in building):
                self._others_building = None  # the build queued for it is skipped
            built, _ = self._others
            if all(u != uri for u, _ in built):
                return
            still = sorted(u for u, _ in built if u in self._documents)  # closed ones left
            key = frozenset((u, self._versions[u]) for u in still)
            if not key:  # no other document is left in it
                self._others, self._others_building = (frozenset(), None), None
                return
            snapshot = [(u, *self._documents[u]) for u in still]
            self._others_building = key
        self._builder.submit(self._build_others, key, snapshot)

    def held(self) -> dict[str, int]:
        """What the memory holds per open document, by kind (tests, stats)."""
        with self._lock:
            return {
                "documents": len(self._documents),
                "versions": len(self._versions),
                "current": len(self._current),
                "others": len(self._others[0]),
            }

    def _others_index(
        self, uri: str
    ) -> tuple[SuffixIndex | None, tuple[frozenset[tuple[str, int]], list[Any]] | None]:
        """One index over every open document but ``uri`` (under the lock): (index, None), or
        (None, (key, snapshot)) when the caller is to build it (outside the lock).

        Rebuilt by the caller when they changed and are small (or there is none yet); else in
        the background, the previous index serving unless it holds ``uri`` (which would match
        itself).
        """
        others = sorted(u for u in self._documents if u != uri)
        key = frozenset((u, self._versions[u]) for u in others)
        built, index = self._others
        if key == built:
            return index, None
        snapshot = [(u, *self._documents[u]) for u in others]
        if index is None or sum(len(text) for _, text, _ in snapshot) <= OTHERS_INLINE_CHARS:
            return None, (key, snapshot)
        if self._others_building != key:
            self._others_building = key
            self._builder.submit(self._build_others, key, snapshot)
        return (index if all(u != uri for u, _ in built) else None), None

    def _index_documents(self, snapshot: list[tuple[str, str, np.ndarray]]) -> SuffixIndex | None:
        """An index over (uri, text, ids) documents; ids are computed once per text."""
        streams = []
        for uri, text, ids in snapshot:
            if text and not len(ids):
                ids = self._ids(text[:DOCUMENT_CHARS])
                with self._lock:
                    if self._documents.get(uri, ("",))[0] is text:  # still that text: keep them
                        self._documents[uri] = (text, ids)
            streams.append(ids)
        if not streams:
            return None
        index = SuffixIndex(streams, min_follow=FOLLOW_AT_LEAST)
        index.languages = languages.codes(uri for uri, _, _ in snapshot)
        return index

    def _build_others(
        self, key: frozenset[tuple[str, int]], snapshot: list[tuple[str, str, np.ndarray]]
    ) -> None:
        """On the builder thread: the other open documents' index for ``key``.

        Skipped when a newer set of documents was asked for since (the editor switched files
        again): builds queue one after another, and each stale one would index every open
        document again, taking a core and the GIL from the requests for nothing.
        """
        with self._lock:
            if self._others_building != key:
                return
        try:
            index = self._index_documents(snapshot)
            with self._lock:
                if self._others_building == key:  # else a newer set (a close) replaces it
                    self._others = (key, index)
        except Exception:  # serve the previous index; say why in the log
            log.exception("memory: could not index the open documents")
        finally:
            with self._lock:
                if self._others_building == key:
                    self._others_building = None

    @staticmethod
    def _current_texts(text: str, offset: int) -> tuple[str, str]:
        """The requesting document's text before the cursor's line, and after it."""
        start = text.rfind("\n", 0, offset) + 1
        end = text.find("\n", offset)
        before = text[max(0, start - DOCUMENT_CHARS) : start]
        after = text[end + 1 : end + 1 + DOCUMENT_CHARS // 4] if end >= 0 else ""
        return before, after

    # -- a request's source ----------------------------------------------------------------------

    def source(
        self,
        uri: str,
        offset: int,
        documents: Mapping[str, str],
        stores: Sequence[NgramStore] = (),
        shared: Select | None = None,
    ) -> MatchSource:
        """Everything the request at ``offset`` in ``uri`` can match: the stores' files, the
        open ``documents`` (uri -> text, ``uri``'s among them; of the others those that
        ``shared`` keeps) as they are now; the files of ``uri``'s language first, never
        across the code/prose line (``ngram_db.languages``)."""
        indexes: list[SuffixIndex | MatchSet | None] = [
            self.store_index(s) for s in stores if s is not None
        ]
        found = [*indexes, *self._document_indexes(uri, offset, documents, shared)]
        return match_set(found, languages.language_of(uri))

    def _document_indexes(
        self, uri: str, offset: int, documents: Mapping[str, str], shared: Select | None = None
    ) -> list[SuffixIndex | None]:
        """The other open documents' index and the requesting one's (see ``source``).

        The indexes are built outside the lock: the engine thread takes it for the stores'
        indexes (PendingSource.with_stores) while this runs on the requests' thread.
        ``shared``: the documents that others may copy from (lsp_server/shareable.py); the
        requesting one is indexed for itself whatever it says.
        """
        if shared is not None:
            own = {uri: documents[uri]} if uri in documents else {}
            documents = {**shared(documents), **own}
        before, after = self._current_texts(documents.get(uri, ""), offset)
        key = (hash(before), hash(after))
        with self._lock:
            self._sync(documents)
            others, inline = self._others_index(uri)
            cached = self._current.get(uri)
        if inline is not None:  # the others changed and are small (or none is built yet)
            others = self._index_documents(inline[1])
            with self._lock:
                self._others = (inline[0], others)
        if cached is None or cached[0] != key:  # a line other than the cursor's changed
            streams = [self._ids(before), self._ids(after)]
            cached = (key, SuffixIndex(streams, min_follow=FOLLOW_AT_LEAST))
            with self._lock:
                if uri in self._documents:  # still open
                    self._current[uri] = cached
        return [others, cached[1]]

    def source_later(
        self, uri: str, offset: int, documents: Mapping[str, str], shared: Select | None = None
    ) -> PendingSource:
        """``source``, with the documents indexed from now on a thread of their own
        (``shared``: those that other documents may copy from, see ``_document_indexes``).

        Call it when the request arrives; give the stores on the engine thread
        (``PendingSource.with_stores``). Its first ``match`` waits for the documents' indexes.
        """
        future = self._requests.submit(self._document_indexes, uri, offset, documents, shared)
        return PendingSource(self, future, languages.language_of(uri))
