"""The units of a next-edit pattern: a line's tokens, and whether a place is prose.

A pattern is written in tokens, so that a site with other spacing is the same situation:
names, numbers, one-line string literals (one unit: an edit inside a string changes that
string), the common multi-character operators, and any other character alone. Lines are
lexed alone (patterns never span lines), which a regular expression does for any language.

Whether a place lies in a string or a comment comes from tree-sitter (the grammars of
tree_sitter_language_pack, as lsp_server/completion/syntax.py reads them), which sees docstrings and
block comments that a line alone cannot show; for a language without a grammar, from the
line's own quotes and ``#``/``//``.
"""

from __future__ import annotations

import functools
import keyword
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from lsp_server.completion.syntax import grammar_name, parser_for

_LEXER = re.compile(
    r"""(?P<string>[rRbBuUfF]{0,2}(?:"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\\n])*`))
    |(?P<name>[^\W\d]\w*)
    |(?P<number>\d[\w.]*)
    |(?P<op>==|!=|<=|>=|->|=>|::|\*\*|//|<<|>>|&&|\|\||\+=|-=|\*=|/=|:=|\.\.\.|\S)""",
    re.VERBOSE,
)
# Parsed texts kept, one per open document (the edited one and those that hold sites): a
# parse of a 2,000-line file costs about 8 ms here, and an ended change's pattern and its
# sites, then the request that follows, read the same texts
# (bench/results/next_edits_speed.json). A tree costs about 24 bytes a character (a 1 MB
# file: +24 MB resident, 0.25 s, holding the GIL): at most PROSE_KEPT documents and
# PROSE_KEPT_CHARS characters of them, and a closed document's goes (``forget``).
PROSE_KEPT = 8
PROSE_KEPT_CHARS = 2_000_000
# tree-sitter's functions (Python, JavaScript/TypeScript, Go, Rust, Java, C, Ruby, ...): a
# local name's rename stays inside the one that binds it (scope.py).
FUNCTIONS = frozenset(
    [
        "function_definition",
        "function_declaration",
        "method_definition",
        "method_declaration",
        "function_item",
        "func_literal",
        "arrow_function",
        "function_expression",
        "function",
        "method",
        "lambda",
    ]
)
# Names that are the language's, not the user's: never renamed.
KEYWORDS = frozenset(keyword.kwlist) | frozenset(
    [
        "self",
        "cls",
        "this",
        "true",
        "false",
        "null",
        "nil",
        "None",
        "True",
        "False",
        "var",
        "let",
        "const",
        "function",
        "return",
        "if",
        "else",
        "for",
        "while",
        "do",
        "in",
        "of",
        "new",
        "fn",
        "pub",
        "mut",
        "impl",
        "use",
        "mod",
        "struct",
        "enum",
        "int",
        "str",
        "bool",
        "float",
        "void",
        "auto",
        "static",
        "public",
        "private",
        "protected",
        "package",
        "func",
        "type",
        "interface",
    ]
)


@dataclass(frozen=True)
class Token:
    """One unit of a line: its text, its kind and where it lies in the line (characters)."""

    text: str
    kind: str  # string | name | number | op
    start: int
    end: int


@functools.lru_cache(maxsize=4096)
def lex(line: str) -> tuple[Token, ...]:
    """The tokens of one line (no line break in it); spaces are no tokens."""
    out = []
    for found in _LEXER.finditer(line):
        kind = found.lastgroup or "op"
        out.append(Token(found.group(), kind, found.start(), found.end()))
    return tuple(out)


def is_user_name(token: Token) -> bool:
    """A name the user chose (not a keyword): what a rename may change."""
    return token.kind == "name" and token.text not in KEYWORDS


