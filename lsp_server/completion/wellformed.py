"""Drafts that parse: a draft the target language cannot go on from is never shown.

Superposed drafts share one input, and a draft that the best one outweighs can come out
corrupt: ``with open(path, "r",") as f:``, a closing ``]]`` dropped into a list, a call
left to end in ``retries=_frob_frob_frob`` (issue 38). Such a draft is malformed when, once
inserted at the cursor:

- a bracket or quote no longer pairs: the draft closes a bracket that nothing before it
  opened (the window's lines above, the line's prefix) or with the wrong closer (``(]``),
  the line's rest counted after it, or it ends inside a one-line string. Brackets the draft
  leaves open are fine (``foo(`` starts a call spread over lines), and so is a ``)`` that
  closes what the prefix opened;
- the syntax tree (tree-sitter, the grammar ``syntax.py`` picks) has an error or missing node
  on the draft's lines where the window without the draft parsed clean, with the cursor's
  line or without it: a line already begun (``if ``, ``for ``) is judged as the draft
  completes it, so ``if not:`` is malformed there (issue 52). The brackets that the line
  leaves open are closed right after it (an open call is no error); the window is
  ``WINDOW_CHARS`` before the cursor and ``FOLLOWING_CHARS`` after it, not the whole file;
- the draft stops inside a bracket its line opened, after a word, a string or a closer
  (``retries=_frob_frob``): the token budget cut the line (a line spread over lines breaks
  after an opener, a comma or an operator);
- the draft ends by typing what already follows the cursor: its last line is the next
  non-blank line of the document.

``parses`` tells the drafts that are none of these (the ranking stage ``ranking.kept`` keeps
them, in their order, lsp_server/completion/decode.py ``rank_stages``): a block draft that is not
gives way to its longest run of first lines that is (completion.shorter_blocks), and the next
candidate takes a dropped one's place: the spare drafts the engine decodes beyond k
(completion.SPARE_DRAFTS), then the memory's reserves (superposed/memory.py ``reserves``).
A language without a grammar gets the text rules only; inside a string or a comment, and in
prose, nothing is judged. Cost: a parse of the window (two where it does not parse with the
cursor's line), then a scan and a parse per draft (the parse only where the text rules pass
and the window parsed clean) and per shorter form of a block tried, a few ms a request
(bench/results/replay_wellformed*.json: ``check_ms``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from lsp_server.completion.syntax import TOP_LEVEL, grammar_name, parser_for

WINDOW_CHARS = 4_000  # text before the cursor parsed (from a definition's head when one is there)
FOLLOWING_CHARS = 2_000  # and after it
OPENERS = {"(": ")", "[": "]", "{": "}"}
CLOSERS = {v: k for k, v in OPENERS.items()}


@dataclass(frozen=True)
class Syntax:
    """What the text rules read of a language: its quotes and line comment markers."""

    quotes: str = "\"'"
    comments: tuple[str, ...] = ("#", "//")
    code: bool = True  # False: prose (no rules apply)


# Grammar names (syntax.grammar_name) -> their quotes and comments; others get Syntax().
# Python's // is floor division, Rust's ' a lifetime, JavaScript's ` a template string.
SYNTAXES = {
    **dict.fromkeys(
        ("python", "ruby", "bash", "toml", "yaml", "perl", "r"), Syntax(comments=("#",))
    ),
    **dict.fromkeys(("javascript", "typescript", "tsx"), Syntax(quotes="\"'`", comments=("//",))),
    **dict.fromkeys(
        ("c", "cpp", "csharp", "java", "kotlin", "scala", "swift"), Syntax(comments=("//",))
    ),
    "go": Syntax(quotes='"`', comments=("//",)),
    "rust": Syntax(quotes='"', comments=("//",)),
    **dict.fromkeys(
        ("markdown", "plaintext", "text", "restructuredtext", "rst", "prose"), Syntax(code=False)
    ),
}


def syntax_of(language: str) -> Syntax:
    """The text rules' syntax for an LSP language id, file name or URI."""
    return SYNTAXES.get(grammar_name(language) or "", Syntax())


