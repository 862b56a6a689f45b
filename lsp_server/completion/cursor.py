"""The document split at the cursor: the text before it (the prompt comes from its end), the
rest of its line (what a draft must not merely repeat), and what the request knows around it."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from lsp_server.completion.layout import Layout

# Characters after the cursor kept for a fill-in-the-middle prompt (which uses at most a
# quarter of the prompt window, a few thousand characters): bounds the copy on huge files.
FOLLOWING_CHARS = 32_768
INDENT_UNIT = 4  # spaces per indentation level, to tell a dedent from indentation being typed


@dataclass(frozen=True)
class CursorContext:
    """The document split at the cursor."""

    before: str  # all text before the cursor (the prompt comes from its end)
    after: str  # the rest of the cursor's line
    following: str = ""  # the text after the cursor, up to FOLLOWING_CHARS (for FIM prompts)
    # The document's language: an LSP language id, its file name or URI; "": unknown (then
    # lineMode auto decides by the text alone, syntax.py).
    language: str = ""
    # The user did not ask (ghost text as you type): where the syntax wants nothing there
    # (syntax.decide's "none"), such a request is answered with no drafts.
    automatic: bool = False

    @property
    def line_before(self) -> str:
        """The cursor's line up to the cursor."""
        return self.before[self.before.rfind("\n") + 1 :]

    @functools.cached_property
    def layout(self) -> Layout:
        """The document's line ending and indentation around the cursor (layout.py), read
        once per request: the block's end rules and the drafts' layout both use it."""
        return Layout.of(self.before, self.following, self.language)

    @property
    def blank_line(self) -> bool:
        """The cursor's line is blank (indentation at most): a draft continues this line."""
        return not self.before[self.before.rfind("\n") + 1 :].strip() and not self.after.strip()

    @property
    def indentation_complete(self) -> bool:
        """The cursor is on a blank line after its whole indentation: a draft indents no
        further. Whole: as deep as the line above's (unless that line opens a block: ends
        with ``:`` or an opening bracket), or deeper or shallower by whole levels (tabs, or
        multiples of four spaces). Other indentation may still be being typed (3 of 8
        spaces): drafts may complete it."""
        start = self.before.rfind("\n") + 1
        indentation = self.before[start:]
        if not indentation or not self.blank_line:
            return False
        above, end = "", start - 1  # end: the line break before the cursor's line
        while end > 0 and not above.strip():
            begin = self.before.rfind("\n", 0, end) + 1
            above, end = self.before[begin:end], begin - 1
        level = len(above) - len(above.lstrip())
        opens = above.rstrip().endswith((":", "(", "[", "{"))
        if len(indentation) == level:
            return not opens  # after a block opener the block's indentation is still to come
        # Deeper (a block's body) or shallower (a dedent) by whole levels; otherwise it may
        # still be being typed.
        return "\t" in indentation or (len(indentation) - level) % INDENT_UNIT == 0

    @classmethod
    def at(
        cls, text: str, offset: int, language: str = "", automatic: bool = False
    ) -> CursorContext:
        end = text.find("\n", offset)
        return cls(
            before=text[:offset],
            after=text[offset : len(text) if end < 0 else end],
            following=text[offset : offset + FOLLOWING_CHARS],
            language=language,
            automatic=automatic,
        )
