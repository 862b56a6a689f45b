"""The ``sharedIndexes`` setting: an organisation's read-only infini-gram indexes, queried as
more MatchSources of the memory beside the stores and the open documents.

Each folder is built by ``index-repo --engine infini-gram --out DIR`` (ngram_db/infini.py), in
CI, and reaches the developer's disk by a read-only mount or a sync. It is opened once per
(folders, tokenizer), memory-mapped by infini-gram's engine (ngram_db/infini_source.py).
A folder that is missing, built with another tokenizer or damaged is left out and reported
once (until the setting or the model changes); the others serve. Nothing here raises into a
request.

A request asks its memory once per draft row and step (17 to 119 times, measured), and an
infini-gram lookup takes tens of milliseconds (46 ms p50 on a 21-shard index), the in-process
suffix arrays' under one: unbounded, a shared index made requests 2.55x slower
(docs/scale.md). So each request sees the indexes through ``_Budgeted``
(``SharedIndexes.for_request``): the setting ``sharedBudgetMs`` bounds the time its shared
lookups spend together. Their matches weigh ``sharedWeight`` times a store match's in the
memory's mix (``Match.weight``, superposed.memory.weight): an organisation's code is evidence
about the user's next line, but weaker than the user's own; 0 leaves the indexes unasked.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence, Sized
from dataclasses import replace

from ngram_db.infini_check import InfiniIndexError
from ngram_db.infini_source import InfiniSource
from ngram_db.suffix import MatchSet
from superposed.ngram import Match, MatchSource

log = logging.getLogger(__name__)

Report = Callable[[str], None]


class SharedIndexes:
    """The indexes the setting names, opened once; a bad one reported once and left out."""

    def __init__(self, report: Report | None = None) -> None:
        self._report = report or (lambda message: log.warning("%s", message))
        self._lock = threading.Lock()
        self._key: tuple[tuple[str, ...], str] | None = None
        self._sources: list[_FailSafeIndex] = []
        self._closed = False  # close() was called: nothing opens again

    def sources(self, folders: Sequence[str], fingerprint: str) -> list[MatchSource]:
        """The usable indexes among ``folders`` for a model whose tokenizer has
        ``fingerprint`` (opened at the first call after either changed)."""
        key = (tuple(folders), fingerprint)
        with self._lock:
            if key == self._key or self._closed:
                return list(self._sources)
            self._close_sources()  # the setting or the model changed: their processes end
            opened: list[_FailSafeIndex] = []
            for folder in key[0]:
                try:
                    source = InfiniSource([folder], fingerprint)
                except Exception as err:  # any failure: leave it out, say why
                    self._report(f"shared index not used: {err}")
                    continue
                opened.append(_FailSafeIndex(source, folder, self._report))
            self._key, self._sources = key, opened
            return list(opened)

    def close(self) -> None:
        """Stop every opened index's engine process (the stores are being closed)."""
        with self._lock:
            self._close_sources()
            self._closed = True

    def _close_sources(self) -> None:
        for source in self._sources:
            source.close()
        self._sources = []

    def for_request(
        self,
        folders: Sequence[str],
        fingerprint: str,
        budget_ms: int,
        clock: Callable[[], float] = time.perf_counter,
        weight: float = 1.0,
    ) -> list[MatchSource]:
        """One request's view of the usable indexes: one source that spends at most about
        ``budget_ms`` on lookups and weighs its matches ``weight`` (``_Budgeted``); [] when
        none, or when ``weight`` is 0 (a match that cannot mix or propose is not looked up)."""
        if weight <= 0.0:
            return []
        sources = self.sources(folders, fingerprint)
        return [_Budgeted(sources, budget_ms / 1000, clock, weight)] if sources else []


class _Budgeted:
    """The shared indexes as one request sees them: within a time budget.

    Before each lookup the time spent so far is compared with the budget: once it is spent,
    the indexes answer None for the rest of the request (a lookup already running finishes:
    the engine's C++ cannot be interrupted, so a request may overrun by one lookup). The
    stores and the open documents are not in here, so they keep matching: they answer in
    microseconds.

    No cache of answers: today's decoding asks no context twice in a request (0 repeats in
    739 lookups, bench/results/shared_requests.json: the rows' contexts differ from the first
    step on). A context that extends the previous one by the predicted token is looked up
    again, not extended: the next tokens' counts after the longer suffix need the index
    (exact only for a suffix seen once, which ``Match`` does not say).

    A match found carries ``weight`` (sharedWeight). Where a store or an open document
    matches as long, the memory's MatchSet adds the counts into a match of weight 1.0: the
    user's own code backs that length (ngram_db.suffix.MatchSet builds it without a weight).
    """

    def __init__(
        self,
        sources: Sequence[MatchSource],
        budget_s: float,
        clock: Callable[[], float],
        weight: float = 1.0,
    ) -> None:
        self.sources, self.budget_s, self._clock = list(sources), budget_s, clock
        self.weight = weight
        self._set = MatchSet(self.sources)
        self._lock = threading.Lock()  # a request's rows may ask from more than one thread
        self.spent_s = 0.0
        self.lookups = self.skipped = 0  # for logs and benchmarks

    def __len__(self) -> int:
        return sum(len(s) if isinstance(s, Sized) else 0 for s in self.sources)

    def match(self, context: Sequence[int], follow: int = 32, others: int = 0) -> Match | None:
        with self._lock:
            if self.spent_s >= self.budget_s:
                self.skipped += 1
                return None
        start = self._clock()
        found = self._set.match(context, follow, others)
        with self._lock:
            self.spent_s += self._clock() - start
            self.lookups += 1
        if found is None or self.weight == 1.0:
            return found
        return replace(found, weight=self.weight * found.weight)


class _FailSafeIndex:
    """An index whose lookups never raise into a request: a failure is reported once, and
    the index answers nothing from then on."""

    def __init__(self, source: InfiniSource, folder: str, report: Report) -> None:
        self.source, self.folder, self._report = source, folder, report
        self.failed = False

    def __len__(self) -> int:
        return len(self.source)

    def close(self) -> None:
        self.source.close()

    def match(self, context: Sequence[int], follow: int = 32, others: int = 0) -> Match | None:
        if self.failed:
            return None
        try:
            return self.source.match(context, follow, others)
        except InfiniIndexError as err:  # its engine's process died or hung: it says why
            self.failed = True
            self._report(str(err))
            return None
        except Exception as err:
            self.failed = True
            log.exception("shared index %s failed", self.folder)
            self._report(f"shared index {self.folder} failed and is left out: {err!r}")
            return None
