"""What the code wants at the cursor: nothing, a line or a block (``lineMode: auto``).

Code arrives in blocks (issue 23: most added lines come in runs of two or more), but a block
is wrong inside an unfinished expression or mid-line. The syntax at the cursor decides, read
with tree-sitter (``tree_sitter_language_pack``'s bundled grammars, so not only Python); for
a language without a grammar, the same rules run on the text alone (brackets counted by
characters, strings and comments guessed from quotes and ``#``/``//``).

The rules, first match wins:

- ``none``: the cursor splits a word (a word character on each side, ``fo|o``): inserting
  there breaks a name. Conservative on purpose: only that. Inside strings and comments a line
  of prose is still useful, so they get ``line``.
- ``line``: text sits right of the cursor (mid-line); the cursor is inside a string or
  comment; or inside an unfinished expression (an open ``(`` or ``[``: arguments, a list
  spread over lines); or at the end of a line with code that opens no block.
- ``block``: at the end of a line that opens a block (its last token ``:``, ``{``, ``do``,
  ``then``; ``:`` only outside brackets); on a blank line (indentation at most) outside
  brackets: an empty body, the end of a block, or between two statements (the drafts then
  stop where they would repeat the next line, ``completion.block_stop``).

``{`` counts as a block opener and not as an open expression: a multi-line object or dict
literal is a block of lines too, and a callback's body after ``foo(function() {`` is a block.

Parse cost: a full parse per request, of at most ``WINDOW_CHARS`` before the cursor (from a
definition at column 0) and ``FOLLOWING_CHARS`` after it; ``bench/syntax_cost.py`` times a
2,000-line file (``bench/results/syntax_cost.json``).
"""

from __future__ import annotations

import functools
import re
from typing import Any, Literal

from ngram_db.languages import language_of

Decision = Literal["none", "line", "block"]
WINDOW_CHARS = 32_000  # text before the cursor parsed at most (about 800 lines)
FOLLOWING_CHARS = 4_000  # and after it: enough for the parser to close the cursor's block
OPENERS = (":", "{", "do", "then")  # a line whose last token is one of these opens a block
_OPEN, _CLOSE = "([", ")]"
# A line where a parse may start: at column 0, a definition's head (a name and its bracket
# or body follow the keyword, so a docstring's prose line that starts with "module" or
# "from" is none): Python, JavaScript/TypeScript, Rust, Go.
TOP_LEVEL = re.compile(
    r"^(?:(?:async\s+)?def\s+\w+\s*\(|class\s+\w+\s*[:({]|class\s+\w+\s+extends\b|@\w"
    r"|(?:export\s+)?(?:default\s+)?(?:async\s+)?function\s*\*?\s*\w*\s*\("
    r"|(?:pub(?:\(\w+\))?\s+)?(?:async\s+)?fn\s+\w+|func\s+[\w(]|impl\b[^\n]*\{)",
    re.MULTILINE,
)

# LSP language ids (and ngram_db.languages names) -> tree-sitter-language-pack grammars,
# where the two differ; any other id is tried as a grammar name as it is.
_GRAMMARS = {
    "typescriptreact": "tsx",
    "javascriptreact": "javascript",
    "shellscript": "bash",
    "shell": "bash",
    "sh": "bash",
    "c#": "csharp",
    "objective-c": "objc",
}


def grammar_name(language: str) -> str | None:
    """The grammar for an LSP language id, a file name, a path or a URI; None: unknown."""
    if not language:
        return None
    name = language.lower()
    if "/" in name or "." in name:
        name = language_of(language) or ""
        if not name:
            return None
    return _GRAMMARS.get(name, name)


@functools.lru_cache(maxsize=32)
def parser_for(grammar: str) -> Any:
    """A tree-sitter parser for ``grammar``; None when the pack has none."""
    try:
        from tree_sitter_language_pack import get_parser

        return get_parser(grammar)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 -- an unknown name raises LookupError or others
        return None


