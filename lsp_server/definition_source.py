"""Definition proposals as a MatchSource: the engine takes them like the memory's, unchanged.

The engine consumes a request's memory through one call, ``MatchSource.match(context)``
(superposed/ngram.py): a match's next tokens weigh and join each draft's candidates
(superposed/memory.py: mix, proposals), and the prompt's match seeds whole drafts from its
continuations (superposed/memory.py: seeds). ``DefinitionSource`` wraps the request's memory:
where the context (the prompt plus a draft) ends inside a call or after ``obj.`` whose
definition resolves (lsp_server/definitions.py), it answers a match made of the proposals
instead (its next tokens the proposals' first ones, its continuations the proposals), so
that a draft after ``frobnicate_widget(`` can take ``widget, force=False)`` and a mid-line
request inside a call is offered the argument list as drafts. Elsewhere, and wherever the
memory's own match is at least as long as the proposals' weight, the memory answers.

Weight: the engine weighs a match of length l as memory_max * l / (l + memory_half)
against the model. A proposal has no length, so the setting ``definitionWeight`` (that
share, 0: off) becomes the length that the engine weighs so (``proposal_length``).
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

from lsp_server.definitions import Lookup, Resolver, proposals, scan, scan_start, site_at, site_from
from ngram_db.symbols import Symbol
from superposed.ngram import Match, MatchSource
from superposed.types import DecodeConfig

log = logging.getLogger(__name__)

SITE_TOKENS = 96  # context tokens decoded to find the call at its end
Encode = Callable[[str], list[int]]
Decode = Callable[[Sequence[int]], str]


def proposal_length(weight: float, cfg: DecodeConfig | None = None) -> int:
    """The match length the engine weighs as ``weight`` (0: none), at least the shortest
    length it uses and seeds drafts from."""
    cfg = cfg or DecodeConfig()
    if weight <= 0:
        return 0
    share = min(weight, cfg.memory_max * 0.99)
    length = math.ceil(share * cfg.memory_half / (cfg.memory_max - share))
    return max(length, cfg.memory_min_length, cfg.memory_seed_length)


class DefinitionSource:
    """A request's memory, with definition proposals where the context ends in a call."""

    def __init__(
        self,
        memory: MatchSource | None,
        resolver: Callable[[], Resolver],
        encode: Encode,
        decode: Decode,
        before: str,
        length: int,
    ) -> None:
        self.memory = memory
        self._resolver = resolver  # built at the first call site: it parses the document
        self._encode, self._decode = encode, decode
        self._before = before  # the document before the cursor
        self.length = length
        self._prompt: tuple[int, ...] | None = None  # the first context: the prompt's end
        self.proposed = 0  # matches answered with proposals (for tests and stats)

    @functools.cached_property
    def resolver(self) -> Resolver:
        return self._resolver()

    def match(self, context: Sequence[int], follow: int = 32, others: int = 0) -> Match | None:
        found = self.memory.match(context, follow, others) if self.memory is not None else None
        if self.length <= 0 or (found is not None and found.length >= self.length):
            return found
        texts = self._proposals(tuple(context))
        if not texts:
            return found
        self.proposed += 1
        return self._as_match(texts, found, follow, others)

    def _proposals(self, context: tuple[int, ...]) -> list[str]:
        """The proposals after ``context`` (the prompt's end, maybe a draft after it)."""
        if self._prompt is None:
            self._prompt = context  # the engine looks the prompt up before any draft
        draft = self._draft(context)
        return self._cached(context[-SITE_TOKENS:] if draft is None else (), draft)

    def _draft(self, context: tuple[int, ...]) -> tuple[int, ...] | None:
        """The draft's tokens in ``context``, which the engine reads as the end of the prompt
        and the draft (``(prompt + draft)[-LOOKUP_TOKENS:]``); None if it is not that."""
        head = self._prompt or ()
        for cut in range(len(head)):
            kept = len(head) - cut
            if kept <= len(context) and context[:kept] == head[cut:]:
                return context[kept:]
        return None

    @functools.cached_property
    def _base(self) -> tuple[str, list[tuple[str, int]] | None] | None:
        """The document before the prompt's end (the cursor, less the partial token the
        draft re-spells) and the brackets open there (None: in a string or a comment), or
        None where the prompt's text is not found at the document's end."""
        probe = self._decode(list(self._prompt or ()))[-200:]
        text = self._before
        for healed in range(min(64, len(text)) + 1):
            if probe and text.endswith(probe, 0, len(text) - healed):
                base = text[: len(text) - healed]
                return base, scan(base, scan_start(base))
        return None

    @functools.lru_cache(maxsize=256)  # noqa: B019 - one source per request, dropped with it
    def _cached(self, tail: tuple[int, ...], draft: tuple[int, ...] | None) -> list[str]:
        if draft is not None and self._base is not None:
            base, frames = self._base  # the whole document's brackets, then the draft's
            text = base + self._decode(list(draft))
            site = site_from(text, scan(text, len(base), frames) if frames is not None else None)
        else:  # the context's own text alone
            text = self._decode(list(tail or self._prompt or ()))
            site = site_at(text)
        if site is None:  # not in a call or after a dot: no document parse needed
            return []
        try:
            return proposals(text, self.resolver, site=site)
        except Exception:  # a bug here must not cost the request its drafts
            log.exception("definitions: no proposals for this context")
            return []

    def _as_match(self, texts: list[str], found: Match | None, follow: int, others: int) -> Match:
        """The proposals as a match: next tokens counted by rank. Its continuations (what
        seeds drafts) are whole: first the best proposal that closes the call, then the
        memory's own (a shorter match still seeds its line), then the other proposals."""
        ids = [t[:follow] for t in map(self._encode, texts) if t]
        counts: dict[int, int] = {}
        for rank, tokens in enumerate(ids):
            counts[tokens[0]] = counts.get(tokens[0], 0) + len(ids) - rank
        ranked = sorted(range(len(ids)), key=lambda i: (not texts[i].endswith(")"), i))
        best, *rest = [ids[i] for i in ranked]
        if others and found is not None:
            rest = [found.continuation, *found.others, *rest]
        return Match(self.length, counts, best, rest[:others] if others else [])


