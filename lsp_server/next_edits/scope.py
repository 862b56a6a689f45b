"""Where a renamed name means the same thing: a local's function, else the whole text.

A name bound inside the function around the edit (a parameter, an assignment target, a
loop, ``with ... as`` or ``except ... as`` target) is that function's own: other
functions' names of the same spelling are other variables (the benchmark's renames of
``style``, ``first``, ``start_line`` proposed them: bench/next_edits.py). Read on the text
before the edit, with tree-sitter for the function's rows (tokens.Prose.function_rows).
"""

from __future__ import annotations

import re

from lsp_server.next_edits.tokens import Prose, Token, lex

ASSIGNMENTS = frozenset(["=", "+=", "-=", "*=", "/=", "//=", "%=", "|=", "&=", ":=", "**="])
BINDERS = frozenset(["for", "as", "global", "nonlocal", "let", "var", "const"])
DEFINERS = frozenset(
    ["def", "class", "function", "fn", "func", "struct", "enum", "interface", "type", "trait"]
)
IMPORTERS = frozenset(["import", "from", "use", "require", "include"])
IMPORT_ITEMS = 60  # lines of one parenthesized import read back at most
_ITEMS = re.compile(r"[\w\s,]*")  # a line of names and commas (an import's items)


def local_rows(
    before: str, prose: Prose, row: int, column: int, name: str
) -> tuple[int, int] | None:
    """The rows of the innermost function around (row, column) when ``name`` is bound in
    it; None: not a local (a global, an import, a module's or class's name)."""
    rows = prose.function_rows(row, column)
    if rows is None:
        return None
    lines = before.split("\n")[rows[0] : rows[1] + 1]
    if _in_parameters(lines, name):
        return rows
    for line in lines[1:]:
        if _binds(lex(line), name):
            return rows
    return None


def _in_parameters(lines: list[str], name: str) -> bool:
    """Whether ``name`` is among the parameters: the tokens from the header's first ``(``
    to its match (over lines, for a signature spread over several)."""
    depth, started = 0, False
    for line in lines:
        for token in lex(line):
            if token.text == "(":
                depth, started = depth + 1, True
            elif token.text == ")":
                depth -= 1
                if started and depth == 0:
                    return False
            elif started and depth >= 1 and token.text == name:
                return True
        if not started and line.rstrip().endswith((":", "{")):
            return False  # a header without parentheses (a lambda's, Ruby's)
    return False


def _binds(tokens: tuple[Token, ...], name: str) -> bool:
    """Whether the line binds ``name``: ``name =``, ``name: T =``, ``for name``, ``as name``,
    ``a, name = ...``."""
    texts = [t.text for t in tokens]
    depth = 0
    for i, text in enumerate(texts):
        depth += (text in "([{") - (text in ")]}")
        before = texts[i - 1] if i else ""
        if text != name or before == ".":
            continue  # ``self.name = ...`` binds an attribute, not the name
        after = texts[i + 1] if i + 1 < len(texts) else ""
        if after == "=" and depth > 0:
            continue  # a keyword argument's name (``f(name=1)``)
        if after in ASSIGNMENTS or before in BINDERS:
            return True
        if i == 0 and after == ":" and "=" in texts:
            return True  # an annotated assignment
        if after == "," and "=" in texts[i:] and all(t not in "([{" for t in texts[:i]):
            return True  # unpacking
    return False


def binds(tokens: tuple[Token, ...], name: str) -> bool:
    """Whether the line binds ``name`` (see _binds) or declares it a parameter: in a
    definition's header, or alone on a line of a signature spread over several
    (``name: T,``). A rename's sites are the name's uses: a line that binds it again makes
    a variable of its own (the benchmark's renames reached tuple targets, loop targets and
    parameters that the commits kept: bench/next_edits.py)."""
    if _binds(tokens, name):
        return True
    texts = [t.text for t in tokens]
    if name not in texts:
        return False
    if texts[0] in ("def", "lambda", "async", "function", "fn", "func"):
        return _in_parameters([" ".join(texts)], name)
    return texts[0] == name and len(texts) > 2 and texts[1] == ":" and texts[-1] == ","


def defined_elsewhere(text: str, name: str, row: int) -> bool:
    """Whether a row of ``text`` other than ``row`` defines ``name`` (``def``, ``class``...)
    or imports it (one import line, or an item of a parenthesized one): the name is that
    definition's, and a use renamed alone switched to another thing."""
    at, here, counted = text.find(name), 0, 0  # ``here``: the row of offset ``counted``
    while at >= 0:
        first = text.rfind("\n", 0, at) + 1
        last = text.find("\n", at)
        last = len(text) if last < 0 else last
        here, counted = here + text.count("\n", counted, first), first
        line = text[first:last]
        # only a line that may define or import it is lexed (a common name stands on
        # hundreds of lines: 140 ms for 876 in a 360 KB file when each was lexed and counted)
        head = line.lstrip().split(" ", 1)[0]
        if head in DEFINERS:  # a module's: at column 0, the name next
            maybe = line.startswith(head + " ") and line[len(head) :].lstrip().startswith(name)
        else:
            maybe = head in IMPORTERS or _ITEMS.fullmatch(line) is not None
        if here != row and maybe and _defines(text, first, lex(line), name):
            return True
        at = text.find(name, last)
    return False


def _defines(text: str, first: int, tokens: tuple[Token, ...], name: str) -> bool:
    """Whether the line (starting at offset ``first``) defines or imports ``name``."""
    texts = [t.text for t in tokens]
    if name not in texts:
        return False
    if texts[0] in DEFINERS and len(texts) > 1 and texts[1] == name:
        return tokens[0].start == 0  # a module's (a method is an attribute: found with ".")
    if texts[0] in IMPORTERS:
        return "import" not in texts or name in texts[texts.index("import") + 1 :]
    if not all(t == name or t == "," for t in texts):
        return False
    # an item of ``from x import (`` ... ``)``: the lines above are items, then the opener
    start = first
    for _ in range(IMPORT_ITEMS):  # IMPORT_ITEMS lines back, not the whole text split
        if start == 0:
            break
        start = text.rfind("\n", 0, start - 1) + 1
    for line in reversed(text[start:first].split("\n")[:-1]):
        above = [t.text for t in lex(line)]
        if above and above[0] in IMPORTERS and above[-1] == "(":
            return True
        if not all(t.kind == "name" or t.text == "," for t in lex(line)):
            return False
    return False
