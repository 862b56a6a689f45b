"""A draft sent as a snippet completion item goes in as drafted once a snippet engine has
added the cursor line's indentation to its later lines (items.snippet_body)."""

from __future__ import annotations

from lsp_server.completion.items import snippet_body


def expand(body: str, line: str) -> str:
    """What vim.snippet, LuaSnip and VS Code insert for a literal body on ``line``."""
    indentation = line[: len(line) - len(line.lstrip())]
    return body.replace("\\$", "$").replace("\n", "\n" + indentation)


def test_a_block_goes_in_as_drafted() -> None:
    line = "    def perimeter(self):"
    draft = '\n        """The perimeter."""\n        return 4 * self.side'
    assert expand(snippet_body(draft, line), line) == draft


def test_one_line_and_unindented_lines_are_unchanged() -> None:
    assert snippet_body("return x", "    ") == "return x"
    assert snippet_body("if x:\n    y = $1", "") == "if x:\n    y = \\$1"
