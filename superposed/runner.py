"""The model-runner interface the decoders drive, and the generic transformers runner.

A runner owns the model and one KV cache. The cache holds a prompt (one row) that decoders
extend step by step, possibly after replicating it into several rows (batched nucleus, beam).
After a request the decoder rewinds the cache to the prompt, so the next request that shares
a prefix with it only prefills what is new (prompt cache reuse while typing).
"""

from __future__ import annotations

import inspect
from typing import Any, Protocol

import torch

from superposed.types import NonFiniteLogits


class ModelRunner(Protocol):
    """What a decoder needs from a model: prefill, step on embeddings, batch, rewind."""

    vocab_size: int
    max_context: int
    device: torch.device

    @property
    def length(self) -> int:
        """Positions in the cache."""
        ...

    @property
    def cached_ids(self) -> list[int]:
        """The token ids of the prompt rows in the cache (row 0), as far as they are known."""
        ...

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """ids: [B, T] -> input embeddings [B, T, H] (the embedding module's output)."""
        ...

    def prefill(self, ids: list[int]) -> torch.Tensor:
        """Append ``ids`` to the single-row cache; return the last position's logits [V] (fp32)."""
        ...

    def step(self, embeds: torch.Tensor) -> torch.Tensor:
        """embeds: [B, 1, H] at the next position -> logits [B, V] (fp32)."""
        ...

    def expand(self, batch: int) -> None:
        """Replicate the single cache row into ``batch`` rows."""
        ...

    def score(self, ids: torch.Tensor) -> torch.Tensor:
        """ids [B, T] appended to the B cache rows -> fp32 logits [B, T, V] at every position."""
        ...

    def select(self, rows: torch.Tensor) -> None:
        """Keep (and reorder) cache rows: rows [B'] of row indices."""
        ...

    def rewind(self, length: int) -> None:
        """Drop every position from ``length`` on and go back to one row."""
        ...


def check_finite(logits: torch.Tensor) -> torch.Tensor:
    """Raise a clear error instead of decoding garbage from NaN/inf logits."""
    if not torch.isfinite(logits).all():
        raise NonFiniteLogits(
            "the model produced non-finite logits; use dtype float32 or check the model files"
        )
    return logits


def reusable_prefix(cached: list[int], ids: list[int]) -> int:
    """How many leading tokens of ``ids`` the cache already holds.

    Never all of them: the last token is always recomputed, since its logits are not cached.
    """
    common, limit = 0, min(len(cached), len(ids) - 1)
    while common < limit and cached[common] == ids[common]:
        common += 1
    return common


def prefill_reusing_cache(runner: ModelRunner, ids: list[int]) -> torch.Tensor:
    """Prefill ``ids``, reusing the longest cached prefix; return the last logits [V]."""
    common = reusable_prefix(runner.cached_ids, ids)
    runner.rewind(common)
    return runner.prefill(ids[common:])


class HFRunner:
    """Any transformers causal LM with a DynamicCache: the reference runner."""

    def __init__(self, model: Any) -> None:
        from transformers import DynamicCache

        self._cache_cls = DynamicCache
        self.model = model.eval()
        config = model.config
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self.max_context = int(getattr(config, "max_position_embeddings", 2048) or 2048)
        self.device = next(model.parameters()).device
        self._embedding = model.get_input_embeddings()
        # transformers 5.24 renamed the forward argument past_key_values -> cache.
        params = inspect.signature(model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        self._cache = self._new_cache()
        self._ids: list[int] = []  # prompt tokens in row 0 of the cache
        self._length = 0
        self._batch = 1

    def _crop(self, length: int) -> None:
        # transformers >= 5.24 crops by a negative count of tokens to drop; before, to a length.
        if "tokens_to_remove" in inspect.signature(self._cache.crop).parameters:
            self._cache.crop(length - self._length)
        else:
            self._cache.crop(length)

    def _new_cache(self) -> Any:
        # No config: every layer keeps every position. With it, a sliding-window layer
        # (Gemma 3's local ones) keeps only its window and cannot rewind past it.
        return self._cache_cls()

    @property
    def length(self) -> int:
        return self._length

    @property
    def cached_ids(self) -> list[int]:
        return self._ids

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self._embedding(ids.to(self.device))

    def _forward(self, **inputs: Any) -> torch.Tensor:
        out = self.model(
            **inputs, **{self._cache_arg: self._cache}, use_cache=True, logits_to_keep=1
        )
        return check_finite(out.logits[:, -1, :].float())

    def prefill(self, ids: list[int]) -> torch.Tensor:
        if not ids:
            raise ValueError("prefill needs at least one token")
        tokens = torch.tensor([ids], dtype=torch.long, device=self.device)  # [1, T]
        logits = self._forward(input_ids=tokens)  # [1, V]
        if len(self._ids) == self._length:  # row 0 is all prompt so far: remember its tokens
            self._ids = self._ids + list(ids)
        self._length += len(ids)
        return logits[0]

    def step(self, embeds: torch.Tensor) -> torch.Tensor:
        logits = self._forward(inputs_embeds=embeds.to(self.model.dtype))  # [B, V]
        self._length += 1
        return logits

    def score(self, ids: torch.Tensor) -> torch.Tensor:
        out = self.model(
            input_ids=ids.to(self.device), **{self._cache_arg: self._cache}, use_cache=True
        )
        self._length += ids.shape[1]
        return check_finite(out.logits.float())  # [B, T, V]

    def expand(self, batch: int) -> None:
        if batch > 1:
            self._cache.batch_repeat_interleave(batch)
            self._batch *= batch

    def select(self, rows: torch.Tensor) -> None:
        self._cache.batch_select_indices(rows.to(self.device))
        self._batch = len(rows)

    def rewind(self, length: int) -> None:
        if length <= 0:
            self._cache = self._new_cache()
            self._ids, self._length, self._batch = [], 0, 1
            return
        if self._batch > 1:
            self.select(torch.tensor([0], device=self.device))
        if length < self._length:
            self._crop(length)
        self._length = min(length, self._length)
        self._ids = self._ids[: self._length]
