"""The codebase in the prompt: definitions' headers and recent chunks, before the window.

Issue 22 part 3, the setting ``context`` (off by default): what comparable tools do
(Continue's definitions and recent edits, Tabby's declarations, llama.vim's ring of chunks),
built only as far as measuring it needs (bench/replay_context.py, docs/benchmarks.md, "the
codebase in the prompt: verdict per model"). Small models did not read another file's
signature in an earlier oracle run, so the setting is kept only where a model reads it.

The preamble is text laid before the prompt's window (lsp_server/prompt_plan.py,
``PromptPlan.window``), one piece per item, each ``# file: PATH`` then the item's text:

1. **headers** (``definitions``): the definitions of the names the document calls or imports
   that another file defines, resolved like the definition proposals (the store's symbols
   table, imports deciding: lsp_server/definitions.py ``Resolver``); each is its header
   (ngram_db/symbols.py: a function's signature, a class's fields and method signatures);
2. **recent chunks** (``definitions+recent``): the lines before the cursor where the user
   last asked for drafts in other documents that are still open (a ring, oldest first).

Headers come before chunks; items are added in order while the budget ``contextTokens``
holds (an item that does not fit is left out, a later smaller one may still fit).

Stable, so the runner's prefix cache reuses it: the KV cache keeps the longest common prefix
of consecutive prompts (superposed/runner.py), so the preamble must not change as the user
types. Which headers is decided by the uses nearest the cursor (the budget keeps those), but
the chosen ones are laid out in the order the document first uses them, and a chunk is the
text as it was when captured. Typing inside a function therefore keeps the same preamble;
the cache's prefix holds it, and the warm-ups (lsp_server/warmup.py) prefill it with the
window. Resolutions are cached per document path and name list.

No pygls, no SQLite and no tensors here: the symbol lookup and the token counter are
functions the server passes.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lsp_server.definitions import Lookup, Resolver, imports
from lsp_server.settings import CONTEXT_MODES as MODES
from ngram_db.symbols import Symbol

RECENT_DOCUMENTS = 8  # the ring of chunks: documents remembered at most
CHUNK_LINES = 16  # lines before the cursor a chunk keeps
MAX_NAMES = 400  # names of a document resolved at most (a huge file's first ones)
_CACHE = 32  # resolutions kept (document path + names)
_CALL = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*\s*\.\s*)*([A-Za-z_]\w*)\s*\(")
_DEFINITION = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+\w+")
_NOT_CALLS = frozenset(
    {"if", "elif", "while", "for", "return", "and", "or", "not", "in", "def", "class"}
    | {"print", "len", "isinstance", "super", "lambda", "with", "assert", "yield", "await"}
)

CountTokens = Callable[[str], int]


@dataclass(frozen=True)
class Piece:
    """One item of the preamble: where it comes from and its text."""

    kind: str  # "header" or "chunk"
    path: str  # as shown after ``# file:``
    text: str
    order: int = 0  # where it is laid out among the chosen headers: the name's first use

    def render(self) -> str:
        return f"# file: {self.path}\n{self.text.rstrip()}\n\n"


def assemble(headers: Sequence[Piece], chunks: Sequence[Piece], budget: int,
             count: CountTokens) -> str:  # fmt: skip
    """The preamble: the headers that fit, then the chunks that fit, within ``budget`` tokens.

    ``headers`` come in priority order (the uses nearest the cursor first): each is taken if
    it still fits, and those taken are laid out by ``Piece.order`` (first use in the
    document), so the preamble does not reorder as the cursor moves. Chunks follow in their
    order. ``count``: tokens of a text (the model's tokenizer); each piece ends with a blank
    line, so the pieces' counts add up and the result never exceeds the budget.
    """
    used = 0
    taken: list[tuple[Piece, str]] = []
    for group in (headers, chunks):
        fitted: list[tuple[Piece, str]] = []
        for piece in group:
            text = piece.render()
            cost = count(text)
            if used + cost <= budget:
                fitted.append((piece, text))
                used += cost
        if group is headers:
            fitted.sort(key=lambda item: item[0].order)
        taken += fitted
    return "".join(text for _, text in taken)


def used_names(document: str) -> list[tuple[str, int]]:
    """The names the document calls or imports, each with the lines it is used on, in the
    order of first use (at most MAX_NAMES); a definition's own name is no use."""
    lines: dict[str, list[int]] = {}
    first: dict[str, int] = {}  # name -> the offset of its first use
    offset = 0
    for number, row in enumerate(document.split("\n")):
        if not row.lstrip().startswith("#"):
            code = _DEFINITION.sub("", row)
            shift = len(row) - len(code)
            for match in _CALL.finditer(code):
                name = match.group(1)
                if name not in _NOT_CALLS:
                    lines.setdefault(name, []).append(number)
                    first.setdefault(name, offset + shift + match.start(1))
        offset += len(row) + 1
    for local in imports(document):
        where = re.search(rf"\b{re.escape(local)}\b", document)
        at = where.start() if where else 0
        lines.setdefault(local, []).append(document.count("\n", 0, at))
        first[local] = min(first.get(local, at), at)
    order = sorted(first, key=first.__getitem__)[:MAX_NAMES]
    return [(n, line) for n in order for line in sorted(set(lines[n]))]


def shown_path(path: str, here: str) -> str:
    """``path`` as a header shows it: relative to the folder both paths share."""
    if not path or not here:
        return path
    try:
        common = os.path.commonpath([os.path.abspath(path), os.path.abspath(here)])
    except ValueError:  # different drives
        return path
    if common in ("", os.sep):
        return path
    return os.path.relpath(os.path.abspath(path), common).replace(os.sep, "/")


@dataclass
class _Chunk:
    path: str
    text: str


class ContextAssembler:
    """The preamble per request, the ring of recent chunks, and a cache of resolutions."""

    def __init__(self) -> None:
        self._recent: OrderedDict[str, _Chunk] = OrderedDict()  # uri -> its chunk, oldest first
        self._resolved: OrderedDict[tuple[str, tuple[str, ...]], dict[str, Symbol]] = OrderedDict()

    def preamble(
        self,
        mode: str,
        budget: int,
        uri: str,
        path: str,
        document: str,
        offset: int,
        open_uris: Sequence[str],
        lookup: Lookup | None,
        count: CountTokens,
    ) -> str:
        """The text before the window for a request at ``offset`` of ``document``.

        ``path``: the document's path (its own definitions are the window's, not the
        preamble's); ``open_uris``: the documents open now (chunks of closed ones go);
        ``lookup``: names -> the stores' definitions. Also notes this document's chunk for
        requests in other documents. "" when ``mode`` is off.
        """
        if mode not in MODES or mode == "off" or budget <= 0:
            return ""
        headers = self.headers(path, document, offset, lookup)
        chunks = self.chunks(uri, open_uris) if mode == "definitions+recent" else []
        self.note(uri, path, document, offset)
        return assemble(headers, chunks, budget, count)

    def headers(self, path: str, document: str, offset: int, lookup: Lookup | None) -> list[Piece]:
        """The headers of the definitions the document uses from other files: those used
        nearest the cursor first chosen, then laid out in the order of first use (stable
        while the user types)."""
        uses = used_names(document)
        if not uses or lookup is None:
            return []
        names = tuple(dict.fromkeys(n for n, _ in uses))
        resolved = self._resolve(path, document, names, lookup)
        cursor = document.count("\n", 0, offset)
        distance: dict[str, int] = {}
        for name, line in uses:
            if name in resolved:
                distance[name] = min(distance.get(name, 1 << 30), abs(line - cursor))
        # nearest first: assemble takes what fits in this order and lays it out by first use
        chosen = sorted(distance, key=lambda n: (distance[n], names.index(n)))
        pieces: dict[str, Piece] = {}
        for name in chosen:
            symbol = resolved[name]
            shown = shown_path(symbol.path, path)
            piece = Piece("header", shown, symbol.header, names.index(name))
            pieces.setdefault(f"{symbol.path}\0{symbol.header}", piece)
        return list(pieces.values())

    def _resolve(
        self, path: str, document: str, names: tuple[str, ...], lookup: Lookup
    ) -> dict[str, Symbol]:
        """name -> its definition in another file (functions and classes), cached."""
        key = (path, names)
        if key in self._resolved:
            self._resolved.move_to_end(key)
            return self._resolved[key]
        stored = lookup(list(names))  # one query for all of them
        by_name: dict[str, list[Symbol]] = {}
        for row in stored:
            by_name.setdefault(row.name, []).append(row)
        resolver = Resolver(document, path, lambda ns: [s for n in ns for s in by_name.get(n, [])])
        found: dict[str, Symbol] = {}
        for name in names:
            symbol = resolver.find(name, kind="callable")
            if symbol is not None and symbol.path != path and symbol not in resolver.own:
                found[name] = symbol
        self._resolved[key] = found
        while len(self._resolved) > _CACHE:
            self._resolved.popitem(last=False)
        return found

    def chunks(self, uri: str, open_uris: Sequence[str]) -> list[Piece]:
        """The ring's chunks of other documents that are still open, oldest first."""
        still = set(open_uris)
        for gone in [u for u in self._recent if u not in still]:
            del self._recent[gone]
        return [Piece("chunk", c.path, c.text) for u, c in self._recent.items() if u != uri]

    def forget(self, uri: str) -> None:
        """The document ``uri`` closed: its chunk goes."""
        self._recent.pop(uri, None)

    def note(self, uri: str, path: str, document: str, offset: int) -> None:
        """Remember the lines before the cursor as this document's chunk (newest last)."""
        start = offset
        for _ in range(CHUNK_LINES):
            start = document.rfind("\n", 0, start)
            if start <= 0:
                start = 0
                break
        text = document[start:offset].strip("\n")
        self._recent.pop(uri, None)
        if text.strip():
            self._recent[uri] = _Chunk(os.path.basename(path) or uri, text)
        while len(self._recent) > RECENT_DOCUMENTS:
            self._recent.popitem(last=False)
