"""Mixing the codebase store with the per-user store."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from superposed.ngram import NgramResult, NgramSource


class CombinedSource:
    """(1 - user_weight) * p_codebase + user_weight * p_user: an NgramSource.

    Both sources must use the same orders (they share the tokenizer). A draft is supported
    when either source supports it.
    """

    def __init__(self, codebase: NgramSource, user: NgramSource, user_weight: float = 0.3):
        if not 0.0 <= user_weight <= 1.0:
            raise ValueError(f"user_weight must lie in [0, 1], got {user_weight}")
        if tuple(codebase.orders) != tuple(user.orders):
            raise ValueError(f"orders differ: {codebase.orders} vs {user.orders}")
        self.codebase = codebase
        self.user = user
        self.user_weight = user_weight

    @property
    def orders(self) -> tuple[int, ...]:
        return tuple(self.codebase.orders)

    def probabilities(
        self, contexts: Sequence[Sequence[int]], candidates: np.ndarray
    ) -> NgramResult:
        a = self.codebase.probabilities(contexts, candidates)
        b = self.user.probabilities(contexts, candidates)
        w = self.user_weight
        return NgramResult(
            probs=(1.0 - w) * a.probs + w * b.probs, supported=a.supported | b.supported
        )
