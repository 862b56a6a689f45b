"""The memory's suffix indexes: the stores' files and the documents open in the editor.

Superposed decoding looks up the longest suffix of each draft's context in everything the
user has (engine/memory.py); this module keeps the indexes (ngram_db.suffix) current:

- one per store (codebase and user), over the token ids the store keeps for every file;
  built at first use and rebuilt on a background thread after the store changes (a save,
  an accepted draft, an index run); until a rebuild is done the previous one serves;
- one over the other open documents as the editor has them now (didOpen/didChange, not
  only saved text), rebuilt at request time when one of them changed;
- one over the requesting document without the cursor's line (else the text before the
  cursor would match itself and propose what already follows it), rebuilt when a line
  other than the cursor's changed: typing along one line reuses it.

A request's documents are indexed off the request path (``source_later``): from the
request's arrival, on a thread of their own, while the request waits out its debounce and
the engine prefills its prompt; its first lookup (after the prefill) waits for what is left.
The indexes are the ones ``source`` builds: the drafts are the same, only sooner.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from lsp_server.engine.ngram import Match, MatchSource
from lsp_server.stores import Stores, root_for
from ngram_db.store import NgramStore
from ngram_db.suffix import MatchSet, SuffixIndex
from ngram_db.tokenizer import as_tokenizer

log = logging.getLogger(__name__)

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


class _StoreIndex:
    """A store's suffix index, rebuilt in the background when the store changed."""

    def __init__(self) -> None:
        self.index: SuffixIndex | None = None
        self.stale = True
        self.building = False


class Memory:
    """Suffix indexes over the stores' files and the open documents; thread-safe."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = as_tokenizer(tokenizer)
        self._stores = weakref.WeakKeyDictionary[NgramStore, _StoreIndex]()
        self._lock = threading.Lock()  # held briefly: indexes are built outside it
        self._builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory")
        # the requests' documents, indexed from each request's arrival (source_later)
        self._requests = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-request")
        self._documents: dict[str, tuple[str, np.ndarray]] = {}  # uri -> (text, ids)
        self._versions: dict[str, int] = {}  # uri -> changes seen (keys the others' index)
        self._changes = 0
        self._others: tuple[frozenset[tuple[str, int]], SuffixIndex | None] = (frozenset(), None)
        self._others_building: frozenset[tuple[str, int]] | None = None
        self._current: dict[str, tuple[tuple[int, int], SuffixIndex]] = {}

    # -- stores ----------------------------------------------------------------------------

    def store_index(self, store: NgramStore) -> SuffixIndex | None:
        """The store's current index; starts a rebuild in the background when the store
        changed since. The first build runs here, in the caller's thread (the engine's): a
        first request waits for it (about a second per million tokens) rather than decoding
        without the codebase."""
        with self._lock:
            entry = self._stores.get(store)
            first = entry is None
            if entry is None:
                entry = self._stores[store] = _StoreIndex()
            if entry.stale and not entry.building:
                entry.stale, entry.building = False, True
                if not first:
                    self._builder.submit(self._build, store, entry)
        if first:
            self._build(store, entry)
        return entry.index

    def _build(self, store: NgramStore, entry: _StoreIndex) -> None:
        try:
            streams = list(store.file_streams().values())
            entry.index = SuffixIndex(streams, min_follow=FOLLOW_AT_LEAST)
            log.info("memory: indexed %d files, %d tokens", len(streams), len(entry.index))
        except Exception:  # a closed or broken store: serve without it, say why in the log
            log.exception("memory: could not index a store")
        finally:
            with self._lock:
                entry.building = False

    def stores_changed(self, forgotten: bool = False) -> None:
        """A store was written (save, accept, index run): rebuild its index on next use.

        ``forgotten``: text was erased from a store; its indexes are dropped at once, so the
        next request rebuilds from the store as it is now instead of matching the old text.
        """
        with self._lock:
            if forgotten:
                self._stores.clear()
            for entry in self._stores.values():
                entry.stale = True

    def wait(self) -> None:
        """Block until the builds started so far are done (tests, benchmarks)."""
        self._builder.submit(lambda: None).result()

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
        return SuffixIndex(streams, min_follow=FOLLOW_AT_LEAST) if streams else None

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
    ) -> MatchSource:
        """Everything the request at ``offset`` in ``uri`` can match: the stores' files, the
        open ``documents`` (uri -> text, ``uri``'s among them) as they are now."""
        indexes: list[SuffixIndex | None] = [self.store_index(s) for s in stores if s is not None]
        return _match_set([*indexes, *self._document_indexes(uri, offset, documents)])

    def _document_indexes(
        self, uri: str, offset: int, documents: Mapping[str, str]
    ) -> list[SuffixIndex | None]:
        """The other open documents' index and the requesting one's (see ``source``).

        The indexes are built outside the lock: the engine thread takes it for the stores'
        indexes (PendingSource.with_stores) while this runs on the requests' thread.
        """
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

    def source_later(self, uri: str, offset: int, documents: Mapping[str, str]) -> PendingSource:
        """``source``, with the documents indexed from now on a thread of their own.

        Call it when the request arrives; give the stores on the engine thread
        (``PendingSource.with_stores``). Its first ``match`` waits for the documents' indexes.
        """
        future = self._requests.submit(self._document_indexes, uri, offset, documents)
        return PendingSource(self, future)


class PendingSource:
    """A request's documents being indexed in the background (Memory.source_later)."""

    def __init__(self, memory: Memory, documents: Future[list[SuffixIndex | None]]) -> None:
        self.memory = memory
        self.documents = documents

    def with_stores(self, stores: Sequence[NgramStore] = ()) -> MatchSource:
        """The request's source: the stores' indexes now (on the caller's thread), the
        documents' when first matched."""
        indexes = [self.memory.store_index(s) for s in stores if s is not None]
        return _Deferred(indexes, self.documents)


class _Deferred:
    """A MatchSet of the stores' indexes and the documents' ones, once they are built."""

    def __init__(self, stores: list[SuffixIndex | None], documents: Future[Any]) -> None:
        self._stores, self._documents = stores, documents
        self._set: MatchSet | None = None

    def match(self, context: Sequence[int], follow: int = 32, others: int = 0) -> Match | None:
        if self._set is None:
            try:
                documents = self._documents.result()
            except Exception:  # serve the stores only; say why in the log
                log.exception("memory: could not index the open documents")
                documents = []
            self._set = _match_set([*self._stores, *documents])
        return self._set.match(context, follow, others)


def _match_set(indexes: Sequence[SuffixIndex | None]) -> MatchSet:
    """The non-empty indexes, in order (the first of equally long matches continues)."""
    return MatchSet([i for i in indexes if i is not None and len(i)])


def store_list(stores: Stores, path: Path | None, roots: Sequence[Path]) -> list[NgramStore]:
    """The stores a request in ``path`` matches against: its codebase's (if it has one on
    disk) and the user store. Raises NgramStoreError when one cannot be opened."""
    root = root_for(path, roots) if path is not None else (roots[0] if roots else None)
    codebase = stores.codebase(root, create=False) if root is not None else None
    return [s for s in (codebase, stores.user()) if s is not None]
