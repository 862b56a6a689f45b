"""Longest-suffix matches over token streams: an n-gram of unbounded order (a MatchSource).

``SuffixIndex`` holds several token streams (files) joined by separators and a suffix array
of the REVERSED stream. Reading the text before the cursor backwards, each further token of
context narrows a contiguous range of that array, so the longest suffix of a context that
occurs in the streams is found token by token: a binary search while the range is large, a
vectorised one once it is small, a direct comparison once one occurrence is left. The tokens
that followed the occurrences are the match's continuations.

The suffix array comes from libdivsufsort (``suffix_array``, through pydivsufsort): 1.0 s for
3.8M tokens of Python, where the numpy prefix doubling used before took 32 s (repeated code
needs many doubling rounds). A store's index is built when the store is written and kept on
disk, memory-mapped (ngram_db/suffix_store.py): ``SuffixArrays`` is what it holds.
"""

from __future__ import annotations

import bisect
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from pydivsufsort import divsufsort

from superposed.ngram import Match

_SEPARATOR = -1  # between streams: never equal to a token id, so no match crosses it
_VECTOR_RANGE = 4096  # narrow ranges at most this long with numpy, longer ones by bisection
# Ranges at most this long are compared with the rest of the context at once (every depth in
# one numpy pass) instead of narrowed depth by depth: text open twice (a file and its copy)
# left a few occurrences that narrowing followed for all 256 tokens of context, 1.1 ms a
# lookup instead of 0.05 (several per decoding step).
_DIRECT_RANGE = 64
_MAX_OCCURRENCES = 64  # occurrences whose next tokens are counted (the most recent ones)

log = logging.getLogger(__name__)
# What reading a mapped file's changed bytes as positions raises (numpy's bounds checks).
_FAULTS = (IndexError, ValueError, OverflowError)


class Backing(Protocol):
    """The file that an index's arrays are mapped from (ngram_db.suffix_store.MappedBase)."""

    max_token: int  # the largest token id the file held when it was checked

    def intact(self) -> bool:
        """Whether the file still holds what was checked (asked before each lookup)."""
        ...


def suffix_array(values: np.ndarray) -> np.ndarray:
    """Start positions of the suffixes of ``values`` (non-negative ints), in sorted order.

    A suffix that ends sorts before every suffix it is a proper prefix of. pydivsufsort sorts
    an integer array as the bytes of its big-endian values (2 bytes a token for a vocabulary
    under 65,536) and keeps the aligned positions: int32 below 2^31 bytes.
    """
    if len(values) == 0:
        return np.zeros(0, dtype=np.int32)
    return np.asarray(divsufsort(np.ascontiguousarray(values)))


@dataclass(frozen=True)
class SuffixArrays:
    """What a SuffixIndex searches: token streams joined, and the suffix array of their reverse.

    In RAM (``build``) or memory-mapped from a store's base file (ngram_db/suffix_store.py).
    """

    tokens: np.ndarray  # [N] int32: the streams, each followed by a separator
    sa: np.ndarray  # [N] int32 (int64 from 2^31): sorted suffixes of tokens[::-1] + 1
    ends: np.ndarray  # [S] int64: the position of each stream's separator

    @classmethod
    def build(cls, streams: Sequence[Sequence[int] | np.ndarray]) -> SuffixArrays:
        lengths = np.array([len(ids) for ids in streams], dtype=np.int64)  # [S]
        ends = np.cumsum(lengths + 1) - 1  # [S]
        tokens = np.full(int(lengths.sum()) + len(lengths), _SEPARATOR, dtype=np.int32)
        for ids, end, length in zip(streams, ends.tolist(), lengths.tolist(), strict=True):
            tokens[end - length : end] = np.asarray(ids)
        return cls(tokens, suffix_array(tokens[::-1] + 1), ends)  # separators -> 0


