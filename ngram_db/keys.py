"""Token tuples as packed 64-bit keys, and vectorised n-gram counting over them.

Every tuple of k tokens (1 <= k <= 15) gets one integer key: a chained hash of its tokens
(the splitmix64 finalizer applied after each token) truncated to 59 bits, with k in the top
bits. Keys of one length therefore sort together (so per-order statistics are a range scan)
and fit SQLite's signed 64-bit INTEGER. The chain makes the key of ``ctx + (x,)`` one step
from the state of ``ctx``, which is what the batched lookup needs for its candidates.

Collisions: with N distinct tuples of one length, the chance that any two share a key is
about N**2 / 2**60; for 10 million tuples that is 1e-4, for the whole store, ever. A
collision would merge two counts, never crash, so the store keeps no token tuples.

Each key carries two counts: ``g``, how often the tuple occurs as an n-gram of a used order,
and ``c``, how often it occurs as a context (followed by at least one more token) of the next
order. ``c`` of a context is therefore exactly the sum of ``g`` over its continuations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_SEED = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_LEN_SHIFT = np.uint64(59)  # the tuple length lives in bits 59..62
_HASH_SHIFT = np.uint64(64 - 59)
MAX_LEN = 15


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer on a uint64 array (a bijection; wraps on overflow)."""
    z = z ^ (z >> np.uint64(30))
    z *= _M1
    z ^= z >> np.uint64(27)
    z *= _M2
    z ^= z >> np.uint64(31)
    return z


def step(states: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Extend chained hash states by one token each (shapes broadcast)."""
    return _mix(states ^ tokens.astype(np.uint64))


def seed_states(shape: tuple[int, ...]) -> np.ndarray:
    """The state of the empty tuple, as an array of the given shape."""
    return np.full(shape, _SEED, dtype=np.uint64)


def pack(states: np.ndarray, length: int | np.ndarray) -> np.ndarray:
    """Turn chained states of tuples of ``length`` tokens into int64 store keys."""
    length_bits = np.asarray(length, dtype=np.uint64) << _LEN_SHIFT
    return (length_bits | (states >> _HASH_SHIFT)).view(np.int64)


def key_range(length: int) -> tuple[int, int]:
    """The [low, high) range of keys of tuples of ``length`` tokens."""
    return length << 59, (length + 1) << 59


def tuple_key(tokens: Sequence[int]) -> int:
    """The key of one token tuple (slow path, for tests and debugging)."""
    state = seed_states((1,))
    for token in tokens:
        state = step(state, np.array([token]))
    return int(pack(state, len(tokens))[0])


def window_keys(tokens: np.ndarray, k: int) -> np.ndarray:
    """Keys of every k-token window of one sequence: [L - k + 1] int64."""
    n = len(tokens) - k + 1
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    states = seed_states((n,))
    for j in range(k):
        states = step(states, tokens[j : j + n])
    return pack(states, k)


@dataclass(frozen=True)
class Counts:
    """Counts per key: sorted unique ``keys``, n-gram counts ``g``, context counts ``c``."""

    keys: np.ndarray  # [K] int64, sorted, unique
    g: np.ndarray  # [K] int64
    c: np.ndarray  # [K] int64

    def __len__(self) -> int:
        return len(self.keys)

    @staticmethod
    def empty() -> Counts:
        z = np.zeros(0, dtype=np.int64)
        return Counts(z, z, z)


def count_sequences(sequences: Sequence[np.ndarray], orders: Sequence[int]) -> Counts:
    """Count n-grams and contexts of the given orders over token sequences (one per file).

    Works per tuple length k on all files at once: one sort of the k-token windows gives
    their n-gram counts; a context must be followed by a token, so its count is the same
    minus the windows that end a file.
    """
    sequences = [s for s in sequences if len(s)]
    if not sequences:
        return Counts.empty()
    tokens = np.concatenate(sequences).astype(np.uint64)  # [L]
    lengths = np.array([len(s) for s in sequences])
    room = np.repeat(np.cumsum(lengths), lengths) - np.arange(len(tokens))  # tokens left in file
    gram_lengths = set(orders)
    ctx_lengths = {n - 1 for n in orders}
    parts: list[Counts] = []
    states = seed_states((len(tokens),))
    for k in range(1, max(orders) + 1):
        # states[i] = hash of tokens[i : i + k] for every i with i + k <= L
        states = step(states[: len(tokens) - k + 1], tokens[k - 1 :])
        if k not in gram_lengths and k not in ctx_lengths:
            continue
        room_k = room[: len(states)]
        inside = pack(states[room_k >= k], k)  # windows inside one file
        keys, n = np.unique(inside, return_counts=True)
        at_end = pack(states[room_k == k], k)  # windows that end a file: not contexts
        followed = n.copy()
        np.subtract.at(followed, np.searchsorted(keys, at_end), 1)
        g = n if k in gram_lengths else np.zeros_like(n)
        c = followed if k in ctx_lengths else np.zeros_like(n)
        keep = (g > 0) | (c > 0)
        parts.append(Counts(keys[keep], g[keep].astype(np.int64), c[keep].astype(np.int64)))
    # keys of length k lie below those of length k + 1, so the concatenation stays sorted
    return Counts(
        np.concatenate([p.keys for p in parts]),
        np.concatenate([p.g for p in parts]),
        np.concatenate([p.c for p in parts]),
    )


def sum_by_key(keys: np.ndarray, g: np.ndarray, c: np.ndarray) -> Counts:
    """Sum the counts of equal keys: [N] keys with [N] g and c -> Counts."""
    unique, inverse = np.unique(keys, return_inverse=True)
    g_sum = np.bincount(inverse, weights=g, minlength=len(unique)).astype(np.int64)
    c_sum = np.bincount(inverse, weights=c, minlength=len(unique)).astype(np.int64)
    return Counts(unique.astype(np.int64), g_sum, c_sum)


def difference(new: Counts, old: Counts) -> Counts:
    """new - old, keeping only the keys whose counts change."""
    total = sum_by_key(
        np.concatenate([new.keys, old.keys]),
        np.concatenate([new.g, -old.g]),
        np.concatenate([new.c, -old.c]),
    )
    changed = (total.g != 0) | (total.c != 0)
    return Counts(total.keys[changed], total.g[changed], total.c[changed])