def decide(before: str, following: str, language: str = "") -> Decision:
    """none | line | block for a cursor with ``before`` left of it and ``following`` right.

    ``language``: an LSP language id (``python``), a file name or URI, or "" (unknown: the
    text-only rules).
    """
    start = before.rfind("\n") + 1
    line, end = before[start:], following.find("\n")
    after = following if end < 0 else following[:end]
    if line and after and _word(line[-1]) and _word(after[0]):
        return "none"
    if after.strip():
        return "line"
    grammar = grammar_name(language)
    parser = parser_for(grammar) if grammar else None
    tree = parser is not None
    in_text, depth, last = _tree_facts(parser, before, following) if tree else _text_facts(before)
    if in_text:
        return "line"
    if line.strip():  # the end of a line with code
        opens = last == "{" or (last in OPENERS and depth == 0)
        return "block" if opens else "line"
    return "line" if depth > 0 else "block"


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _window(before: str) -> str:
    """The end of ``before`` parsed: at most WINDOW_CHARS, from a line at column 0 that starts
    a definition (``TOP_LEVEL``). Any line at column 0 is not enough: a docstring's lines can
    sit there, and a parse that starts inside a string reads code as text and text as code
    (the replay's flask files did). Without such a line, the whole text is parsed."""
    if len(before) <= WINDOW_CHARS:
        return before
    found = TOP_LEVEL.search(before, len(before) - WINDOW_CHARS)
    return before[found.start() :] if found else before


def _tree_facts(parser: Any, before: str, following: str) -> tuple[bool, int, str]:
    """(the cursor is inside a string or comment, open ( and [ at the cursor, the last token
    before the cursor on its line or "") from the syntax tree."""
    head = _window(before).encode("utf-8", "surrogatepass")
    b = len(head)
    tail = following[:FOLLOWING_CHARS].encode("utf-8", "surrogatepass")
    tree = parser.parse(head + tail)
    root = tree.root_node
    node = root.descendant_for_byte_range(b, b)
    while node is not None:
        kind = node.type
        if ("string" in kind or "comment" in kind) and node.start_byte < b < node.end_byte:
            return True, 0, ""
        node = node.parent
    p = len(head.rstrip())  # the byte after the last non-whitespace one before the cursor
    if p == 0:
        return False, 0, ""
    token = root.descendant_for_byte_range(p - 1, p)
    if token is not None and "comment" in token.type:
        return True, 0, ""  # a line comment just before the cursor
    last = ""
    if token is not None and b"\n" not in head[p:]:
        last = head[token.start_byte : token.end_byte].decode("utf-8", "replace")
    return False, _open_depth(token, b), last


def _open_depth(token: Any, b: int) -> int:
    """Open ( and [ at byte ``b``: in each ancestor of the last token, the bracket tokens among
    its direct children before ``b`` (matched pairs cancel; MISSING ones have no width)."""
    depth = 0
    node = token.parent if token is not None else None
    while node is not None:
        running = 0
        for child in node.children:
            if child.start_byte >= b:
                break
            if child.end_byte == child.start_byte:
                continue  # a MISSING token tree-sitter inserted
            if child.type in _OPEN:
                running += 1
            elif child.type in _CLOSE and running > 0:
                running -= 1
        depth += running
        node = node.parent
    return depth


def _text_facts(before: str, lines: int = 200) -> tuple[bool, int, str]:
    """The same facts from the last ``lines`` lines' characters (no grammar for the language):
    quotes open on the cursor's line, brackets counted outside quotes and ``#``/``//``."""
    start = len(before)
    for _ in range(lines):
        start = before.rfind("\n", 0, start)
        if start < 0:
            break
    depth, quote, in_text = 0, "", False
    for row in before[start + 1 :].split("\n"):
        quote, i = "", 0
        while i < len(row):
            ch = row[i]
            if quote:
                if ch == "\\":
                    i += 1
                elif ch == quote:
                    quote = ""
            elif ch in "\"'`":
                quote = ch
            elif ch == "#" or row.startswith("//", i):
                break
            elif ch in _OPEN:
                depth += 1
            elif ch in _CLOSE:
                depth = max(0, depth - 1)
            i += 1
        in_text = bool(quote)
    code = before[before.rfind("\n") + 1 :].rstrip()
    last = ""
    for opener in OPENERS:
        if code.endswith(opener) and (len(opener) == 1 or not _word(code[-len(opener) - 1 :][0])):
            last = opener
    return in_text, depth, last
