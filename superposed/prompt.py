"""From the text before the cursor to prompt token ids, with token healing.

The cursor rarely sits on a token boundary: after the indentation of a new line or in the
middle of a name, a byte-level BPE encodes the text with a trailing token the model almost
never saw end a text. Token healing drops that trailing token and asks the decoder to
produce its bytes again (``Prompt.heal``), so the model picks the tokenization itself.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Any

from superposed.vocab import Vocab

MAX_HEAL_BYTES = 16  # heal at most this many bytes back from the cursor (whitespace: any run)
MAX_WHITESPACE_HEAL = 128  # a trailing whitespace run over several tokens: healed whole up to this


@dataclass(frozen=True)
class Prompt:
    """Prompt token ids, and the bytes every draft must begin with (already typed by the user)."""

    ids: list[int]
    heal: bytes = b""


def start_token(tokenizer: Any) -> int:
    """The token an empty prompt starts from: BOS, else the end-of-text separator."""
    for token_id in (tokenizer.bos_token_id, tokenizer.eos_token_id):
        if token_id is not None:
            return int(token_id)
    return 0


def adds_bos(tokenizer: Any) -> bool:
    """Whether the tokenizer starts a text with BOS (Gemma's does; the model was trained so)."""
    bos = tokenizer.bos_token_id
    if bos is None:
        return False
    if getattr(tokenizer, "add_bos_token", False):
        return True
    # A fast tokenizer's post-processor may add it without the attribute saying so.
    return list(tokenizer.encode("a", add_special_tokens=True))[:1] == [bos]


def _ends_inside_character(data: bytes) -> bool:
    """True when ``data`` ends with an incomplete UTF-8 sequence."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    decoder.decode(data[-4:], final=False)
    return bool(decoder.getstate()[0])


def truncate(ids: list[int], vocab: Vocab, max_tokens: int) -> list[int]:
    """Keep the most recent ``max_tokens`` tokens, starting at a line boundary when one is near."""
    if len(ids) <= max_tokens:
        return ids
    window = ids[len(ids) - max_tokens :]
    for j in range(1, len(window) // 2):
        if vocab.token_bytes[window[j - 1]].endswith(b"\n") or vocab.token_bytes[
            window[j]
        ].startswith(b"\n"):
            return window[j:]
    return window


def encode_healed(
    tokenizer: Any, vocab: Vocab, text: str, heal: bool = True
) -> tuple[list[int], bytes]:
    """The ids of ``text`` less its healed trailing token(s), and the healed bytes."""
    ids = list(tokenizer.encode(text, add_special_tokens=False)) if text else []
    healed = b""
    if heal and ids:
        last = vocab.token_bytes[ids[-1]]
        healable = len(last) <= MAX_HEAL_BYTES or last.isspace()  # deep indentation is one token
        if last and healable and ids[-1] not in vocab.special_ids:
            healed = last
            ids = ids[:-1]
        # A whitespace run over several tokens is healed whole. After a blank line the model
        # writes "\n" then "\n" + indentation + word; a prompt that ended after the first
        # "\n" would owe the indentation as bare spaces, a path the model gives almost no
        # weight, so every draft derailed (scores near -60 where -5 is usual).
        while (
            healed.isspace()
            and len(ids) > 1
            and vocab.token_bytes[ids[-1]].isspace()
            and len(healed) + len(vocab.token_bytes[ids[-1]]) <= MAX_WHITESPACE_HEAL
            and ids[-1] not in vocab.special_ids
        ):
            healed = vocab.token_bytes[ids[-1]] + healed
            ids = ids[:-1]
        # Never end the prompt inside a multi-byte character: heal the whole character.
        while len(ids) > 1 and _ends_inside_character(vocab.decode(ids[-4:])):
            healed = vocab.token_bytes[ids[-1]] + healed
            ids = ids[:-1]
    return ids, healed


def build_prompt(
    tokenizer: Any, vocab: Vocab, text: str, max_tokens: int, heal: bool = True
) -> Prompt:
    """Encode the text before the cursor into at most ``max_tokens`` ids, healing the last token."""
    if max_tokens < 2:
        raise ValueError(f"max_tokens must be at least 2 (got {max_tokens})")
    ids, healed = encode_healed(tokenizer, vocab, text, heal)
    ids = truncate(ids, vocab, max_tokens - 1)
    if not ids or adds_bos(tokenizer):
        ids = [start_token(tokenizer), *ids]
    return Prompt(ids=ids, heal=healed)
