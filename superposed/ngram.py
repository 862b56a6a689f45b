"""The n-gram source interface the engine re-scores drafts with, and a small in-memory source.

Superposed decoding keeps each draft coherent by mixing the model's probability of a
candidate token with an interpolated n-gram probability computed from that draft's own
context (prompt tokens included):

    p_ngram(x | ctx) = sum_n lambda_n * count(ctx_n x) / count(ctx_n),   n = 2..6

where ctx_n is the last n-1 tokens. An order whose context was never seen contributes
nothing. The SQLite store in ``ngram_db`` implements the same interface.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

# Interpolation weights from the paper, keyed by order n (context of n-1 tokens).
DEFAULT_LAMBDAS: dict[int, float] = {2: 0.01, 3: 0.04, 4: 0.15, 5: 0.18, 6: 0.12}


@dataclass(frozen=True)
class NgramResult:
    """Interpolated n-gram probabilities for each (draft, candidate) pair."""

    probs: np.ndarray  # [D, C] float64, 0 where no order supports the candidate
    supported: np.ndarray  # [D] bool: some candidate of the draft has n-gram support


class NgramSource(Protocol):
    """Anything that scores candidate next tokens of several drafts with n-gram statistics."""

    @property
    def orders(self) -> tuple[int, ...]:
        """The n-gram orders used (for example (2, 3, 4, 5, 6))."""
        ...

    def probabilities(
        self, contexts: Sequence[Sequence[int]], candidates: np.ndarray
    ) -> NgramResult:
        """Score ``candidates[d, c]`` as the next token after ``contexts[d]``.

        ``contexts[d]`` holds at least the last ``max(orders) - 1`` tokens of draft d
        (prompt tokens included) when that many exist.
        """
        ...


@dataclass(frozen=True)
class Match:
    """The longest suffix of a context found in the user's code (an unbounded-order n-gram)."""

    length: int  # context tokens matched
    next_counts: dict[int, int]  # token that followed an occurrence -> how many times
    continuation: list[int]  # what followed the latest occurrence of the commonest next token
    # What followed other occurrences, distinct, the most recent first (when asked for).
    others: list[list[int]] = field(default_factory=list)
    # Scales the memory's lambda for this match (superposed.memory.weight): a shared index's
    # ``sharedWeight`` (lsp_server/stores/shared_indexes.py); 1.0 for the stores and the open
    # documents.
    weight: float = 1.0

    def distribution(self) -> dict[int, float]:
        """The next-token probabilities of the matched context."""
        total = sum(self.next_counts.values())
        return {t: c / total for t, c in self.next_counts.items()}


class MatchSource(Protocol):
    """Anything that finds the longest suffix of a context in token streams (suffix arrays
    over the stores' files and the open documents; see ngram_db.suffix)."""

    def match(self, context: Sequence[int], follow: int = 32, others: int = 0) -> Match | None:
        """The longest match of ``context`` (None: not even its last token occurs), with up to
        ``follow`` tokens of continuation (and of ``others`` other ones)."""
        ...


def interpolate(
    next_counts: np.ndarray, context_counts: np.ndarray, lambdas: np.ndarray
) -> NgramResult:
    """Combine raw counts into interpolated probabilities.

    next_counts:    [D, O, C] count(ctx_n x) for each draft, order and candidate
    context_counts: [D, O]    count(ctx_n); 0 where the context is unseen or too short
    lambdas:        [O]       weight of each order
    """
    ctx = context_counts[:, :, None].astype(np.float64)  # [D, O, 1]
    ratio = np.divide(
        next_counts.astype(np.float64), ctx, out=np.zeros(next_counts.shape), where=ctx > 0
    )  # [D, O, C]
    probs = np.einsum("doc,o->dc", ratio, lambdas.astype(np.float64))  # [D, C]
    return NgramResult(probs=probs, supported=(probs > 0).any(axis=1))


def count_ngrams(
    sequences: Iterable[Sequence[int]], orders: Sequence[int]
) -> tuple[Counter[tuple[int, ...]], Counter[tuple[int, ...]]]:
    """Count n-grams (as tuples) and their contexts over token sequences: a reference counter."""
    grams: Counter[tuple[int, ...]] = Counter()
    contexts: Counter[tuple[int, ...]] = Counter()
    for seq in sequences:
        seq = list(seq)
        for n in orders:
            for i in range(len(seq) - n + 1):
                gram = tuple(seq[i : i + n])
                grams[gram] += 1
                contexts[gram[:-1]] += 1
    return grams, contexts


class InMemoryNgramSource:
    """An n-gram source held in Python dicts: for tests, examples and small corpora."""

    def __init__(
        self,
        grams: Mapping[tuple[int, ...], int],
        contexts: Mapping[tuple[int, ...], int],
        lambdas: Mapping[int, float] | None = None,
    ) -> None:
        weights = dict(DEFAULT_LAMBDAS if lambdas is None else lambdas)
        self._orders = tuple(sorted(weights))
        self._lambdas = np.array([weights[n] for n in self._orders])
        self._grams = grams
        self._contexts = contexts

    @classmethod
    def from_sequences(
        cls, sequences: Iterable[Sequence[int]], lambdas: Mapping[int, float] | None = None
    ) -> InMemoryNgramSource:
        orders = sorted(DEFAULT_LAMBDAS if lambdas is None else lambdas)
        grams, contexts = count_ngrams(sequences, orders)
        return cls(grams, contexts, lambdas)

    @property
    def orders(self) -> tuple[int, ...]:
        return self._orders

    def probabilities(
        self, contexts: Sequence[Sequence[int]], candidates: np.ndarray
    ) -> NgramResult:
        d, c = candidates.shape
        next_counts = np.zeros((d, len(self._orders), c))
        context_counts = np.zeros((d, len(self._orders)))
        for i, context in enumerate(contexts):
            for j, n in enumerate(self._orders):
                if len(context) < n - 1:
                    continue  # too short for this order: it contributes nothing
                ctx = tuple(context[len(context) - (n - 1) :])
                context_counts[i, j] = self._contexts.get(ctx, 0)
                for m, token in enumerate(candidates[i].tolist()):
                    next_counts[i, j, m] = self._grams.get((*ctx, token), 0)
        return interpolate(next_counts, context_counts, self._lambdas)
