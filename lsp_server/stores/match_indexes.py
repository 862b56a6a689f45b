"""The memory's suffix indexes: the stores' files and the documents open in the editor.

Superposed decoding looks up the longest suffix of each draft's context in everything the
user has (superposed/memory.py); this module keeps the indexes (ngram_db.suffix) current:

- per store (codebase and user), a base and a delta current with the store's change counter:
  lsp_server/stores/store_indexes.py's StoreIndexes, ``MatchIndexes.stores``;
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
document's language first) are lsp_server/stores/match_sources.py's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from lsp_server.stores.match_sources import PendingSource, match_set
from lsp_server.stores.store_indexes import FOLLOW_AT_LEAST, StoreIndexes
from ngram_db import languages
from ngram_db.store import NgramStore
from ngram_db.suffix import MatchSet, SuffixIndex
from ngram_db.tokenizer import as_tokenizer
from superposed.ngram import MatchSource

log = logging.getLogger(__name__)

Select = Callable[[Mapping[str, str]], Mapping[str, str]]  # open documents -> those kept

# Characters of an open document indexed at most (before and after the cursor's line for
# the requesting one): a huge generated file would otherwise be tokenized at every change.
DOCUMENT_CHARS = 400_000
# The other open documents' index is rebuilt on the request path while they hold at most
# this many characters (a save or a switch of files is seen at once); beyond, in the
# background, the previous index serving meanwhile (an editor with many large files open
# rebuilt hundreds of thousands of tokens at every switch: bench/results/lsp_latency.md).
OTHERS_INLINE_CHARS = 200_000


class MatchIndexes:
    """Suffix indexes over the stores' files and the open documents; thread-safe."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = as_tokenizer(tokenizer)
        self.stores = StoreIndexes()  # the stores' bases and deltas
        self._lock = threading.Lock()  # held briefly: indexes are built outside it
        self._builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="match-indexes")
        # the requests' documents, indexed from each request's arrival (source_later)
        self._requests = ThreadPoolExecutor(max_workers=1, thread_name_prefix="match-request")
        self._documents: dict[str, tuple[str, np.ndarray]] = {}  # uri -> (text, ids)
        self._versions: dict[str, int] = {}  # uri -> changes seen (keys the others' index)
        self._changes = 0
        self._others: tuple[frozenset[tuple[str, int]], SuffixIndex | None] = (frozenset(), None)
        self._others_building: frozenset[tuple[str, int]] | None = None
        self._current: dict[str, tuple[tuple[int, int], SuffixIndex]] = {}

    def wait(self) -> None:
        """Block until the builds started so far, and those they queue, are done (tests,
        benchmarks)."""
        self.stores.wait()
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
            self.stores.store_index(s) for s in stores if s is not None
        ]
        found = [*indexes, *self._document_indexes(uri, offset, documents, shared)]
        return match_set(found, languages.language_of(uri))

    def _document_indexes(
        self, uri: str, offset: int, documents: Mapping[str, str], shared: Select | None = None
    ) -> list[SuffixIndex | None]:
        """The other open documents' index and the requesting one's (see ``source``).

        The indexes are built outside the lock: the builder thread and a ``close`` take it
        while this runs on the requests' thread (the stores' indexes, which the engine thread
        reads meanwhile, PendingSource.with_stores, have a lock of their own).
        ``shared``: the documents that others may copy from
        (lsp_server/stores/shareable_documents.py); the
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
        return PendingSource(self.stores, future, languages.language_of(uri))
