"""A request's match sources over the memory's indexes (lsp_server/stores/match_indexes.py): the
stores'
and the documents' indexes in one ``MatchSource``, the documents' waited for at the first
match (``PendingSource``), and a document's language first (``match_set``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any, Protocol

import numpy as np

from ngram_db import languages
from ngram_db.store import NgramStore
from ngram_db.suffix import MatchSet, SuffixIndex
from superposed.ngram import Match, MatchSource

log = logging.getLogger(__name__)


class StoreIndexSource(Protocol):
    """What a pending source asks of the stores' indexes (lsp_server/stores/store_indexes.py)."""

    def store_index(self, store: NgramStore) -> MatchSet | None: ...


class PendingSource:
    """A request's documents being indexed in the background (MatchIndexes.source_later)."""

    def __init__(
        self,
        indexes: StoreIndexSource,
        documents: Future[list[SuffixIndex | None]],
        language: str | None = None,
    ) -> None:
        self.indexes = indexes
        self.documents = documents
        self.language = language  # the requesting document's (None: unknown, no filter)

    def with_stores(
        self, stores: Sequence[NgramStore] = (), shared: Sequence[MatchSource] = ()
    ) -> MatchSource:
        """The request's source: the stores' indexes now (on the caller's thread), and the
        ``shared`` indexes (Stores.shared), the documents' when first matched."""
        indexes = [self.indexes.store_index(s) for s in stores if s is not None]
        if shared:  # after the stores: of equally long matches, the own code continues
            indexes.append(MatchSet(list(shared)))
        return _Deferred(indexes, self.documents, self.language)


class _Deferred:
    """A MatchSet of the stores' indexes and the documents' ones, once they are built."""

    def __init__(
        self, stores: list[MatchSet | None], documents: Future[Any], language: str | None = None
    ) -> None:
        self._stores, self._documents, self._language = stores, documents, language
        self._set: MatchSource | None = None

    def match(self, context: Sequence[int], follow: int = 32, others: int = 0) -> Match | None:
        if self._set is None:
            try:
                documents = self._documents.result()
            except Exception:  # serve the stores only; say why in the log
                log.exception("memory: could not index the open documents")
                documents = []
            self._set = match_set([*self._stores, *documents], self._language)
        return self._set.match(context, follow, others)


class _Filtered:
    """An index seen through a request's language: its occurrences in some streams only."""

    def __init__(self, index: SuffixIndex, streams: np.ndarray) -> None:
        self.index, self.streams = index, streams  # streams: [S] bool

    def match(self, context: Sequence[int], follow: int = 32, others: int = 0) -> Match | None:
        return self.index.match(context, follow, others, streams=self.streams)


class _Tiered:
    """The first source's match; the second's only when the first has none."""

    def __init__(self, first: MatchSet, then: MatchSet) -> None:
        self.first, self.then = first, then

    def match(self, context: Sequence[int], follow: int = 32, others: int = 0) -> Match | None:
        found = self.first.match(context, follow, others)
        return found if found is not None else self.then.match(context, follow, others)


def match_set(
    indexes: Sequence[SuffixIndex | MatchSet | None], language: str | None = None
) -> MatchSource:
    """The non-empty indexes, in order (the first of equally long matches continues); a
    store's (a MatchSet of its delta and base) in its own order.

    For a document in ``language``: the streams of that language (and of none known) first,
    the other languages of its kind only where those match nothing, other kinds never
    (``ngram_db.languages.tiers``); an index whose streams' languages are not known (the
    requesting document's own) is in the first tier whole.
    """
    flat: list[Any] = []
    for index in indexes:
        if isinstance(index, MatchSet):
            flat.extend(index.sources)
        elif index is not None and len(index):
            flat.append(index)
    first: list[Any] = []
    then: list[Any] = []
    for index in flat:
        known = getattr(index, "languages", None)
        cut = languages.tiers(known, language) if known is not None else None
        if cut is None:
            first.append(index)
            continue
        own, near = cut
        if own.all():
            first.append(index)
        elif own.any():
            first.append(_Filtered(index, own))
        if near.any():
            then.append(_Filtered(index, near))
    return _Tiered(MatchSet(first), MatchSet(then)) if then else MatchSet(first)