@dataclass(frozen=True)
class Scan:
    """The brackets and quotes of a line's text, read left to right (comments skipped)."""

    open: tuple[str, ...]  # brackets still open at the end, innermost last
    broken: bool  # a closer without its opener, or with another's
    quote: str  # the one-line string left open at the end ("": none)


def scan(
    text: str, syntax: Syntax = Syntax(), start: Sequence[str] = (), lenient: bool = False
) -> Scan:
    """Read ``text``'s brackets outside strings and comments, from the open brackets
    ``start`` on: a line break ends a one-line string (which is then broken) and a line
    comment; triple quotes open and close a string that may span lines. ``lenient``: a
    closer closes its nearest opener, and one without is passed over (text cut out of a
    file: it may begin inside brackets); nothing is broken then."""
    stack = list(start)
    quote, broken, i = "", False, 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif text.startswith(quote, i):
                i += len(quote) - 1
                quote = ""
            elif ch == "\n" and len(quote) == 1:
                broken, quote = True, ""
        elif ch in syntax.quotes:
            triple = ch * 3
            quote = triple if text.startswith(triple, i) else ch
            i += len(quote) - 1
        elif any(text.startswith(c, i) for c in syntax.comments):
            end = text.find("\n", i)
            if end < 0:
                break
            i = end
        elif ch in OPENERS:
            stack.append(ch)
        elif ch in CLOSERS:
            if stack and stack[-1] == CLOSERS[ch]:
                stack.pop()
            elif lenient:
                if CLOSERS[ch] in stack:
                    del stack[len(stack) - 1 - stack[::-1].index(CLOSERS[ch]) :]
            else:
                broken = True
        i += 1
    return Scan(tuple(stack), broken, quote if len(quote) == 1 else "")


def closing(brackets: Iterable[str]) -> str:
    """The closers of the open ``brackets``, innermost first."""
    return "".join(OPENERS[b] for b in reversed(tuple(brackets)))


@dataclass(frozen=True)
class Cursor:
    """What a draft is judged against: the text around the cursor."""

    before: str  # the document before the cursor (its end is enough: WINDOW_CHARS)
    following: str  # the document after the cursor, its line's rest first
    language: str = ""  # an LSP language id, a file name or URI ("" unknown)

    @property
    def line_before(self) -> str:
        return self.before[self.before.rfind("\n") + 1 :]

    @property
    def rest(self) -> str:
        """The rest of the cursor's line."""
        end = self.following.find("\n")
        return self.following if end < 0 else self.following[:end]

    @property
    def next_line(self) -> str:
        """The first non-blank line after the cursor's line, stripped ("": none)."""
        rows = self.following[:FOLLOWING_CHARS].split("\n")[1:]
        return next((r.strip() for r in rows if r.strip()), "")


