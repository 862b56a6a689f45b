"""Edit patterns: from an ended change, the token-level rewrite to apply where it fits next.

The changed line before and after the change is lexed (tokens.py); the tokens both share at
the start and at the end are context, the middle is what changed. Kinds, in the order tried:

- ``rename``: one name became another (``get_user`` -> ``fetch_user``). Sites: the same
  name as a whole token; a use's only at uses (in its function when the function binds the
  name: scope.py), a definition's (after ``def``, ``class``...) at uses and attributes;
  never at a keyword argument's name (``f(style=style)``) unless the edit was one. A use
  switched to a name the document already has is refused: that place changed its mind; so
  is a use of a name the document defines (``def``, ``class``) or imports elsewhere: that
  thing is renamed where it is defined, a use renamed alone switched to another. Sites are
  uses: a line that binds the name again (a tuple or loop target, a parameter) is another
  variable's (scope.binds);
- ``attribute``: an attribute renamed on one receiver (``self.size`` -> ``self.length``):
  sites are that receiver's;
- ``string``: one string literal became another (an import path, a key, a message), found
  again in the same role (after the same token; in a call, after the same callee);
- ``argument``: text inserted at the end (or start) of a call's arguments
  (``x.get(k)`` -> ``x.get(k, None)``). Sites: calls of the same callee (``x.get``) on one
  line with as many arguments, which get the same text at the same end;
- ``import``/``replace``: any other small rewrite, found again with its context: the call
  it sits in (callee and opening bracket) or two tokens each side, and at least one name.

Refused (no proposal at all, precision first): whitespace-only edits, edits over more than
one line or of more than MAX_TOKENS tokens, edits that change the line's indentation, edits
inside comments, edits that leave the code broken on their line (half of a larger change),
a condition's logic changed (``not``, ``and``, ``or``), renames of keywords or of one-letter
names, and rewrites whose result would match their own pattern again. The misfires that
made these rules are tests/test_next_edits_misfires.py (issue 55 item 2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from lsp_server.next_edits.log import Change
from lsp_server.next_edits.scope import (
    DEFINERS,
    IMPORTERS,
    binds,
    defined_elsewhere,
    local_rows,
)
from lsp_server.next_edits.tokens import Prose, Token, is_user_name, lex, prose_of

MAX_TOKENS = 12  # tokens changed at most, on either side: repetitive edits are small
MAX_LINE = 400  # characters of the changed line at most (generated or minified text)
CONTEXT = 2  # context tokens on each side of a replace pattern
MAX_CONTEXT = 6  # and at most this many, looking for a name to anchor it
MIN_STRING = 3  # characters in a string literal that is found again anywhere
_OPENERS, _CLOSERS = "([{", ")]}"
LOGIC = frozenset(["not", "and", "or", "!", "&&", "||"])  # a condition's operators


@dataclass(frozen=True)
class Pattern:
    """A rewrite found again by its tokens: ``before`` (left context, old tokens, right
    context) becomes, between the contexts, ``replacement`` (the edit's text there)."""

    kind: str  # rename | string | argument | import | replace
    label: str  # for the editor: "rename get_user -> fetch_user"
    before: tuple[str, ...]  # the tokens' texts a site holds
    left: int  # of them, the left context's
    right: int  # and the right context's
    replacement: str  # what the text between the contexts becomes (the edit's own)
    where: str | None  # what held the edit: None (code) or "string"; sites must match
    dotted: bool | None = None  # rename: a site is an attribute (True), a use (False), any
    callee: tuple[str, ...] = ()  # argument: the call's callee tokens (x . get)
    arity: int = 0  # argument: the call's arguments before the edit
    at_end: bool = True  # argument: the text went after the last argument (else the first)
    rows: tuple[int, int] | None = None  # a local's rename: its function's rows (scope.py)
    keyword: bool = False  # rename: the name was a keyword argument's (``f(style=...)``)
    binding: bool = False  # rename: the edited line bound the name (``for line in f(line)``)
    uri: str = ""  # the document edited, its line there (row, in the text after) and the
    row: int = -1  # columns of what the edit wrote there: no site overlaps them
    columns: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class Derived:
    """A change's pattern, or why there is none."""

    pattern: Pattern | None
    reason: str  # the pattern's kind, or what refused it


def _refused(reason: str) -> Derived:
    return Derived(None, reason)


def _line_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """The line holding ``text[start:end]`` (one line): its first offset and its end."""
    first = text.rfind("\n", 0, start) + 1
    last = text.find("\n", end)
    return first, len(text) if last < 0 else last


def derive(change: Change, language: str) -> Derived:
    """The pattern of ``change`` in a document of ``language`` (an LSP id or a URI)."""
    if "\n" in change.removed or "\n" in change.inserted:
        return _refused("spans lines")
    b0, b1 = _line_bounds(change.before, change.start, change.old_end)
    a0, a1 = _line_bounds(change.after, change.start, change.new_end)
    line_before, line_after = change.before[b0:b1], change.after[a0:a1]
    if max(len(line_before), len(line_after)) > MAX_LINE:
        return _refused("line too long")
    tb, ta = lex(line_before), lex(line_after)
    p = 0
    while p < min(len(tb), len(ta)) and tb[p].text == ta[p].text:
        p += 1
    s = 0
    while s < min(len(tb), len(ta)) - p and tb[-1 - s].text == ta[-1 - s].text:
        s += 1
    old, new = tb[p : len(tb) - s], ta[p : len(ta) - s]
    if not old and not new:
        return _refused("whitespace only")
    if len(old) > MAX_TOKENS or len(new) > MAX_TOKENS:
        return _refused("too large")
    if _indent(line_before) != _indent(line_after):
        return _refused("moves the line")  # into or out of a block: not a token rewrite
    row = change.after.count("\n", 0, a0)
    column = new[0].start if new else (ta[p].start if p < len(ta) else len(line_after))
    prose = prose_of(change.after, language, change.uri)
    where = prose.at(row, column)
    if where == "comment":
        return _refused("in a comment")
    if where is None and prose.broken(row):
        # half of a larger change (a bracket typed before its pair, ``and =`` before the
        # rest): what it wrote is no rewrite of its own
        return _refused("leaves the line broken")
    derived = (
        _rename(tb, p, old, new, where, change.before, (prose, row))
        or _string(tb, ta, p, old, new, (line_after, where))
        or _argument(tb, ta, p, s, old, new, line_after, where)
        or _replace(tb, ta, p, s, old, new, (line_before, line_after), where)
    )
    if isinstance(derived, str):
        return _refused(derived)
    columns = (change.start - a0, change.new_end - a0)
    pattern = _placed(derived, change.uri, row, columns)
    if _applies_again(pattern, ta, columns):
        return _refused("would apply again")
    return Derived(pattern, pattern.kind)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _placed(pattern: Pattern, uri: str, row: int, columns: tuple[int, int]) -> Pattern:
    return replace(pattern, uri=uri, row=row, columns=columns)


def _applies_again(pattern: Pattern, after: tuple[Token, ...], columns: tuple[int, int]) -> bool:
    """Whether what the edit wrote holds the pattern's ``before`` again: applied, it would
    be proposed again at the place it made (``f(a)`` -> ``f(f(a))``)."""
    n, texts = len(pattern.before), [t.text for t in after]
    return any(
        tuple(texts[i : i + n]) == pattern.before
        and after[i].start <= columns[1]
        and after[i + n - 1].end >= columns[0]
        for i in range(len(texts) - n + 1)
    )


def _clip(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _rename(
    tb: tuple[Token, ...],
    p: int,
    old: tuple[Token, ...],
    new: tuple[Token, ...],
    where: str | None,
    before: str,
    place: tuple[Prose, int],
) -> Pattern | str | None:
    """``before``: the document before the edit; ``place``: its parse and the edit's row."""
    if not (len(old) == len(new) == 1 and old[0].kind == new[0].kind == "name"):
        return None
    if not (is_user_name(old[0]) and is_user_name(new[0])):
        return "a keyword"
    if len(old[0].text) < 2:
        return "a one-letter name"
    previous = tb[p - 1].text if p else ""
    dotted = None if previous in DEFINERS else previous == "."
    if dotted is not None and re.search(rf"(?<!\w){re.escape(new[0].text)}(?!\w)", before):
        # a use switched to a name the document already has (another function, another
        # field): a change of that one place, not a rename
        return "switched to an existing name"
    if dotted is False and where is None and defined_elsewhere(before, old[0].text, place[1]):
        # a use of what a ``def``, a ``class`` or an import defines: renaming that thing
        # starts where it is defined; a use renamed alone switched to another (a call of
        # another function, another type in one annotation)
        return "a use of a definition"
    label = f"rename {old[0].text} -> {new[0].text}"
    if dotted and p >= 2 and tb[p - 2].kind == "name":
        # an attribute of one receiver (self.style): another object's is another field
        receiver = (tb[p - 2].text, ".", old[0].text)
        return Pattern("attribute", label, receiver, 2, 0, new[0].text, where)
    rows = None
    if dotted is False and where is None:  # a use: a local's rename stays in its function
        prose, row = place
        rows = local_rows(before, prose, row, old[0].start, old[0].text)
    after = tb[p + 1].text if p + 1 < len(tb) else ""
    header = tb[0].text in DEFINERS or tb[0].text in ("lambda", "async")
    keyword = after == "=" and previous in ("(", ",") and not header
    binding = binds(tb, old[0].text)
    return Pattern(
        "rename",
        label,
        (old[0].text,),
        0,
        0,
        new[0].text,
        where,
        dotted,
        rows=rows,
        keyword=keyword,
        binding=binding,
    )


def _string(
    tb: tuple[Token, ...],
    ta: tuple[Token, ...],
    p: int,
    old: tuple[Token, ...],
    new: tuple[Token, ...],
    placed: tuple[str, str | None],
) -> Pattern | None:
    """One literal became another, found again in the same role: after the same token, and
    inside a call after the same callee and arguments before it (``SERVER_NAME="a"``, not
    ``static_host="a"``; ``redirect("/a")``, not ``client.get("/a")``: the benchmark's
    strings changed once were the same literal in another role)."""
    line_after, where = placed
    if not (len(old) == len(new) == 1 and old[0].kind == new[0].kind == "string"):
        return None
    if len(old[0].text.strip("rRbBuUfF\"'`")) < MIN_STRING:
        return None  # a short one ('r', "") stands for many things: found with its context
    opener = _innermost_open(tb, p)
    left = min(p, 1)
    if opener is not None and callee_of(tb, opener):
        left = p - opener + len(callee_of(tb, opener))
    label = f"string {_clip(old[0].text)} -> {_clip(new[0].text)}"
    before = tuple(t.text for t in tb[p - left : p + 1])
    start = ta[p - 1].end if left else new[0].start
    return Pattern("string", label, before, left, 0, line_after[start : new[0].end], where)


def _innermost_open(tokens: tuple[Token, ...], end: int) -> int | None:
    """The index of the innermost bracket opened and not closed in ``tokens[:end]``."""
    depth: list[int] = []
    for i in range(end):
        if tokens[i].text in _OPENERS:
            depth.append(i)
        elif tokens[i].text in _CLOSERS and depth:
            depth.pop()
    return depth[-1] if depth else None


def matching_close(tokens: tuple[Token, ...], opener: int) -> int | None:
    level = 0
    for i in range(opener, len(tokens)):
        if tokens[i].text in _OPENERS:
            level += 1
        elif tokens[i].text in _CLOSERS:
            level -= 1
            if level == 0:
                return i
    return None


def callee_of(tokens: tuple[Token, ...], opener: int) -> tuple[str, ...]:
    """The call's callee before the bracket at ``opener``: a dotted chain of names
    (``x.get``), empty when no name precedes it (a tuple, a list)."""
    i = opener
    if tokens[opener].text != "(" or i == 0 or tokens[i - 1].kind != "name":
        return ()
    i -= 1
    while i >= 2 and tokens[i - 1].text == "." and tokens[i - 2].kind == "name":
        i -= 2
    return tuple(t.text for t in tokens[i:opener])


def arity(tokens: tuple[Token, ...], opener: int, close: int) -> int:
    """Arguments between ``opener`` and its ``close``: top-level commas + 1, 0 when none."""
    if close == opener + 1:
        return 0
    level, commas = 0, 0
    for t in tokens[opener + 1 : close]:
        if t.text in _OPENERS:
            level += 1
        elif t.text in _CLOSERS:
            level -= 1
        elif t.text == "," and level == 0:
            commas += 1
    return commas + 1


def _balanced(tokens: tuple[Token, ...]) -> bool:
    level = 0
    for t in tokens:
        level += (t.text in _OPENERS) - (t.text in _CLOSERS)
        if level < 0:
            return False
    return level == 0


def _argument(
    tb: tuple[Token, ...],
    ta: tuple[Token, ...],
    p: int,
    s: int,
    old: tuple[Token, ...],
    new: tuple[Token, ...],
    line_after: str,
    where: str | None,
) -> Pattern | None:
    """Text inserted right after a call's opening bracket or right before its closing one."""
    if old or not new or where is not None:
        return None
    opener = _innermost_open(tb, p)
    close = matching_close(tb, opener) if opener is not None else None
    if opener is None or close is None:
        return None
    callee = callee_of(tb, opener)
    head = opener - len(callee)
    if not callee or (head > 0 and tb[head - 1].text in DEFINERS):
        return None  # not a call, or a definition's parameters
    at_end, at_start = close == len(tb) - s, opener == p - 1
    if not (at_end or at_start):
        return None
    count = arity(tb, opener, close)
    # a whole argument: after a comma at the end, before one at the start, and balanced
    whole = new[0].text == "," if at_end else new[-1].text == ","
    if count == 0 or not whole or len(new) < 2 or not _balanced(new):
        return None
    gap = line_after[ta[p - 1].end : ta[p + len(new)].start]  # between its two neighbours
    name = ".".join(c for c in callee if c != ".")
    label = f"argument {_clip(gap.strip(', '))} in {name}(...)"
    before = tuple(t.text for t in tb[opener - len(callee) : close + 1])
    return Pattern(
        "argument", label, before, 0, 0, gap, where, callee=callee, arity=count, at_end=at_end
    )


def _replace(
    tb: tuple[Token, ...],
    ta: tuple[Token, ...],
    p: int,
    s: int,
    old: tuple[Token, ...],
    new: tuple[Token, ...],
    lines: tuple[str, str],
    where: str | None,
) -> Pattern | str:
    """Any other rewrite, found again by its context (see the module); ``lines``: the
    changed line before and after."""
    line_before, line_after = lines
    if where is None and any(t.text in LOGIC for t in (*old, *new)):
        # ``not`` deleted, ``and x`` added: one condition's decision (the benchmark's
        # conditions changed once proposed at every other test of that name)
        return "changes a condition"
    opener = _innermost_open(tb, p)
    left = min(p, CONTEXT)
    if opener is not None and callee_of(tb, opener):
        left = max(left, p - opener + len(callee_of(tb, opener)))
    right = min(s, CONTEXT)

    def around() -> tuple[Token, ...]:
        return (*tb[p - left : p], *old, *tb[len(tb) - s : len(tb) - s + right])

    while not any(is_user_name(t) for t in around()):
        if left >= min(p, MAX_CONTEXT) and right >= min(s, MAX_CONTEXT):
            return "no name to anchor it"
        left, right = min(p, MAX_CONTEXT, left + 1), min(s, MAX_CONTEXT, right + 1)
    before = tuple(t.text for t in around())
    if len(before) < 3:
        return "too little context"
    if not new and not (left and right):
        return "a deletion without context on both sides"
    start = ta[p - 1].end if left else new[0].start if new else ta[p].start
    end = ta[len(ta) - s].start if right else new[-1].end if new else ta[p - 1].end
    replacement = line_after[start:end]
    kind = "import" if tb and tb[0].text in IMPORTERS else "replace"
    first, last = p - left, len(tb) - s + right - 1  # the context's ends, in both lines
    was = line_before[tb[first].start : tb[last].end]
    now = line_after[ta[first].start : ta[len(ta) - s + right - 1].end]
    label = f"{kind} {_clip(was)} -> {_clip(now)}"
    return Pattern(kind, label, before, left, right, replacement, where)
