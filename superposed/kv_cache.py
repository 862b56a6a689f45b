"""The fast runners' KV cache: every layer's keys and values in one K and one V tensor.

Two layouts of growth, both used by the product's defaults (FastRunner's ``static_cache``):
a static cache on a GPU, whose addresses never change (what CUDA graphs need), and a growing
one on a CPU, which keeps the process small (issue 14: bench/results/footprint.md).
"""

from __future__ import annotations

import torch

from superposed.types import EngineError

LENGTH_QUANTUM = 128  # a growing cache's K and V tensors grow to a multiple of this many positions


class KVCache:
    """Every layer's keys and values, and which rows and positions of them hold a sequence.

    The storage is one tensor [layers, R, kv_heads, C, D] for K and one for V (``keys``,
    ``values``), so a compiled step's new keys are stored in one copy; ``layer_keys[i]``,
    ``layer_values[i]`` are layer i's views [R, kv_heads, C, D], which the eager step reads
    (indexing the storage on every layer of every step costs more). Rows 0..rows-1 hold the
    sequences, positions 0..length-1 of them are filled; R and C are the capacity.

    static: the storage holds the whole context from the first reserve on and is never
    reallocated, so its addresses never change (what CUDA graphs need). Otherwise it grows
    with the longest prompt in steps of LENGTH_QUANTUM positions, which keeps a CPU process
    small, and a rewind to nothing lets the next prompt start from an empty one.
    """

    def __init__(
        self,
        layers: int,
        kv_heads: int,
        head_dim: int,
        max_context: int,
        dtype: torch.dtype,
        device: torch.device,
        static: bool,
    ) -> None:
        self.shape = (layers, kv_heads, head_dim)
        self.max_context = max_context
        self.dtype = dtype
        self.device = device
        self.static = static
        self.rows = 1
        self.length = 0
        self._store(self.empty(1, 0), self.empty(1, 0))

    def empty(self, rows: int, capacity: int) -> torch.Tensor:
        """[layers, rows, kv_heads, capacity, D] of zeros, the storage's layout."""
        layers, kv_heads, head_dim = self.shape
        shape = (layers, rows, kv_heads, capacity, head_dim)
        return torch.zeros(shape, dtype=self.dtype, device=self.device)

    def _store(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Make ``keys``, ``values`` the storage, with their per-layer views."""
        self.keys, self.values = keys, values
        self.layer_keys, self.layer_values = list(keys), list(values)

    @property
    def capacity(self) -> int:
        """Positions the storage holds (C)."""
        return int(self.keys.shape[3])

    def reserve(self, rows: int, length: int) -> None:
        """Grow the storage to hold ``rows`` x ``length``, keeping the filled positions."""
        if length > self.max_context:
            raise EngineError(
                f"{length} positions exceed the model's context of {self.max_context} tokens"
            )
        have_rows, have_length = self.keys.shape[1], self.capacity
        if rows <= have_rows and length <= have_length:
            return
        new_rows = max(rows, have_rows)
        new_length = have_length
        if length > have_length and self.static:
            new_length = self.max_context
        elif length > have_length:  # no doubling: hold only what the prompts use, in quanta
            new_length = min(-(-length // LENGTH_QUANTUM) * LENGTH_QUANTUM, self.max_context)
        n = self.length
        keys, values = self.empty(new_rows, new_length), self.empty(new_rows, new_length)
        keys[:, :have_rows, :, :n] = self.keys[:, :, :, :n]
        values[:, :have_rows, :, :n] = self.values[:, :, :, :n]
        self._store(keys, values)

    def write(
        self, start: int, keys: torch.Tensor, values: torch.Tensor, layer: int | None = None
    ) -> None:
        """Store new positions from ``start`` on in rows 0..B-1: keys, values
        [layers, B, kv_heads, T, D] for every layer, or [B, kv_heads, T, D] for ``layer``.
        The caller reserves the room and advances ``length``."""
        b, t = keys.shape[-4], keys.shape[-2]
        if layer is None:
            self.keys[:, :b, :, start : start + t] = keys
            self.values[:, :b, :, start : start + t] = values
        else:
            self.layer_keys[layer][:b, :, start : start + t] = keys
            self.layer_values[layer][:b, :, start : start + t] = values

    def read(self, layer: int, end: int, first: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``layer``'s keys and values of positions first..end-1 in the sequences'
        rows: views [rows, kv_heads, end - first, D]."""
        b = self.rows
        keys, values = self.layer_keys[layer], self.layer_values[layer]
        return keys[:b, :, first:end], values[:b, :, first:end]

    def attended(self) -> int:
        """The positions a compiled step reads (A): the filled ones rounded up to
        LENGTH_QUANTUM, within the capacity. Not the whole capacity: after a 1,500-token
        prompt, a step at 512 positions read all 1,536 and took 71 ms instead of 48 (issue
        39); not the filled length itself, so that a step's shapes change once every
        LENGTH_QUANTUM tokens (and the exported step's length dimension stays at least 2)."""
        rounded = -(-max(self.length, 1) // LENGTH_QUANTUM) * LENGTH_QUANTUM
        return min(rounded, self.capacity)

    def views(self, end: int | None = None) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Every layer's positions 0..end-1 (None: the whole capacity) in the sequences' rows:
        [rows, kv_heads, end, D] each (what a compiled step reads, masking the positions from
        ``length`` on)."""
        b = self.rows
        keys = [k[:b, :, :end] for k in self.layer_keys]
        return keys, [v[:b, :, :end] for v in self.layer_values]

    def gather(self, index: torch.Tensor) -> None:
        """Rows 0..len(index)-1 become the rows ``index`` [B'] of the current ones."""
        self.reserve(len(index), self.length)
        n = self.length
        index = index.to(self.device)
        for cache in (self.keys, self.values):
            cache[:, : len(index), :, :n] = cache[:, index, :, :n]
        self.rows = len(index)

    def expand(self, batch: int) -> None:
        """Each row becomes ``batch`` consecutive copies of itself."""
        if batch <= 1:
            return
        self.gather(torch.arange(self.rows, device=self.device).repeat_interleave(batch))

    def rewind(self, length: int) -> None:
        """Keep row 0's first ``length`` positions (at most the filled ones); drop the other
        rows. A rewind to nothing frees a growing storage, so one long prompt does not keep
        its memory for every later short one (steps read only the filled positions,
        rounded up to LENGTH_QUANTUM: see ``attended``)."""
        self.rows = 1
        self.length = max(0, min(length, self.length))
        if self.length == 0 and not self.static:
            self._store(self.empty(1, 0), self.empty(1, 0))
