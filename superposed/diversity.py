"""How a beam's k slots are shared out among different guesses (issue 22).

Superposed drafts stay close by design: in 4 of 10 line-start requests of the replay the k
drafts shared the first 60% of their text, and a block's drafts often spent every slot on
one first line with k different tails. The editor shows a block's first line first, and a
line's first word is its first real decision (a name, a call, a keyword), so the slots are
shared out by those:

- first lines: drafts whose first line is whole and the same compete for one slot (the
  better-scored one goes on), and a first line a finished draft holds takes none;
- first words: at most ``word_cap`` live drafts share their first word; the others' slots
  go to the best drafts that begin differently, and only when there are none to the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_WORD = re.compile(rb"[A-Za-z0-9_]+|[^\sA-Za-z0-9_]")


def first_line_key(data: bytes) -> bytes | None:
    """A draft's first line with content, once its line break is decoded; None before."""
    content = len(data) - len(data.lstrip())
    end = data.find(b"\n", content)
    return data[:end].rstrip() if end >= 0 else None


def first_word_key(data: bytes) -> bytes | None:
    """A draft's first word (a name, a number, or one punctuation character) once something
    follows it; None before."""
    text = data.lstrip()
    found = _WORD.match(text)
    return found.group() if found is not None and found.end() < len(text) else None


@dataclass
class Slots:
    """The sharing rules of one decoding (both off by default)."""

    lines: set[bytes] | None = None  # first lines finished drafts hold; None: no line rule
    word_cap: int = 0  # live drafts at most per first word; 0: no word rule
    skip: int = 0  # bytes of healed text (typed before the cursor) before a draft's own

    def finish(self, data: bytes) -> None:
        """A draft with bytes ``data`` finished: its first line holds a slot."""
        if self.lines is not None:
            self.lines.add(first_line_key(data[self.skip :] + b"\n") or b"")

    def round(self) -> Round:
        return Round(self, set(self.lines) if self.lines is not None else None)


@dataclass
class Round:
    """One step's choice: what the drafts chosen so far hold."""

    slots: Slots
    lines: set[bytes] | None
    words: dict[bytes, int] = field(default_factory=dict)

    def verdict(self, data: bytes) -> str:
        """ "take", "never" (its first line is held) or "later" (its first word is full)."""
        own = data[self.slots.skip :]
        line = first_line_key(own) if self.lines is not None else None
        if line is not None and self.lines is not None and line in self.lines:
            return "never"
        if self.slots.word_cap:
            word = first_word_key(own)
            if word is not None and self.words.get(word, 0) >= self.slots.word_cap:
                return "later"
        return "take"

    def take(self, data: bytes) -> None:
        own = data[self.slots.skip :]
        line = first_line_key(own) if self.lines is not None else None
        if line is not None and self.lines is not None:
            self.lines.add(line)
        word = first_word_key(own) if self.slots.word_cap else None
        if word is not None:
            self.words[word] = self.words.get(word, 0) + 1
