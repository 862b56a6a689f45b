"""Fill-in-the-middle: a prefix-suffix-middle (PSM) prompt for models trained for it.

Code models trained for FIM (StarCoder/StarCoder2, Qwen2.5-Coder, DeepSeek-Coder, CodeGemma)
read ``<prefix marker> before <suffix marker> after <middle marker>`` and continue with the
text that goes between. Their tokenizers spell the three markers in one of a few known ways
(``FIM_SPELLINGS``); ``fim_tokens`` finds them in the vocabulary, written as they are or in
byte-level BPE's stand-ins for their bytes: a GGUF file's byte-level vocabulary, as
transformers reads it, holds DeepSeek-Coder's "<｜fim▁begin｜>" so (its characters are
not all stand-ins), where a tokenizer.json holds it as written.

A tokenizer with FIM tokens does not prove that the model was trained to use them: small
models that reuse StarCoder's tokenizer (the SmolLM family) carry ``<fim_prefix>`` and
friends untrained. So the ``fim`` setting's ``auto`` needs both: FIM tokens in the
tokenizer, and a model name that is not one of ``NOT_TRAINED_FOR_FIM`` (matched in the
model's name and its tokenizer's source path). ``on`` trusts the tokenizer alone, ``off``
always prompts left to right. A name list is crude, but the model's files say nothing
about its training, and a wrong "on" (a model seeing markers it never learned) hurts more
than a wrong "off" (the left-to-right prompt every model handles).

The prompt keeps the end of the text before the cursor (most of the budget) and the start
of the text after it (at most ``SUFFIX_SHARE`` of the budget, cut at a line end). Its
layout puts the prefix first, so a request whose text before the cursor only grew reuses
the cached prefix (only the suffix and what was typed are prefilled again).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from superposed.options import FIM_MODES
from superposed.prompt import Prompt, adds_bos, encode_healed, truncate
from superposed.vocab import Vocab, byte_level

# (prefix, suffix, middle) markers, in PSM order.
FIM_SPELLINGS: tuple[tuple[str, str, str], ...] = (
    ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),  # StarCoder, StarCoder2, SantaCoder
    ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),  # Qwen2.5-Coder, CodeGemma
    ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"),  # DeepSeek-Coder
)

# Lower-case name parts of models whose tokenizer has FIM tokens they were not trained on.
NOT_TRAINED_FOR_FIM = ("smollm",)

SUFFIX_SHARE = 4  # the suffix gets at most 1/SUFFIX_SHARE of the prompt's tokens
MARKERS = 3
CHARS_PER_SUFFIX_TOKEN = 16  # characters after the cursor tokenized per suffix token, at most


@dataclass(frozen=True)
class FimTokens:
    """The ids of a tokenizer's three FIM markers."""

    prefix: int
    suffix: int
    middle: int


def fim_tokens(tokenizer: Any) -> FimTokens | None:
    """The tokenizer's FIM markers by their known spellings (as written, or byte-level);
    None when it has none."""
    vocab = tokenizer.get_vocab()
    for spelling in FIM_SPELLINGS:
        for written in (spelling, tuple(byte_level(marker) for marker in spelling)):
            if all(marker in vocab for marker in written):
                prefix, suffix, middle = (int(vocab[marker]) for marker in written)
                return FimTokens(prefix, suffix, middle)
    return None


def choose(mode: str, tokens: FimTokens | None, names: Iterable[str]) -> FimTokens | None:
    """The markers to prompt with under the ``fim`` setting, or None for left to right."""
    if mode not in FIM_MODES:
        raise ValueError(f"unknown fim mode {mode!r}: use {', '.join(FIM_MODES)}")
    if mode == "off" or tokens is None:
        return None
    if mode == "auto":
        lowered = [name.lower() for name in names if name]
        if any(part in name for name in lowered for part in NOT_TRAINED_FOR_FIM):
            return None
    return tokens


def budgets(max_tokens: int) -> tuple[int, int]:
    """(prefix, suffix) token budgets of a FIM prompt of at most ``max_tokens`` tokens.

    Fixed shares, not what the suffix happens to need: the prefix window then does not move
    when the text after the cursor changes length, and the prompt cache stays reusable.
    """
    suffix = max_tokens // SUFFIX_SHARE
    prefix = max_tokens - MARKERS - 1 - suffix  # 1: a start token, where the model wants one
    if prefix < 2:
        raise ValueError(f"max_tokens {max_tokens} leaves no room for a FIM prompt")
    return prefix, suffix


def suffix_ids(tokenizer: Any, vocab: Vocab, after: str, max_tokens: int) -> list[int]:
    """The first tokens of ``after``, at most ``max_tokens``, ending at a line end when one is
    in the window's second half (a cut mid-line would show the model a line that is not there)."""
    if max_tokens <= 0 or not after:
        return []
    text = after[: max_tokens * CHARS_PER_SUFFIX_TOKEN]
    ids = list(tokenizer.encode(text, add_special_tokens=False))
    if len(ids) <= max_tokens and len(text) == len(after):
        return ids
    ids = ids[:max_tokens]
    for j in range(len(ids), len(ids) // 2, -1):
        if vocab.token_bytes[ids[j - 1]].endswith(b"\n"):
            return ids[:j]
    return ids


def build_fim_prompt(
    tokenizer: Any,
    vocab: Vocab,
    tokens: FimTokens,
    before: str,
    after: str,
    max_tokens: int,
    heal: bool = True,
) -> Prompt:
    """``[start] <prefix> before <suffix> after <middle>`` in at most ``max_tokens`` ids.

    Token healing applies to the end of ``before``: the drafts (the middle) begin with the
    healed bytes, exactly as in the left-to-right prompt.
    """
    prefix_budget, suffix_budget = budgets(max_tokens)
    ids, healed = encode_healed(tokenizer, vocab, before, heal)
    ids = truncate(ids, vocab, prefix_budget)
    start: list[int] = []
    if adds_bos(tokenizer):
        start = [int(tokenizer.bos_token_id)]
    tail = suffix_ids(tokenizer, vocab, after, suffix_budget)
    return Prompt(
        ids=[*start, tokens.prefix, *ids, tokens.suffix, *tail, tokens.middle], heal=healed
    )
