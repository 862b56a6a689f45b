"""The recent-edits log: each document's changes as before/after text, one entry per change.

pygls applies a didChange to its document before the server's handler runs, so the log keeps
its own copy of each open document's text as last seen: the text a change removed is read
there. Keystrokes that touch the place being edited merge into one change (typing a name,
deleting it back); a pause (the server's timer, NEXT_EDITS_PAUSE_S) or a keystroke at another
place (a jump) ends it. Ended changes are kept, the most recent ``KEEP`` of them.

Where two texts differ is their common prefix and suffix, found by bisection on slices (each
comparison runs in C): about a millisecond for a 400,000-character document.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

# Ended changes kept (all documents together).
KEEP = 32
# Documents longer than this are not followed: the log would copy them at each keystroke.
MAX_CHARS = 400_000


@dataclass(frozen=True)
class Change:
    """One ended change: the document's text before and after it, and where they differ
    (``before[start:old_end]`` became ``after[start:new_end]``)."""

    uri: str
    version: int
    before: str
    after: str
    start: int
    old_end: int
    new_end: int

    @property
    def removed(self) -> str:
        return self.before[self.start : self.old_end]

    @property
    def inserted(self) -> str:
        return self.after[self.start : self.new_end]


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b``."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # invariant: a[:lo] == b[:lo]
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def differ(a: str, b: str) -> tuple[int, int, int]:
    """(start, end in a, end in b): ``a[start:end_a]`` became ``b[start:end_b]``, the rest
    the same (the shortest such middle, its prefix taken first)."""
    start = common_prefix(a, b)
    limit = min(len(a), len(b)) - start
    lo, hi = 0, limit  # the common suffix, not overlapping the prefix
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid : len(a) - lo] == b[len(b) - mid : len(b) - lo]:
            lo = mid
        else:
            hi = mid - 1
    return start, len(a) - lo, len(b) - lo


@dataclass
class _Pending:
    """A change the user is making: the text when it began, and as it is now."""

    base: str
    now: str
    version: int
    caret: int  # where the last keystroke ended in ``now``

    def span(self) -> tuple[int, int]:
        """Where it differs from the base, in the text as it is now, with the word it is
        in: a keystroke in that word is this change's."""
        start, _, end = differ(self.base, self.now)
        return word_span(self.now, start, end)


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def word_span(text: str, start: int, end: int) -> tuple[int, int]:
    """``start``-``end`` widened to the word characters on either side."""
    while start > 0 and _word(text[start - 1]):
        start -= 1
    while end < len(text) and _word(text[end]):
        end += 1
    return start, end


class EditLog:
    """The open documents' texts as last seen, the changes being made, the ended ones."""

    def __init__(self, keep: int = KEEP) -> None:
        self._texts: dict[str, str] = {}
        self._pending: dict[str, _Pending] = {}
        self._last: dict[str, Change] = {}  # each document's last ended change
        self.ended: deque[Change] = deque(maxlen=keep)

    def open(self, uri: str, text: str) -> None:
        """didOpen: the document's text as the editor has it."""
        self._pending.pop(uri, None)
        if len(text) <= MAX_CHARS:
            self._texts[uri] = text
        else:
            self._texts.pop(uri, None)

    def close(self, uri: str) -> None:
        """didClose: the document's copy, its change being made and its ended ones go."""
        self._texts.pop(uri, None)
        self._pending.pop(uri, None)
        self._last.pop(uri, None)
        if any(change.uri == uri for change in self.ended):
            self.ended = deque((c for c in self.ended if c.uri != uri), maxlen=self.ended.maxlen)

    def clear(self) -> None:
        """Next edits turned off: nothing is followed."""
        self._texts.clear()
        self._pending.clear()
        self._last.clear()
        self.ended.clear()

    def in_name(self, uri: str) -> bool:
        """Whether the last keystroke of the change being made in ``uri`` left the caret
        right after a name's character: the user may be typing (or deleting) that name."""
        pending = self._pending.get(uri)
        return pending is not None and pending.caret > 0 and _word(pending.now[pending.caret - 1])

    def held(self) -> int:
        """Documents whose text is kept (tests)."""
        return len(self._texts)

    def changed(self, uri: str, text: str, version: int) -> Change | None:
        """didChange (``text``: the document after it). Returns the change this one ended
        (it was made at another place), else None."""
        old = self._texts.get(uri)
        if len(text) > MAX_CHARS:
            self.close(uri)
            return None
        self._texts[uri] = text
        if old is None or old == text:
            return None
        at, old_end, caret = differ(old, text)
        pending = self._pending.get(uri)
        if pending is not None:
            start, end = pending.span()
            if at <= end and old_end >= start:  # touches the change being made: one change
                pending.now, pending.version, pending.caret = text, version, caret
                return None
        last = self._last.get(uri)
        low, high = word_span(old, last.start, last.new_end) if last else (0, -1)
        on_last = at <= high and old_end >= low
        if pending is None and last is not None and on_last and last.after == old:
            # typing on where a pause ended the last change (``data``, a pause,
            # ``_frame``): the same change goes on, from the text before it
            self._pending[uri] = _Pending(last.before, text, version, caret)
            return None
        self._pending[uri] = _Pending(old, text, version, caret)
        return self._finish(uri, pending)

    def end(self, uri: str) -> Change | None:
        """A pause: the change being made in ``uri`` ended (None: none, or it undid itself)."""
        return self._finish(uri, self._pending.pop(uri, None))

    def _finish(self, uri: str, pending: _Pending | None) -> Change | None:
        if pending is None or pending.base == pending.now:
            return None
        start, old_end, new_end = differ(pending.base, pending.now)
        change = Change(uri, pending.version, pending.base, pending.now, start, old_end, new_end)
        self.ended.append(change)
        self._last[uri] = change
        return change
