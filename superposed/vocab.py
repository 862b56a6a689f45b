"""Token ids <-> bytes, end-of-sequence ids, and the prefix index used by token healing."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import torch

_BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")
# Whitespace runs a healed prompt ends with: Vocab.warm computes their constraints at load.
WARM_PREFIXES = (
    *(b" " * n for n in range(1, 17)),
    *(b"\t" * n for n in range(1, 5)),
    b"\n",
)


def _byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's bytes_to_unicode: the printable stand-ins byte-level BPE uses."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    table = {chr(b): b for b in printable}
    extra = 0
    for b in range(256):
        if b not in printable:
            table[chr(256 + extra)] = b
            extra += 1
    return table


def byte_level(text: str) -> str:
    """``text`` as byte-level BPE spells it: GPT-2's printable stand-ins for its UTF-8 bytes."""
    stand_in = {b: ch for ch, b in _byte_decoder().items()}
    return "".join(stand_in[b] for b in text.encode("utf-8"))


class Vocab:
    """The bytes of every token of a tokenizer, and which ids end a sequence."""

    def __init__(self, token_bytes: list[bytes], eos_ids: set[int], special_ids: set[int]) -> None:
        self.token_bytes = token_bytes
        self.eos_ids = eos_ids
        self.special_ids = special_ids
        # Sorted (bytes, id) pairs of the ordinary tokens, for prefix range queries.
        pairs = sorted((b, i) for i, b in enumerate(token_bytes) if b and i not in special_ids)
        self._sorted_bytes = [b for b, _ in pairs]
        self._sorted_ids = [i for _, i in pairs]
        self._by_bytes = {b: i for b, i in reversed(pairs)}  # lowest id wins on duplicates
        self._longest = max((len(b) for b in self._sorted_bytes), default=0)  # bounds spell
        # The same ids as a tensor: a mask for a broad prefix (" " extends 138k of Gemma 3's
        # 262k tokens) is then one slice, not a Python list of ids (bench/results/vocab_index.md).
        self._sorted_id_tensor = torch.tensor(self._sorted_ids, dtype=torch.long)

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> Vocab:
        size = len(tokenizer)
        special = set(tokenizer.all_special_ids)
        decoder = _byte_decoder()
        # A piece of stand-ins becomes its bytes in one translate (a loop per character cost
        # most of the 1.1 s this took for the default model's 49k tokens, at every load).
        stand_ins = frozenset(decoder)
        to_bytes = str.maketrans({ch: chr(b) for ch, b in decoder.items()})
        pieces = tokenizer.convert_ids_to_tokens(list(range(size)))
        token_bytes: list[bytes] = []
        for i, piece in enumerate(pieces):
            if piece is None or i in special:
                token_bytes.append(b"")
            elif _BYTE_PIECE.fullmatch(piece):  # sentencepiece byte fallback: <0x0A>
                token_bytes.append(bytes([int(piece[3:5], 16)]))
            elif stand_ins.issuperset(piece):  # byte-level BPE (GPT-2, Llama 3, SmolLM2)
                token_bytes.append(piece.translate(to_bytes).encode("latin-1"))
            else:  # sentencepiece and friends
                token_bytes.append(tokenizer.convert_tokens_to_string([piece]).encode("utf-8"))
        eos = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
        endoftext = tokenizer.convert_tokens_to_ids("<|endoftext|>")
        if isinstance(endoftext, int) and endoftext != tokenizer.unk_token_id:
            eos.add(endoftext)
        return cls(token_bytes, eos, special)

    def __len__(self) -> int:
        return len(self.token_bytes)

    def decode(self, ids: list[int]) -> bytes:
        return b"".join(self.token_bytes[i] for i in ids)

    def text(self, ids: list[int]) -> str:
        return self.decode(ids).decode("utf-8", errors="replace")

    def spell(self, data: bytes) -> list[int] | None:
        """Ordinary tokens that spell ``data``, longest first from the left; None if none do."""
        ids: list[int] = []
        at = 0
        while at < len(data):
            for end in range(min(len(data), at + self._longest), at, -1):
                token = self._by_bytes.get(data[at:end])
                if token is not None:
                    ids.append(token)
                    at = end
                    break
            else:
                return None
        return ids

    def _extending(self, prefix: bytes) -> tuple[int, int]:
        """The range [lo, hi) of the sorted tokens whose bytes start with ``prefix``."""
        lo = bisect.bisect_left(self._sorted_bytes, prefix)
        # Cut to the prefix's length, the sorted bytes stay sorted: a second bisection.
        n = len(prefix)
        hi = bisect.bisect_right(self._sorted_bytes, prefix, lo, key=lambda b: b[:n])
        return lo, hi

    def _shorter(self, prefix: bytes) -> list[int]:
        """Ids of the tokens that are a non-empty proper prefix of ``prefix``."""
        heads = (prefix[:n] for n in range(1, len(prefix)))
        return [self._by_bytes[head] for head in heads if head in self._by_bytes]

    def warm(self, size: int, device: torch.device) -> None:
        """Compute the heal constraints of whitespace runs now (at load, off the request path):
        the broadest prefixes a request heals (after an indentation, after "x = "), the ones
        whose masks cost the most on a large vocabulary."""
        for prefix in WARM_PREFIXES:
            self.consistent_ids(prefix)
            self.consistent_mask(prefix, size, device)

    @lru_cache(maxsize=4096)  # noqa: B019 - one Vocab per model, kept for the process
    def consistent_ids(self, prefix: bytes) -> tuple[int, ...]:
        """Ids of tokens whose bytes extend ``prefix`` or are a non-empty prefix of it."""
        lo, hi = self._extending(prefix)
        return tuple(sorted(set(self._sorted_ids[lo:hi]) | set(self._shorter(prefix))))

    @lru_cache(maxsize=4096)  # noqa: B019 - one Vocab per model, kept for the process
    def breaking_ids(self, heal: bytes, indented: bool = False) -> tuple[int, ...]:
        """Ids of tokens that, emitted while ``heal`` is owed, begin a new line before any
        visible character: their bytes past ``heal``, less spaces and tabs, start with a line
        break. ``indented`` (the cursor follows its line's indentation): also those that add
        a space or tab past ``heal``, indenting the line further. (Tokens inconsistent with
        ``heal`` are left to ``consistent_ids``.)"""
        ids: Iterable[int] = range(len(self.token_bytes))
        if heal:
            ids = [i for i in self.consistent_ids(heal) if len(self.token_bytes[i]) > len(heal)]
        first = (b" ", b"\t", b"\n", b"\r") if indented else (b"\n", b"\r")
        return tuple(
            i
            for i in ids
            if self.token_bytes[i][len(heal) :]
            .lstrip(b"" if indented else b" \t")
            .startswith(first)
        )

    @lru_cache(maxsize=64)  # noqa: B019 - 64 masks of Gemma 3's vocabulary: 17 MB
    def consistent_mask(self, prefix: bytes, size: int, device: torch.device) -> torch.Tensor:
        """[size] bool mask of the tokens allowed while ``prefix`` is still to be produced
        (cached: read it, never write to it)."""
        lo, hi = self._extending(prefix)
        shorter = torch.tensor(self._shorter(prefix), dtype=torch.long)
        ids = torch.cat([self._sorted_id_tensor[lo:hi], shorter])
        mask = torch.zeros(size, dtype=torch.bool)
        mask[ids[ids < size]] = True
        return mask.to(device)

    @lru_cache(maxsize=64)  # noqa: B019 - asked at every step a draft is still blank
    def breaking_mask(
        self, heal: bytes, size: int, device: torch.device, indented: bool = False
    ) -> torch.Tensor:
        """[size] bool mask of ``breaking_ids(heal, indented)`` (cached: read it, never write
        to it; with nothing healed and ``indented`` it holds every whitespace-led token)."""
        ids = torch.tensor(self.breaking_ids(heal, indented), dtype=torch.long)
        mask = torch.zeros(size, dtype=torch.bool)
        mask[ids[ids < size]] = True
        return mask.to(device)


def advance(remaining: bytes, token: bytes) -> bytes:
    """What is left of the healed text after emitting ``token``."""
    if remaining.startswith(token):
        return remaining[len(token) :]
    return b""  # the token covers (and may extend) the rest