class Judge:
    """Tells malformed drafts at one cursor; the document's own line is scanned and parsed
    once."""

    def __init__(self, cursor: Cursor) -> None:
        self.cursor = cursor
        self.syntax = syntax_of(cursor.language)
        self.line, self.rest = cursor.line_before, cursor.rest
        grammar = grammar_name(cursor.language) if self.syntax.code else None
        self.parser = parser_for(grammar) if grammar else None
        window = _window(cursor.before)
        self.head = window[: len(window) - len(self.line)] if window.endswith(self.line) else ""
        # the brackets the lines above leave open (a ")" at a line start may close them);
        # the window may begin inside brackets, or even a string: read leniently
        self.open = scan(self.head, self.syntax, lenient=True).open
        self.base = scan(self.line + self.rest, self.syntax, self.open)
        self.tail = cursor.following[len(self.rest) : FOLLOWING_CHARS]
        # the window parses but for the cursor's line (which the draft completes); the
        # cursor is in a string or comment
        self.clean, self.in_text = False, False
        if self.parser is not None:
            self.clean, self.in_text = self._look("")

    def why(self, draft: str) -> str:
        """Why ``draft`` is malformed at the cursor: "brackets", "quote", "unfinished",
        "repeats" (the next line), "syntax"; "" when it is not, and for every draft where
        the cursor is inside a string or comment, or in prose (its brackets need not pair)."""
        if not draft.strip() or self.in_text or not self.syntax.code:
            return ""
        line = scan(self.line + draft + self.rest, self.syntax, self.open)
        if line.broken and not self.base.broken:
            return "brackets"
        if line.quote and not self.base.quote:
            return "quote"
        if self._cut(draft):
            return "unfinished"
        last = draft.rstrip().rsplit("\n", 1)[-1].strip()
        if last and last == self.cursor.next_line:
            return "repeats"
        if self.clean and not self._look(draft)[0]:
            return "syntax"
        return ""

    def _cut(self, draft: str) -> bool:
        """Whether the draft stops inside a bracket its line opened, right after a word, a
        string or a closer (``retries=_frob_frob``, ``f(g(x)``): a line the token budget
        cut. A line spread over lines breaks after an opener, a comma or an operator (no
        line of the replay's 400 targets ends so)."""
        text = (self.line + draft + self.rest).rstrip()
        end = text[-1:]
        return bool(scan(text, self.syntax).open) and (end.isalnum() or end in "_\"')]}")

    def _look(self, draft: str) -> tuple[bool, bool]:
        """(no error or missing node on the cursor's lines, the cursor is inside a string or
        comment) with ``draft`` at the cursor, the brackets its line opens closed after it.
        Without a draft, the window must parse, with the cursor's line or without it: a
        line already begun (``if ``, ``x = ``) breaks the window (tree-sitter may blame the
        next line), and a draft is judged by the line it makes, so ``if not:`` is malformed
        there. Where the window starts inside a bracket (a long dict literal) or the
        document is being edited elsewhere, errors land anywhere and the syntax rule is
        off."""
        assert self.parser is not None
        line = self.line + draft + self.rest
        state = scan(line, self.syntax)
        if state.quote:
            return False, False
        encode = functools.partial(str.encode, encoding="utf-8", errors="surrogatepass")
        start = len(encode(self.head))
        end = start + len(encode(line + closing(state.open)))
        root = self.parser.parse(encode(self.head + line + closing(state.open) + self.tail))
        root = root.root_node
        b = start + len(encode(self.line))
        if draft:
            clean = not _has_error(root, start, end)
        else:  # the whole window, or the window less the cursor's line (the draft's to mend)
            rest = self.parser.parse(encode(self.head + self.tail)).root_node
            clean = not root.has_error or not rest.has_error
        return clean, _in_text(root, b)


def _in_text(root: Any, b: int) -> bool:
    """Whether byte ``b`` lies inside a string or comment node."""
    node = root.descendant_for_byte_range(b, b)
    while node is not None:
        kind = node.type
        if ("string" in kind or "comment" in kind) and node.start_byte < b < node.end_byte:
            return True
        node = node.parent
    return False


def _has_error(node: Any, start: int, end: int) -> bool:
    """Whether an ERROR or MISSING node under ``node`` overlaps bytes [start, end]."""
    if node.end_byte < start or node.start_byte > end:
        return False
    if node.type == "ERROR" or node.is_missing:
        return True
    return bool(node.has_error) and any(_has_error(c, start, end) for c in node.children)


def _window(before: str) -> str:
    """The end of ``before`` parsed: WINDOW_CHARS, from a definition's head at column 0 when
    one lies in them (a parse that starts inside a docstring reads code as text), else from
    a line start."""
    if len(before) <= WINDOW_CHARS:
        return before
    lo = len(before) - WINDOW_CHARS
    found = TOP_LEVEL.search(before, lo)
    if found:
        return before[found.start() :]
    line = before.find("\n", lo)
    return before[line + 1 :] if line >= 0 else before[lo:]


def parses(cursor: Cursor) -> Callable[[str], bool]:
    """Whether a draft is well formed at ``cursor`` (not malformed: ``Judge.why``), the
    cursor's window scanned and parsed once for all the drafts asked about."""
    judge = Judge(cursor)
    return lambda draft: not judge.why(draft)


def malformed(drafts: Sequence[str], cursor: Cursor) -> list[str]:
    """Why each draft is malformed at ``cursor`` ("" for one that is not): the replay counts
    them."""
    judge = Judge(cursor)
    return [judge.why(d) for d in drafts]
