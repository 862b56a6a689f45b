"""Drafts laid out as their document is: its line ending and its indentation unit.

A draft copies what the memory matched in another document (or what the model read there),
and with it that document's layout: an LF file got ``for line in handle:\\r\\n``, a CRLF file
LF-only blocks, a tab-indented file ``\\t\\t    key``, and the model mixed ``    \\tfor`` where
the file had no indented line yet. ``Layout.of`` reads the document's line ending and one
level of its indentation (a tab or N spaces; where no line is indented yet, the language's
usual one, ``DEFAULT_UNITS``: the protocol gives an inline completion no FormattingOptions);
``Layout.lines`` makes a draft's line breaks LF and its indentation the document's, before
post-processing reads the lines (cleanup.postprocess); ``Layout.ends`` gives the shown
draft the document's line ending.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from lsp_server.completion.syntax import grammar_name

SCAN_LINES = 400  # lines before the cursor (and half as many after it) that tell the layout
SCAN_CHARS = 65_536  # characters on each side at most (1 MB lines, 200k-line files)
SPACES = 4  # spaces per level where nothing says otherwise
# Languages whose usual indentation is not 4 spaces (by tree-sitter grammar name), for a
# document that has no indented line yet: gofmt and make use tabs; these mostly use 2.
DEFAULT_UNITS = {
    "go": "\t",
    "make": "\t",
    "makefile": "\t",
    **dict.fromkeys(
        ("javascript", "typescript", "tsx", "json", "yaml", "ruby", "html", "css", "scss"),
        "  ",
    ),
}
_ALIGNED = re.compile(r"^\t+ {2,}\S", re.MULTILINE)  # tabs to indent, spaces to align


@dataclass(frozen=True)
class Layout:
    """A document's line ending and indentation."""

    eol: str = "\n"  # "\n" or "\r\n"
    unit: str = " " * SPACES  # one indentation level: "\t" or N spaces
    # The document indents with tabs and aligns with spaces after them (``\t\t    b)``): the
    # spaces after a draft line's tabs are alignment too, and stay.
    aligns: bool = False

    @classmethod
    def of(cls, before: str, following: str = "", language: str = "") -> Layout:
        """The layout of the document around the cursor (``before`` and ``following`` it)."""
        head = before[-SCAN_CHARS:].rsplit("\n", SCAN_LINES)
        tail = following[:SCAN_CHARS].split("\n", SCAN_LINES // 2)[: SCAN_LINES // 2]
        rows = head[1:] if len(head) > SCAN_LINES else head
        rows = [*rows[:-1], rows[-1] + tail[0], *tail[1:]]  # the cursor's line whole
        crlf = sum(r.endswith("\r") for r in rows[:-1])
        eol = "\r\n" if crlf * 2 > len(rows) - 1 else "\n"
        text = "\n".join(rows)
        unit = _unit([r.rstrip("\r") for r in rows if r.strip()], language)
        return cls(eol, unit, unit == "\t" and _ALIGNED.search(text) is not None)

    def lines(self, draft: str, line: str, step: int | None = None) -> str:
        """``draft`` with LF line breaks and each line indented in the document's unit.

        ``line``: the cursor line's text before the cursor; where it is indentation only, the
        draft's first line completes it, and is re-indented with it. ``step``: the spaces of
        one level in the draft (None: read from its lines)."""
        text = draft.replace("\r\n", "\n").replace("\r", "\n")
        step = step or _draft_step(text)
        first, *later = text.split("\n")
        if not line.strip():
            whole = self._indent(line + first, step)
            first = whole[len(line) :] if whole.startswith(line) else first
        return "\n".join([first, *(self._indent(r, step) for r in later)])

    def ends(self, text: str) -> str:
        """``text`` (LF line breaks) with the document's line ending."""
        return text if self.eol == "\n" else text.replace("\n", self.eol)

    def _indent(self, row: str, step: int) -> str:
        """``row`` with its leading tabs and spaces as levels of the unit: a tab is a level,
        ``step`` spaces are a level (the draft's own width, else the document's), and spaces
        short of a level stay (alignment)."""
        body = row.lstrip(" \t")
        if not body:
            return row
        space = len(self.unit) if self.unit != "\t" else step
        levels, run, tabbed = 0, 0, False
        for ch in row[: len(row) - len(body)]:
            if ch == "\t":  # whole levels of spaces, then the tab's stop takes the rest
                levels, run, tabbed = levels + run // space + 1, 0, True
            else:
                run += 1
        if tabbed and self.aligns:  # the spaces after the tabs align: kept
            return self.unit * levels + " " * run + body
        levels += run // space
        return self.unit * levels + " " * (run % space) + body


def _unit(rows: list[str], language: str) -> str:
    """One level: a tab where most indented rows start with one, else the most common step
    (2 to 8 spaces) by which a row is deeper than the one above, else the language's."""
    indented = [r for r in rows if r[0] in " \t"]
    tabs = sum(r[0] == "\t" for r in indented)
    if indented and tabs * 2 >= len(indented):
        return "\t"
    widths = [len(r) - len(r.lstrip(" ")) for r in rows if r[0] != "\t"]
    steps = Counter(b - a for a, b in zip([0, *widths], widths, strict=False) if 2 <= b - a <= 8)
    if steps:  # the most common, the smaller of a tie (8 after 4 is two levels, not one)
        return " " * min(steps, key=lambda n: (-steps[n], n))
    return DEFAULT_UNITS.get(grammar_name(language) or "", " " * SPACES)


def _draft_step(text: str) -> int:
    """The spaces per level in the draft's own lines: the smallest run of two or more spaces
    that follows a line's tabs (or starts it); SPACES where none does."""
    runs = []
    for row in text.split("\n"):
        rest = row.lstrip("\t")
        run = len(rest) - len(rest.lstrip(" "))
        if run >= 2 and rest.strip():
            runs.append(run)
    return min(runs) if runs else SPACES
