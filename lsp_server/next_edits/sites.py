"""Sites: where a pattern's "before" still stands in a text, and what it becomes there.

A text is searched for the pattern's anchor (its longest name or string, ``str.find`` in C),
and only the lines that hold it are lexed and matched token by token: a 2,000-line file
costs well under a millisecond when the anchor is rare. Each site's proposal is the site's
own text with the edit's replacement between the pattern's contexts: nothing but the edit
and the site's document goes into it. A site is skipped where it sits in a string or a
comment and the edit did not (and the other way round), and where the edit itself wrote.
"""

from __future__ import annotations

from dataclasses import dataclass

from lsp_server.next_edits.patterns import (
    DEFINERS,
    MAX_LINE,
    Pattern,
    arity,
    callee_of,
    matching_close,
)
from lsp_server.next_edits.scope import binds
from lsp_server.next_edits.tokens import Token, lex, prose_of

MAX_SITES = 200  # sites per text at most: a pattern that matches more is not a next edit


@dataclass(frozen=True)
class Site:
    """A place where ``pattern`` applies: ``line[start:end]`` becomes ``new_text``."""

    uri: str
    row: int
    start: int  # columns in the line (characters)
    end: int
    line: str  # the line's text (positions in the client's units are counted on it)
    new_text: str
    origin: str  # file | open | workspace
    pattern: Pattern

    @property
    def old_text(self) -> str:
        return self.line[self.start : self.end]


def anchor(pattern: Pattern) -> str:
    """The longest token of ``before`` that is a name or a literal: what ``str.find`` looks
    for (punctuation would hit every line)."""
    words = [t for t in pattern.before if t[:1].isalnum() or t[:1] in "_\"'`" or len(t) > 2]
    return max(words or pattern.before, key=len)


def find(pattern: Pattern, uri: str, text: str, language: str, origin: str) -> list[Site]:
    """The sites of ``pattern`` in ``text`` (the document ``uri``), in order. An open
    document's parse is kept for the next reader; a workspace file's is not (no close
    would free it)."""
    if pattern.rows is not None and uri != pattern.uri:
        return []  # a local's rename: its function only
    needle, sites = anchor(pattern), list[Site]()
    prose = prose_of(text, language, None if origin == "workspace" else uri)
    row, counted = 0, 0  # the row of offset ``counted``, moved forward line by line
    at = text.find(needle)
    while at >= 0 and len(sites) < MAX_SITES:
        first = text.rfind("\n", 0, at) + 1
        last = text.find("\n", at)
        last = len(text) if last < 0 else last
        row, counted = row + text.count("\n", counted, first), first
        # a line of generated or minified text is no site, as it is no edit (MAX_LINE): it
        # would cost its lexing and keep a long line in lex's cache
        outside = pattern.rows is not None and not pattern.rows[0] <= row <= pattern.rows[1]
        if outside or last - first > MAX_LINE:
            at = text.find(needle, last)
            continue
        line = text[first:last]
        for start, end, new_text in _in_line(pattern, lex(line), line):
            if _edited(pattern, uri, row, start, end) or prose.at(row, start) != pattern.where:
                continue
            sites.append(Site(uri, row, start, end, line, new_text, origin, pattern))
        at = text.find(needle, last)
    return sites


def _edited(pattern: Pattern, uri: str, row: int, start: int, end: int) -> bool:
    """Whether the site overlaps (or touches) what the edit itself wrote, or lies on the line
    where a rename's edit renamed a binding (the other uses there read the binding before:
    ``for line in split(line)``)."""
    if uri != pattern.uri or row != pattern.row:
        return False
    if pattern.binding:
        return True
    low, high = pattern.columns
    return start <= high and end >= low


def _in_line(pattern: Pattern, tokens: tuple[Token, ...], line: str) -> list[tuple[int, int, str]]:
    """(start, end, new text) of each place in the line where ``pattern`` applies."""
    if pattern.kind == "argument":
        return _calls(pattern, tokens, line)
    texts = [t.text for t in tokens]
    if pattern.kind == "rename" and binds(tokens, pattern.before[0]):
        return []  # a rename's sites are uses: a line that binds the name again (scope.binds)
    n, out = len(pattern.before), []
    for i in range(len(tokens) - n + 1):
        if tuple(texts[i : i + n]) != pattern.before:
            continue
        if pattern.kind == "rename" and not _same_use(pattern, tokens, i):
            continue
        left, right = pattern.left, pattern.right
        start = tokens[i + left - 1].end if left else tokens[i].start
        end = tokens[i + n - right].start if right else tokens[i + n - 1].end
        out.append(_trimmed(line, start, end, pattern.replacement))
    return out


def _same_use(pattern: Pattern, tokens: tuple[Token, ...], i: int) -> bool:
    """A rename's site: a name (not a keyword's neighbour of another kind), an attribute when
    the edit renamed one, a use when it renamed a use, either after a definition."""
    if tokens[i].kind != "name":
        return False
    previous = tokens[i - 1].text if i else ""
    following = tokens[i + 1].text if i + 1 < len(tokens) else ""
    header = tokens[0].text in DEFINERS or tokens[0].text in ("lambda", "async")
    keyword = following == "=" and previous in ("(", ",") and not header
    if keyword != pattern.keyword:
        return False  # a keyword argument's name is the callee's, not this variable's
    return pattern.dotted is None or pattern.dotted == (previous == ".")


def _calls(pattern: Pattern, tokens: tuple[Token, ...], line: str) -> list[tuple[int, int, str]]:
    """An argument pattern's sites: calls of its callee with as many arguments."""
    texts, n, out = [t.text for t in tokens], len(pattern.callee), []
    for i in range(len(tokens) - n):
        if tuple(texts[i : i + n]) != pattern.callee or texts[i + n] != "(":
            continue
        if i > 0 and (texts[i - 1] == "." or texts[i - 1] in DEFINERS):
            continue  # another object's method of the same name, or a definition
        opener = i + n
        if callee_of(tokens, opener) != pattern.callee:
            continue
        close = matching_close(tokens, opener)
        if close is None or arity(tokens, opener, close) != pattern.arity:
            continue
        if pattern.at_end:
            start, end = tokens[close - 1].end, tokens[close].start
        else:
            start, end = tokens[opener].end, tokens[opener + 1].start
        out.append((start, end, pattern.replacement))
    return out


def _trimmed(line: str, start: int, end: int, new_text: str) -> tuple[int, int, str]:
    """The range without the spaces the old and the new text share at either end."""
    old = line[start:end]
    while old and new_text and old[0] == new_text[0] and old[0].isspace():
        start, old, new_text = start + 1, old[1:], new_text[1:]
    while old and new_text and old[-1] == new_text[-1] and old[-1].isspace():
        end, old, new_text = end - 1, old[:-1], new_text[:-1]
    return start, end, new_text
