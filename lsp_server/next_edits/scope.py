"""Where a renamed name means the same thing: a local's function, else the whole text.

A name bound inside the function around the edit (a parameter, an assignment target, a
loop, ``with ... as`` or ``except ... as`` target) is that function's own: other
functions' names of the same spelling are other variables (the benchmark's renames of
``style``, ``first``, ``start_line`` proposed them: bench/next_edits.py). Read on the text
before the edit, with tree-sitter for the function's rows (tokens.Prose.function_rows).
"""

from __future__ import annotations

from lsp_server.next_edits.tokens import Prose, Token, lex

ASSIGNMENTS = frozenset(["=", "+=", "-=", "*=", "/=", "//=", "%=", "|=", "&=", ":=", "**="])
BINDERS = frozenset(["for", "as", "global", "nonlocal", "let", "var", "const"])


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
    for i, text in enumerate(texts):
        if text != name:
            continue
        after = texts[i + 1] if i + 1 < len(texts) else ""
        before = texts[i - 1] if i else ""
        if after in ASSIGNMENTS or before in BINDERS:
            return True
        if i == 0 and after == ":" and "=" in texts:
            return True  # an annotated assignment
        if after == "," and "=" in texts[i:] and all(t not in "([{" for t in texts[:i]):
            return True  # unpacking
    return False
