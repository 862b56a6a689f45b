"""The tokenizers a store accepts: the model's own (a transformers tokenizer) or a tiny test one.

A store only needs ``encode_batch(texts) -> list of id arrays`` and a ``fingerprint`` that
changes whenever the ids would (a hash of the vocabulary). ``as_tokenizer`` wraps a
transformers tokenizer; its Rust backend encodes a batch on all cores.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import weakref
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

_SURROGATE = re.compile("[\ud800-\udfff]")


class Tokenizer(Protocol):
    """What a store needs from a tokenizer."""

    @property
    def fingerprint(self) -> str:
        """A short hash that changes whenever token ids would change."""
        ...

    def encode_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token ids of each text, without special tokens."""
        ...


def clean_text(text: str) -> str:
    """Text that encodes as UTF-8: each lone surrogate becomes U+FFFD.

    Lone surrogates come from undecodable bytes (surrogateescape) or an editor's JSON.
    U+FFFD, not "?": index-repo decodes a file's bad bytes to U+FFFD (files.read_text), so a
    save and an index run of the same text agree (one hash, one set of n-grams), and "?" is
    code (a ternary, optional chaining) that the n-gram counts would learn as such. The
    server and the store both use this one function.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def vocab_fingerprint(vocab: dict[str, int]) -> str:
    """sha256 of the sorted (token, id) pairs, shortened to 16 hex digits."""
    blob = json.dumps(sorted(vocab.items()), ensure_ascii=False).encode("utf-8", "surrogatepass")
    return hashlib.sha256(blob).hexdigest()[:16]


class HFTokenizer:
    """A transformers tokenizer, or a raw ``tokenizers.Tokenizer``, as a store Tokenizer.

    Both give the same ids and fingerprint for one tokenizer.json; the raw one loads in a
    fraction of a second without importing torch (what index-repo uses).
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._backend = getattr(tokenizer, "backend_tokenizer", None)
        if self._backend is None and hasattr(tokenizer, "encode_batch_fast"):
            self._backend = tokenizer  # already a tokenizers.Tokenizer
        self._fingerprint = vocab_fingerprint(tokenizer.get_vocab())

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    def encode_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        texts = [clean_text(t) for t in texts]
        if self._backend is not None:
            # encode_batch_fast skips offsets; the Rust side releases the GIL and uses all cores
            encodings = self._backend.encode_batch_fast(texts, add_special_tokens=False)
            return [np.array(e.ids, dtype=np.int64) for e in encodings]
        ids = self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return [np.array(x, dtype=np.int64) for x in ids]


class ByteTokenizer:
    """One token per UTF-8 byte (ids 0..255, shifted by ``offset``): a tiny tokenizer for tests."""

    def __init__(self, offset: int = 0) -> None:
        self.offset = offset

    @property
    def fingerprint(self) -> str:
        return vocab_fingerprint({f"<{b}>": b + self.offset for b in range(256)})

    def encode_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [
            np.frombuffer(clean_text(t).encode("utf-8"), dtype=np.uint8).astype(np.int64)
            + self.offset
            for t in texts
        ]


class FingerprintOnly:
    """A tokenizer known by its fingerprint alone: it opens a store another model's tokenizer
    built, to erase from it (forget, clear: stored ids, nothing encoded), never to count."""

    def __init__(self, fingerprint: str) -> None:
        self._fingerprint = fingerprint

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    def encode_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        raise TypeError(f"tokenizer {self._fingerprint} is not loaded: this store only erases")


# One wrapper per tokenizer object: its fingerprint hashes the whole vocabulary (0.1-0.2 s for
# 49,152 tokens), and a server wraps the model's tokenizer for every store it opens, for the
# session and for the memory. Keyed weakly, and by size too: adding tokens makes a new one.
_WRAPPED: weakref.WeakKeyDictionary[Any, tuple[int, HFTokenizer]] = weakref.WeakKeyDictionary()
_WRAPPED_LOCK = threading.Lock()


def _size(tokenizer: Any) -> int:
    if hasattr(tokenizer, "get_vocab_size"):  # a raw tokenizers.Tokenizer
        return int(tokenizer.get_vocab_size(with_added_tokens=True))
    return len(tokenizer)


def as_tokenizer(tokenizer: Any) -> Tokenizer:
    """Accept a store Tokenizer as is, or wrap a transformers tokenizer (once per object)."""
    if hasattr(tokenizer, "fingerprint") and hasattr(tokenizer, "encode_batch"):
        return tokenizer  # type: ignore[no-any-return]
    if not hasattr(tokenizer, "get_vocab"):
        raise TypeError(f"not a tokenizer: {type(tokenizer).__name__}")
    size = _size(tokenizer)
    with _WRAPPED_LOCK:
        cached = _WRAPPED.get(tokenizer)
    if cached is not None and cached[0] == size:
        return cached[1]
    wrapped = HFTokenizer(tokenizer)
    with _WRAPPED_LOCK:
        _WRAPPED[tokenizer] = (size, wrapped)
    return wrapped