def with_definitions(
    memory: MatchSource | None,
    tokenizer: Any,
    document: str,
    path: str,
    before: str,
    stores: Sequence[Any],
    weight: float,
) -> MatchSource | None:
    """The request's memory with definition proposals (the memory itself when ``weight``
    is 0). ``stores``: NgramStores whose symbols tables the names are looked up in (the
    codebase's, the user's); ``tokenizer``: the model's (a transformers tokenizer)."""
    length = proposal_length(weight)
    if length == 0:
        return memory
    encode, decode = token_functions(tokenizer)
    return DefinitionSource(
        memory,
        lambda: Resolver(document, path, store_lookup(stores)),
        encode,
        decode,
        before,
        length,
    )


def store_lookup(stores: Sequence[Any]) -> Lookup:
    """Names -> their definitions in ``stores``; a store that fails gives none (the
    server reports store errors where it reads their counts)."""
    from ngram_db.errors import NgramStoreError

    def lookup(names: Sequence[str]) -> list[Symbol]:
        found: list[Symbol] = []
        for store in stores:
            try:
                found += store.symbols_named(names)
            except NgramStoreError as err:
                log.info("definitions: %s", err)
        return found

    return lookup


def token_functions(tokenizer: Any) -> tuple[Encode, Decode]:
    """Encode and decode of a transformers tokenizer (or a ``tokenizers.Tokenizer``),
    without special tokens."""

    def encode(text: str) -> list[int]:
        encoded = tokenizer.encode(text, add_special_tokens=False)
        return list(getattr(encoded, "ids", encoded))

    def decode(ids: Sequence[int]) -> str:
        return str(tokenizer.decode(list(ids)))

    return encode, decode
