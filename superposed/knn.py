"""kNN-LM as one more next-token distribution the engine mixes in.

kNN-LM (Khandelwal et al., 2020; for code, kNM-LM, Tang et al., 2023): the codebase's
positions are kept as (key of the model's last hidden state there, the token that came
next); ``index-repo --knn`` builds them (ngram_db/knn_store.py, ngram_db/knn_index.py). At a
decoding step the step's hidden state (superposed decoding has one input row, so one state
for all drafts) finds its K nearest keys, and their next tokens, weighted by
softmax(-distance / T), are a distribution

    p_knn(x) = sum_{neighbours i with token x} exp(-d_i / T) / sum_i exp(-d_i / T)

that joins the model's, before the engine's own temperature:

    p(x) = (1 - w) p_model(x) + w p_knn(x)

with w the setting ``knnWeight`` (0: off, the drafts are exactly those without a store).
The engine knows only ``HiddenSource`` (what finds neighbours); the store and its key
reduction live outside it. The hidden state is what the runner's head reads (after the
final norm), recorded by a ``HiddenTap``: a step whose head ran in a compiled graph records
nothing, and that step goes without the memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np
import torch


class Neighbours(NamedTuple):
    """The nearest stored positions of a query, nearest first."""

    distances: np.ndarray  # [K] float32, squared L2 between the reduced keys
    tokens: np.ndarray  # [K] int64, the token that followed each


class HiddenSource(Protocol):
    """Anything that finds the stored positions nearest to a hidden state."""

    def neighbours(self, hidden: np.ndarray, k: int) -> Neighbours | None:
        """hidden [H] float32 (the head's input) -> up to k nearest; None: nothing stored."""
        ...


@dataclass(frozen=True)
class KnnLookup:
    """What a decoding request reads to mix the memory in: the store and the tap."""

    source: HiddenSource
    tap: HiddenTap


def knn_probs(found: Neighbours, temperature: float, vocab_size: int) -> torch.Tensor:
    """p_knn [V] float64: each neighbour's softmax(-d / T) weight on its next token."""
    d = torch.from_numpy(np.asarray(found.distances, dtype=np.float64))  # [K]
    weights = torch.softmax(-d / temperature, 0)  # [K]
    tokens = torch.from_numpy(np.asarray(found.tokens, dtype=np.int64))  # [K]
    keep = (tokens >= 0) & (tokens < vocab_size)  # a token the model cannot emit gets nothing
    probs = torch.zeros(vocab_size, dtype=torch.float64)
    probs.index_add_(0, tokens[keep], weights[keep])
    return probs / probs.sum().clamp_min(1e-300)


def mix(logits: torch.Tensor, p_knn: torch.Tensor, weight: float) -> torch.Tensor:
    """log((1 - w) softmax(logits) + w p_knn): logits [..., V] -> log-probabilities [..., V].

    The engine's temperature divides the result as it divided the logits (the log of a
    distribution is a logit vector). At w = 0 the logits come back unchanged.
    """
    if weight == 0.0:
        return logits
    p_model = torch.softmax(logits.double(), dim=-1)
    p = (1 - weight) * p_model + weight * p_knn.to(p_model.device)
    return torch.log(p).to(logits.dtype)


class HiddenTap:
    """Records the hidden rows the runner's head reads; ``take`` hands over the last one."""

    def __init__(self) -> None:
        self._last: torch.Tensor | None = None  # [B, H] or [B, T, H]

    def __call__(self, rows: torch.Tensor) -> None:
        self._last = rows.detach()

    def clear(self) -> None:
        self._last = None

    def take(self) -> np.ndarray | None:
        """The last position's hidden state of row 0, [H] float32 (None: nothing recorded)."""
        rows, self._last = self._last, None
        if rows is None:
            return None
        last = rows[0, -1] if rows.dim() == 3 else rows[0]
        return last.float().cpu().numpy()

    def rows(self) -> np.ndarray | None:
        """Every recorded position of row 0, [T, H] float32 (a forward over a whole window)."""
        rows, self._last = self._last, None
        if rows is None:
            return None
        return (rows[0] if rows.dim() == 3 else rows).float().cpu().numpy()


@contextmanager
def tapped(runner: Any) -> Iterator[HiddenTap | None]:
    """A tap on ``runner``'s head input while the block runs; None: this runner cannot show it.

    The fast runner calls its ``hidden_tap`` (and runs its steps eagerly meanwhile: a
    compiled step's head is inside the graph); a transformers runner's head module gets a
    forward pre-hook. Either is gone when the block ends.
    """
    inner = getattr(runner, "runner", runner)  # api.PrefillClock and GraphRunner wrap one
    tap = HiddenTap()
    if hasattr(inner, "hidden_tap"):
        inner.hidden_tap = tap
        try:
            yield tap
        finally:
            inner.hidden_tap = None
    elif hasattr(inner, "model") and hasattr(inner.model, "get_output_embeddings"):

        def hook(_module: Any, args: tuple[torch.Tensor, ...]) -> None:
            tap(args[0])

        handle = inner.model.get_output_embeddings().register_forward_pre_hook(hook)
        try:
            yield tap
        finally:
            handle.remove()
    else:
        yield None


def step_logits(
    logits: torch.Tensor,
    lookup: KnnLookup | None,
    weight: float,
    neighbours: int,
    temperature: float,
) -> torch.Tensor:
    """A step's logits [1, V] (or [V]) with the memory mixed in, from the state the tap holds.

    Unchanged where the memory is off, nothing was recorded or nothing is stored.
    """
    if lookup is None or weight == 0.0:
        return logits
    hidden = lookup.tap.take()
    if hidden is None:
        return logits
    found = lookup.source.neighbours(hidden, neighbours)
    if found is None or len(found.tokens) == 0:
        return logits
    return mix(logits, knn_probs(found, temperature, logits.shape[-1]), weight)
