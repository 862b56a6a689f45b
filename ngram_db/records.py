"""What the store records per file, and the small parsers around it (no SQL here)."""

from __future__ import annotations

import hashlib
import os
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ngram_db.errors import BadOrders
from ngram_db.keys import MAX_LEN
from ngram_db.tokenizer import clean_text


@dataclass(frozen=True)
class FileTokens:
    """A file's new content, tokenized: what one row of ``files`` holds."""

    path: str
    sha256: str
    ids: np.ndarray  # [L] token ids


def parse_orders(orders: str | Iterable[int]) -> tuple[int, ...]:
    """'2-6', '2,3,4' or an iterable of ints -> sorted unique orders, checked."""
    if isinstance(orders, str):
        values: list[int] = []
        try:
            for part in orders.split(","):
                low, _, high = part.strip().partition("-")
                values.extend(range(int(low), int(high or low) + 1))
        except ValueError as err:
            raise BadOrders(f"cannot read orders {orders!r}: use a range like 2-6") from err
        orders = values
    result = tuple(sorted(set(orders)))
    if not result or result[0] < 2 or result[-1] > MAX_LEN:
        raise BadOrders(f"orders must lie in 2..{MAX_LEN}, got {result}")
    return result


def content_hash(text: str) -> str:
    """sha256 of the text as UTF-8 (lone surrogates replaced)."""
    return hashlib.sha256(clean_text(text).encode("utf-8")).hexdigest()


def path_key(path: str | os.PathLike[str]) -> str:
    """The text stored for a path: as given, with undecodable bytes escaped."""
    text = os.fspath(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text


def pack_ids(ids: np.ndarray) -> bytes:
    """Token ids as stored in ``files.ids``: zlib(uint32 little-endian)."""
    return zlib.compress(ids.astype("<u4").tobytes(), 1)


def unpack_ids(blob: bytes) -> np.ndarray:
    """The inverse of pack_ids."""
    return np.frombuffer(zlib.decompress(blob), dtype="<u4").astype(np.int64)