class SuffixIndex:
    """Token streams (each file's ids) with a suffix array of their reversed concatenation."""

    def __init__(
        self,
        streams: Sequence[Sequence[int] | np.ndarray] | SuffixArrays,
        max_context: int = 256,
        vector_range: int = _VECTOR_RANGE,
        min_follow: int = 1,
        direct_range: int = _DIRECT_RANGE,
        backing: Backing | None = None,
    ) -> None:
        """Index ``streams`` (each file's ids), or search ``SuffixArrays`` built before
        (``backing``: the file they are mapped from, which may change under the map)."""
        arrays = streams if isinstance(streams, SuffixArrays) else SuffixArrays.build(streams)
        self.tokens = arrays.tokens  # [N] the streams, each followed by a separator
        self.reversed = arrays.tokens[::-1]  # [N] a view: a mapped file's pages stay on disk
        self.sa = arrays.sa  # [N] separators sort first (0), tokens as id + 1
        self.max_context = max_context  # context tokens compared at most
        self.vector_range = vector_range  # ranges longer than this narrow by bisection
        self.direct_range = direct_range  # ranges this short finish in one comparison
        self._n = len(arrays.tokens)
        self._ends = arrays.ends  # [S] each stream's end
        # An occurrence counts when this many tokens follow it in its stream (1: any).
        self.min_follow = min_follow
        # [S] bool: the streams whose occurrences count (None: all). A store's files changed
        # or forgotten since its index was built are masked out at once, the index kept.
        self.alive: np.ndarray | None = None
        # [S] int16: each stream's language (ngram_db.languages.codes); None: not known. A
        # request matches the streams of its document's language (``match(streams=...)``).
        self.languages: np.ndarray | None = None
        self.backing = backing
        self.failed: str | None = None  # why the mapped file is no longer read (then no match)

    def __len__(self) -> int:
        return self._n

    def _usable(self) -> bool:
        """Whether the arrays can be read now: in RAM, or mapped from a file that still holds
        what was checked. Asked before touching a page: a read past the end of a file that
        shrank under the map raises SIGBUS, which no Python code can catch."""
        if self.backing is None:
            return True
        if self.failed is None and not self.backing.intact():
            self._fail("the file changed on disk since it was checked")
        return self.failed is None

    def _fail(self, why: str) -> None:
        if self.failed is None:
            self.failed = why
            log.warning("suffix index %s left out: %s", getattr(self.backing, "path", "?"), why)

    def _checked(self, found: Match | None) -> Match | None:
        """``found``, unless a mapped file's changed bytes made up a token it never held."""
        if found is None or self.backing is None:
            return found
        limit = self.backing.max_token
        proposed = [*found.next_counts, *found.continuation, *(t for o in found.others for t in o)]
        if any(not 0 <= t <= limit for t in proposed):
            self._fail("a lookup read a token out of range (bytes changed in place)")
            return None
        return found

    def _value(self, j: int, depth: int) -> int:
        """The symbol at ``depth`` of the j-th sorted suffix; -2 past the end (sorts first)."""
        pos = int(self.sa[j]) + depth
        return int(self.reversed[pos]) if pos < self._n else -2

    def _narrow(self, lo: int, hi: int, depth: int, token: int) -> tuple[int, int]:
        """The sub-range of sorted suffixes [lo, hi) whose symbol at ``depth`` is ``token``."""
        if hi - lo > self.vector_range:
            span = range(lo, hi)

            def symbol(j: int) -> int:
                return self._value(j, depth)

            left = bisect.bisect_left(span, token, key=symbol)
            right = bisect.bisect_right(span, token, lo=left, key=symbol)
            return lo + left, lo + right
        pos = self.sa[lo:hi] + depth
        column = np.where(pos < self._n, self.reversed[np.minimum(pos, self._n - 1)], -2)
        left, right = np.searchsorted(column, [token, token + 1])
        return lo + int(left), lo + int(right)

    def _ranges(self, context: Sequence[int]) -> tuple[list[tuple[int, int]], int]:
        """(ranges, length): ranges[i] is the range [lo, hi) of sorted suffixes that begin
        with the last i + 1 tokens of ``context`` reversed; ``length`` is the longest match,
        which can exceed len(ranges) once one occurrence is left (its range serves them all).
        """
        query = np.asarray(context[-self.max_context :], dtype=np.int64)[::-1]
        ranges: list[tuple[int, int]] = []
        lo, hi, depth = 0, self._n, 0
        while depth < len(query):
            new_lo, new_hi = self._narrow(lo, hi, depth, int(query[depth]))
            if new_lo == new_hi:
                break
            lo, hi, depth = new_lo, new_hi, depth + 1
            ranges.append((lo, hi))
            if hi - lo == 1:  # one occurrence left: compare the rest directly
                start = int(self.sa[lo])
                rest = self.reversed[start + depth : start + len(query)]
                same = rest == query[depth : depth + len(rest)]
                depth += len(rest) if same.all() else int(np.argmin(same))
                break
            if hi - lo <= self.direct_range and depth < len(query):
                return self._finish(ranges, lo, hi, depth, query)
        return ranges, depth

    def _finish(
        self, ranges: list[tuple[int, int]], lo: int, hi: int, depth: int, query: np.ndarray
    ) -> tuple[list[tuple[int, int]], int]:
        """``_ranges`` from a short range on: the ranges and length that narrowing depth by
        depth would give, from each occurrence's common length with the rest of the query."""
        rest = query[depth:]  # [M]
        pos = self.sa[lo:hi, None] + depth + np.arange(len(rest))  # [R, M]
        column = np.where(pos < self._n, self.reversed[np.minimum(pos, self._n - 1)], -2)
        same = column == rest  # [R, M]
        common = np.where(same.all(axis=1), len(rest), np.argmin(same, axis=1))  # [R]
        longest = int(common.max(initial=0))
        # sorted suffixes that share ``depth`` symbols: those sharing e more are contiguous
        inside = common[:, None] >= np.arange(1, longest + 1)  # [R, E] shares e = 1.. more
        first = np.argmax(inside, axis=0)  # [E]
        last = len(common) - 1 - np.argmax(inside[::-1], axis=0)  # [E]
        single = np.flatnonzero(inside.sum(axis=0) == 1)
        if len(single):  # one occurrence left: it serves the longer lengths
            stop = int(single[0]) + 1
            longest = int(common[first[stop - 1]])
            first, last = first[:stop], last[:stop]
        ranges.extend(zip((lo + first).tolist(), (lo + last + 1).tolist(), strict=True))
        return ranges, depth + longest

    def _after(self, lo: int, hi: int) -> np.ndarray:
        """Forward positions right after each occurrence in the range, sorted."""
        return np.sort(self._n - self.sa[lo:hi])

    def longest(self, context: Sequence[int]) -> tuple[int, np.ndarray]:
        """(length, occurrences): the longest suffix of ``context`` in the streams.

        Occurrences are positions in the forward stream of the token that FOLLOWED each
        occurrence of the matched suffix (possibly a separator).
        """
        if not self._usable():
            return 0, np.zeros(0, dtype=np.int64)
        try:
            ranges, depth = self._ranges(context)
            if depth == 0:
                return 0, np.zeros(0, dtype=np.int64)
            return depth, self._after(*ranges[-1])
        except _FAULTS as err:
            if self.backing is None:
                raise  # arrays built in RAM: a bug
            self._fail(f"a lookup went out of bounds (bytes changed in place: {err})")
            return 0, np.zeros(0, dtype=np.int64)

    def _live(self, after: np.ndarray, streams: np.ndarray | None = None) -> np.ndarray:
        """The occurrences (positions after them) in alive streams (and in ``streams``, [S]
        bool, when given) followed by at least ``min_follow`` tokens before their stream
        ends, most recent last."""
        after = after[after < self._n]
        stream = np.searchsorted(self._ends, after)  # [len(after)] each one's stream
        keep = self._ends[stream] - after >= self.min_follow
        alive = self.alive  # read once: another thread may swap it
        if alive is not None:
            keep &= alive[stream]
        if streams is not None:
            keep &= streams[stream]
        return after[keep]

    def match(
        self,
        context: Sequence[int],
        follow: int = 32,
        others: int = 0,
        streams: np.ndarray | None = None,
    ) -> Match | None:
        """The longest match of ``context`` with its next-token counts and a continuation
        (and up to ``others`` distinct continuations of other occurrences, latest first).

        Occurrences that a stream's end follows within ``min_follow`` tokens do not count:
        the longest suffix that has others is the match (a file that ends where the
        context does, as the requesting document's text before the cursor's line does,
        continues nothing). Neither do occurrences in streams that ``alive`` masks out, nor,
        when ``streams`` ([S] bool) is given, in the streams it leaves out.

        A mapped file that changed under the map gives None from then on (``failed``).
        """
        if not self._usable():
            return None
        try:
            return self._checked(self._match(context, follow, others, streams))
        except _FAULTS as err:
            if self.backing is None:
                raise  # arrays built in RAM: a bug
            self._fail(f"a lookup went out of bounds (bytes changed in place: {err})")
            return None

    def _match(
        self, context: Sequence[int], follow: int, others: int, streams: np.ndarray | None
    ) -> Match | None:
        ranges, depth = self._ranges(context)
        while ranges:
            after = self._live(self._after(*ranges[-1]), streams)
            if len(after):
                break
            ranges.pop()
            depth = len(ranges)
        if not ranges:
            return None
        after = after[-_MAX_OCCURRENCES:]  # the most recent ones
        next_tokens = self.tokens[after]
        counts = Counter(next_tokens.tolist())
        best = max(counts, key=lambda t: counts[t])
        start = int(after[next_tokens == best][-1])  # its latest occurrence
        continuation = self._continuation(start, follow)
        alternatives: list[list[int]] = []
        for pos in after[::-1].tolist():
            if len(alternatives) == others:
                break
            other = self._continuation(pos, follow)
            if other != continuation and other not in alternatives:
                alternatives.append(other)
        return Match(depth, dict(counts), continuation, alternatives)

    def _continuation(self, start: int, follow: int) -> list[int]:
        """Up to ``follow`` tokens from ``start``, not past the stream's end."""
        tail = self.tokens[start : start + follow]
        stop = np.flatnonzero(tail == _SEPARATOR)
        return [int(t) for t in (tail[: stop[0]] if len(stop) else tail)]


class MatchSet:
    """Several match sources seen as one: the longest match wins; equal lengths add counts."""

    def __init__(self, sources: Sequence[object]) -> None:
        self.sources = [s for s in sources if s is not None]

    def match(self, context: Sequence[int], follow: int = 32, others: int = 0) -> Match | None:
        best: Match | None = None
        for source in self.sources:
            found = source.match(context, follow, others)  # type: ignore[attr-defined]
            if found is None:
                continue
            if best is None or found.length > best.length:
                best = found
            elif found.length == best.length:
                merged = Counter(best.next_counts)
                merged.update(found.next_counts)
                alternatives = [*best.others, found.continuation, *found.others][:others]
                best = Match(best.length, dict(merged), best.continuation, alternatives)
        return best


def brute_force_longest(streams: Sequence[Sequence[int]], context: Sequence[int]) -> int:
    """The reference: the longest suffix of ``context`` that occurs inside one stream."""
    best = 0
    for n in range(1, len(context) + 1):
        tail = list(context[len(context) - n :])
        if not any(list(s[i : i + n]) == tail for s in streams for i in range(len(s) - n + 1)):
            break
        best = n
    return best
