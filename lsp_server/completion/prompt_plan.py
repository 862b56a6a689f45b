"""The prompt of one request: the window of text before the cursor, its token budget, the
FIM markers, all worked out once per request (``PromptPlan``).

The window ends at the cursor and starts at a line on a coarse grid (``prompt_text``), so
nearby requests share their start and the KV cache; when the KV cache is cold the request
decodes from the short recent window instead (``PromptPlan.choose``).
"""

from __future__ import annotations

from dataclasses import dataclass

from lsp_server.completion.cursor import CursorContext
from lsp_server.settings import DecodingSettings
from ngram_db.tokenizer import clean_text
from superposed import fim
from superposed.api import Engine
from superposed.prompt import Prompt
from superposed.runner import reusable_prefix

# Characters of text before the cursor tokenized per token of the prompt window: a token of
# code is about 4 characters, rarely more than 16; this bounds the work on huge files.
CHARS_PER_CONTEXT_TOKEN = 8
WINDOW_STEPS = 4  # the prompt window's start moves in steps of about 1/4 of its length
PROMPT_MARGIN = 8  # tokens kept free: the engine's re-tokenization may differ by one or two


def prompt_text(engine: Engine, before: str, limit: int) -> str:
    """The end of ``before`` that fits ``limit`` tokens, starting at a line on a coarse grid.

    The engine keeps the cached prompt's KV and prefills only what follows the common
    prefix. If the window started exactly ``limit`` tokens back, its start would move with
    every keystroke and nothing would be reused; on a grid of 1/WINDOW_STEPS of the window,
    nearby requests share their start (a full prefill about once per grid step).
    """
    budget = limit * CHARS_PER_CONTEXT_TOKEN
    grid = max(256, budget // (2 * WINDOW_STEPS))  # 1/WINDOW_STEPS of it at 4 chars per token
    base = max(0, len(before) - budget) // grid * grid
    text = clean_text(before[base:])
    encoded = engine.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    offsets = encoded["offset_mapping"]
    if len(offsets) <= limit:
        return text
    least = base + offsets[len(offsets) - limit][0]  # the window may start no earlier
    start = -(-least // grid) * grid  # rounded up to the grid
    if start >= len(before):
        start = least
    line = before.find("\n", start, len(before) - 1)
    return clean_text(before[line + 1 if line >= 0 else start :])


@dataclass(frozen=True)
class PromptPlan:
    """What every prompt of one request shares, worked out once: the room in the context
    and the FIM markers (None: none)."""

    engine: Engine
    context: CursorContext
    settings: DecodingSettings
    room: int  # the context's tokens left for the prompt: all but the new tokens and one
    markers: fim.FimTokens | None

    @classmethod
    def of(cls, engine: Engine, context: CursorContext, settings: DecodingSettings) -> PromptPlan:
        room = engine.max_context - settings.max_new_tokens - 1
        markers = fim.choose(
            settings.fim,
            engine.fim_tokens,
            (engine.name, getattr(engine.tokenizer, "name_or_path", "")),
        )
        return cls(engine, context, settings, room, markers)

    def window(self, max_prompt_tokens: int | None = None) -> str:
        """The text before the cursor that the prompt holds."""
        room = self.room  # the window's limit: 1 for the start token, PROMPT_MARGIN kept free
        limit = min(room, max_prompt_tokens or room) - 1 - PROMPT_MARGIN
        if self.markers is not None:  # the window before the cursor is the FIM prefix's share
            limit = fim.budgets(limit)[0]
        return prompt_text(self.engine, self.context.before, limit)

    def prompt(
        self, max_prompt_tokens: int | None = None, max_new_tokens: int | None = None
    ) -> Prompt:
        """The prompt the request decodes from (what warm-ups prefill), leaving room for
        ``max_new_tokens`` (None: the setting's; a block asks for more)."""
        new = self.settings.max_new_tokens if max_new_tokens is None else max_new_tokens
        return self.engine.prompt(
            self.window(max_prompt_tokens),
            new,
            max_prompt_tokens=max_prompt_tokens,
            fim=self.markers,
            after=self.context.following,
        )

    def cold(self, max_prompt_tokens: int | None, prompt: Prompt | None = None) -> bool:
        """Whether the KV cache lacks more than ``first_prompt_tokens`` of the request's
        prompt (``prompt``, if the caller built it already).

        Then the request answers from the short recent window instead (a fresh file costs a
        prefill of that window, not of the full one); 0 turns this off.
        """
        first = self.settings.first_prompt_tokens
        if not first or (max_prompt_tokens and max_prompt_tokens <= first):
            return False
        ids = (prompt or self.prompt(max_prompt_tokens)).ids
        return len(ids) - reusable_prefix(self.engine.runner.cached_ids, ids) > first

    def choose(self, max_prompt_tokens: int | None, max_new_tokens: int) -> tuple[Prompt, bool]:
        """The prompt a request decodes from, and whether it is the short recent window.

        The full window's prompt, unless the cache is cold for it (``cold``): then the most
        recent ``first_prompt_tokens`` tokens' (the only second prompt a request builds).
        """
        full = self.prompt(max_prompt_tokens, max_new_tokens)
        if not self.cold(max_prompt_tokens, full):
            return full, False
        return self.prompt(self.settings.first_prompt_tokens, max_new_tokens), True
