"""The document as the model reads it: LF line breaks and, where tabs indent a language
usually indented with spaces, those spaces; the drafts back in the document's own layout.

Prompted as it was, a CRLF document got other drafts than the same text with LF, and
after a line ending in ``:`` broken ones that the parse check dropped, every one (issue 51:
the drafts differed at 7 of 12 cursors of one file); a tab-indented one others again. The
model and the memory read little of either: a request's text becomes ``plain`` once, where
it comes in (``plain_request``: the text around the cursor and the open documents, which the
memory indexes at the same offsets), and its drafts go back to the document's line ending and
indentation (``Plain.back``, lsp_server/completion/layout.py) on the way out. Go and Makefiles keep
their tabs (the usual indentation there, ``layout.DEFAULT_UNITS``), and so does a document
that aligns with spaces after its tabs (the spaces would not come back as they were).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.layout import DEFAULT_UNITS, SPACES, Layout
from lsp_server.completion.request import Request
from lsp_server.completion.syntax import grammar_name

_LEADING_TABS = re.compile(r"^\t+", re.MULTILINE)


@dataclass(frozen=True)
class Plain:
    """How a request's text was made plain: its document's layout, and the spaces that
    stand for one of its tabs ("": tabs kept)."""

    layout: Layout
    line: str  # the cursor's line before the cursor, as the document has it
    unit: str = ""

    @classmethod
    def of(cls, context: CursorContext) -> Plain:
        layout = context.layout
        usual = DEFAULT_UNITS.get(grammar_name(context.language) or "", " " * SPACES)
        tabs = layout.unit == "\t" and usual != "\t" and not layout.aligns
        return cls(layout, context.line_before, usual if tabs else "")

    def text(self, text: str, line_start: bool = True) -> str:
        """``text`` with LF line breaks and each line's leading tabs as the unit's spaces
        (``line_start``: the text begins a line, else its first line is left as it is)."""
        if "\r\n" in text:
            text = text.replace("\r\n", "\n")
        if not self.unit or "\t" not in text:
            return text
        if line_start:
            return _LEADING_TABS.sub(lambda m: self.unit * len(m.group()), text)
        head, sep, rest = text.partition("\n")
        return head + sep + self.text(rest) if sep else text

    def document(self, text: str, offset: int) -> str:
        """The document ``text`` made plain, the cursor at ``offset``: the text before it and
        the text after it each as the context's (``context``), so that the plain text
        before the cursor is the plain document's up to ``len`` of it."""
        if not self.unit and "\r\n" not in text:
            return text  # plain already (most documents): no copy
        head = text[:offset]
        return self.text(head) + self.text(text[offset:], self._inside_indentation(head))

    def context(self, context: CursorContext) -> CursorContext:
        """The text around the cursor made plain (``text``)."""
        at_start = self._inside_indentation(context.before)
        following = self.text(context.following, at_start)
        after = self.text(context.after, at_start)
        if after.endswith("\r") and following.startswith(after[:-1] + "\n"):
            after = after[:-1]  # the CR of the cursor line's CRLF
        return replace(context, before=self.text(context.before), after=after, following=following)

    def back(self, draft: str) -> str:
        """A draft of the plain text in the document's line ending and indentation."""
        if self.unit:
            draft = self.layout.lines(draft, self.line, step=len(self.unit))
        return self.layout.ends(draft)

    @staticmethod
    def _inside_indentation(before: str) -> bool:
        """The cursor is in its line's indentation: the text after it begins the line's
        leading whitespace too."""
        return not before[before.rfind("\n") + 1 :].strip(" \t")


def plain_request(request: Request) -> tuple[Request, Plain]:
    """The request as the model and the memory read it (the module), and how its drafts go
    back. The requesting document is made plain as its context is, at the cursor's offset;
    the other open documents get LF line breaks (their own indentation: a draft that copies
    one is laid out by layout.Layout.lines)."""
    context = request.context
    plain = Plain.of(context)
    lf = Plain(Layout(), "")
    offset = len(context.before)
    where = request.where
    documents = {
        uri: plain.document(text, offset) if uri == where.uri else lf.text(text)
        for uri, text in where.documents.items()
    }
    where = replace(where, documents=documents)
    return replace(request, context=plain.context(context), where=where), plain