class Prose:
    """Which places of one text are inside a string or a comment (parsed once, lazily)."""

    def __init__(self, text: str, language: str) -> None:
        self.text = text
        self.language = language
        self._tree: Any = None
        self._parsed = False
        self._lines: list[str] | None = None
        self._lock = threading.Lock()  # one parse, whichever thread asks first

    def _line(self, row: int) -> str:
        if self._lines is None:
            self._lines = self.text.split("\n")
        return self._lines[row] if row < len(self._lines) else ""

    def _parse(self) -> Any:
        with self._lock:
            if not self._parsed:
                grammar = grammar_name(self.language)
                parser = parser_for(grammar) if grammar else None
                if parser is not None:
                    self._tree = parser.parse(self.text.encode("utf-8", "surrogatepass"))
                self._parsed = True
        return self._tree

    def _node(self, row: int, column: int) -> Any:
        """The smallest node at (row, column), None without a grammar."""
        tree = self._parse()
        if tree is None:
            return None
        byte = len(self._line(row)[:column].encode("utf-8", "surrogatepass"))
        return tree.root_node.descendant_for_point_range((row, byte), (row, byte + 1))

    def function_rows(self, row: int, column: int) -> tuple[int, int] | None:
        """The first and last rows of the innermost function around (row, column)."""
        node = self._node(row, column)
        while node is not None:
            if node.type in FUNCTIONS:
                return node.start_point[0], node.end_point[0]
            node = node.parent
        return None

    def broken(self, row: int) -> bool:
        """Whether the parse holds an error (or a missing token) on ``row``: the code there is
        half made (False without a grammar)."""
        tree = self._parse()
        if tree is None or not tree.root_node.has_error:
            return False
        stack = [tree.root_node]
        while stack:
            node = stack.pop()
            if node.start_point[0] > row or node.end_point[0] < row:
                continue
            if node.is_error or node.is_missing:
                return True
            if node.has_error:
                stack.extend(node.children)
        return False

    def at(self, row: int, column: int) -> str | None:
        """What holds the character at (row, column) (characters): "string", "comment" or
        None (code). A string literal that begins there is code: the literal is the unit
        (``"a/b"`` -> ``"a/c"`` is an edit in code); inside one that began before, prose."""
        node = self._node(row, column)
        if node is None:
            return _line_prose(self._line(row), column)
        here = (row, len(self._line(row)[:column].encode("utf-8", "surrogatepass")))
        while node is not None:
            if "comment" in node.type:
                return "comment"
            stringy = "string" in node.type or node.type in ("heredoc_body", "char_literal")
            if stringy and tuple(node.start_point) < here:
                return "string"
            node = node.parent
        return None


_kept: OrderedDict[str, Prose] = OrderedDict()  # uri -> its text's Prose, the newest last
_kept_lock = threading.Lock()


def prose_of(text: str, language: str, uri: str | None = None) -> Prose:
    """The Prose of ``text``; that of an open document (``uri``) is kept (see PROSE_KEPT) in
    place of its earlier texts', so that the next reader of the same text parses nothing."""
    if uri is not None:
        with _kept_lock:
            found = _kept.get(uri)
            if found is not None and found.text == text and found.language == language:
                _kept.move_to_end(uri)
                return found
    prose = Prose(text, language)
    if uri is not None:
        with _kept_lock:
            _kept[uri] = prose
            _kept.move_to_end(uri)
            total = sum(len(p.text) for p in _kept.values())
            while len(_kept) > PROSE_KEPT or (total > PROSE_KEPT_CHARS and len(_kept) > 1):
                total -= len(_kept.popitem(last=False)[1].text)
    return prose


def forget(uri: str) -> None:
    """didClose: the document's parse goes."""
    with _kept_lock:
        _kept.pop(uri, None)


def kept() -> list[str]:
    """The documents whose parse is kept, the least recent first (tests)."""
    with _kept_lock:
        return list(_kept)


def _line_prose(line: str, column: int) -> str | None:
    """Without a grammar: inside a one-line string or after ``#`` or ``//`` of the line."""
    for token in lex(line):
        if token.start > column:
            return None
        if token.kind == "string" and token.start < column < token.end:
            return "string"
        if token.kind == "op" and token.text in ("#", "//"):
            return "comment"
    return None
