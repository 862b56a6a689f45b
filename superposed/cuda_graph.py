"""CUDA graphs of the fast runner's forwards of a few tokens (issues 25, 37).

On a GPU the eager decode step is bound by kernel launches: about 20 ms a step for
SmolLM2-135M's shape on an H200 (bench/results/latency-cuda.md), where reading its 270 MB
of bf16 weights takes well under 0.1 ms. gpt-fast, vLLM and llama.cpp capture the step in a
CUDA graph and replay it, one launch instead of ~30 layers of small kernels; so does this.

What is captured is ``FastRunner.pure_step``: it writes nothing and takes the position as a
tensor, so one graph serves every position. It reads views of the static KV cache, whose
addresses never change (kv_cache.py), up to a capacity bucket: a power of two from
``SMALLEST_BUCKET`` positions on, so a step after a 1,000-token prompt reads 1,024 positions
of the cache, not the whole context (32,768 for Gemma 3). Inputs and outputs live in static
buffers: the host copies the new values in, replays the graph and stores the new keys and
values in the cache (two copies). Nothing in a step waits for the GPU; reading the logits
does, after it.

One graph per ``GraphKey``, captured on first use:

- ``embeds``: a step's (or a typed word's) input embeddings [R, T, H]; FastRunner.step and
  the prefill of up to TYPED_TOKENS tokens reach it through the runner's ``compiled_steps``;
- ``mixture``: superposition's weighted embedding inside the graph: the drafts' newest
  tokens and their weights [1, M] in (``GraphRunner.step_mixture``, which superposed.py
  calls where the runner has it), M padded with weight 0 to a power of two;
- ``score``: the scoring batch (branched rows), token ids [R, T] scored at every position
  (``score``), T padded to a power of two.

The candidate selection, the n-gram mixing and the memory's proposals stay on the host.
The AOTInductor package of compiled.py crashed the process on load on CUDA; these graphs
are made in process, in a fraction of a second per shape, and used only on CUDA
(``unsupported_reason``). ``eager_capture`` runs the same static-buffer bookkeeping without
a graph, so the CPU tests hold it to the eager runner (tests/test_cuda_graph.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from superposed.fast_runner import FastRunner
from superposed.prefill import TYPED_TOKENS
from superposed.runner import check_finite
from superposed.types import EngineError

log = logging.getLogger(__name__)

SMALLEST_BUCKET = 256  # cache positions the smallest graph reads
MAX_ROWS = 16  # rows a step may have and still replay a graph (beam, batched nucleus: k)
WARMUP = 2  # runs before a capture, on a side stream (lazy initialisation, autotuning)
GRAPH_PRECISIONS = ("bf16", "fp32")  # the int kernels run on the CPU only

# (logits, new keys, new values), as FastRunner.pure_step returns them
Outputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
# A capture: the forward -> its outputs (static buffers) and how to run it again into them.
Capture = Callable[[Callable[[], Outputs]], tuple[Outputs, Callable[[], None]]]


def unsupported_reason(runner: FastRunner) -> str | None:
    """Why ``runner``'s forwards cannot be captured, or None where they can."""
    if runner.device.type != "cuda":
        return f"CUDA graphs need a CUDA device (the runner is on {runner.device.type})"
    if runner.precision not in GRAPH_PRECISIONS:
        return f"precision {runner.precision} runs on the CPU only"
    if not runner.static_cache:
        return "CUDA graphs need the static KV cache (its addresses never change)"
    return None


def cuda_capture(forward: Callable[[], Outputs]) -> tuple[Outputs, Callable[[], None]]:
    """``forward`` captured in a CUDA graph (torch.cuda.CUDAGraph, after a warm-up on a side
    stream as PyTorch's docs do it); its outputs are the graph's static output buffers."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(WARMUP):
            forward()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    # thread_local: another thread's CUDA work (a warm-up, a load) does not spoil the capture
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        outputs = forward()
    return outputs, graph.replay


def eager_capture(forward: Callable[[], Outputs]) -> tuple[Outputs, Callable[[], None]]:
    """What a graph does, without one: each replay runs ``forward`` again and copies its
    results into the first run's outputs (for the CPU tests and the device script's dry run)."""
    outputs = forward()

    def replay() -> None:
        for static, fresh in zip(outputs, forward(), strict=True):
            static.copy_(fresh)

    return outputs, replay


def power_of_two(n: int, smallest: int = 1) -> int:
    """The smallest power of two >= n, and >= ``smallest``."""
    return max(smallest, 1 << max(0, n - 1).bit_length())


def capacity_bucket(end: int, capacity: int) -> int | None:
    """The cache positions a graph reads so that positions 0..end-1 fit: a power of two
    from SMALLEST_BUCKET on, at most the storage's ``capacity``; None where they do not fit."""
    if end > capacity:
        return None
    return min(power_of_two(end, SMALLEST_BUCKET), capacity)


@dataclass(frozen=True)
class GraphKey:
    """What one graph is captured for."""

    kind: str  # embeds | mixture | score (see the module docstring)
    rows: int  # R
    tokens: int  # T, new positions (padded for score)
    width: int  # M, the mixture's tokens per row (1 otherwise)
    capacity: int  # cache positions the graph reads (capacity_bucket)


@dataclass
class Graph:
    """A captured forward: its static inputs, its static outputs, and the replay."""

    position: torch.Tensor  # [1] the first new position
    inputs: dict[str, torch.Tensor]
    outputs: Outputs
    replay: Callable[[], None]

    def __call__(self, position: int, **values: torch.Tensor) -> Outputs:
        """Copy ``values`` into the inputs of the same names, run; the outputs are the static
        buffers (overwritten by the next run)."""
        self.position.fill_(position)
        for name, value in values.items():
            self.inputs[name].copy_(value, non_blocking=True)  # no wait for the GPU
        self.replay()
        return self.outputs


@dataclass
class Graphs:
    """A runner's graphs by key, captured on first use, all dropped when the cache's storage
    moves (a batch of more rows than ever before reallocates it)."""

    runner: FastRunner
    capture: Capture
    graphs: dict[GraphKey, Graph] = field(default_factory=dict)
    storage: tuple[int, int] = (0, 0)  # the cache's K and V addresses the graphs read
    captures: int = 0  # graphs captured so far (a storage move captures them again)
    replays: int = 0
    failed: set[GraphKey] = field(default_factory=set)  # captures that raised: eager instead

    def get(self, kind: str, rows: int, tokens: int, width: int = 1) -> Graph | None:
        """The graph for ``tokens`` new positions after the cache's filled ones; None where
        they would not fit in its storage (the caller runs eagerly)."""
        cache = self.runner.cache
        capacity = capacity_bucket(cache.length + tokens, cache.capacity)
        if capacity is None or rows > cache.keys.shape[1]:
            return None
        storage = (cache.keys.data_ptr(), cache.values.data_ptr())
        if storage != self.storage:
            self.graphs.clear()
            self.storage = storage
        key = GraphKey(kind, rows, tokens, width, capacity)
        if key in self.failed:
            return None
        if key not in self.graphs:
            try:
                self.graphs[key] = self._capture(key)
            except RuntimeError as err:  # a request must not fail for want of a graph
                log.warning("capturing %s failed (%s): that forward stays eager", key, err)
                self.failed.add(key)
                return None
            self.captures += 1
        self.replays += 1
        return self.graphs[key]

    def _capture(self, key: GraphKey) -> Graph:
        runner, cache = self.runner, self.runner.cache
        device, r, c = runner.device, key.rows, key.capacity
        keys = [k[:r, :, :c] for k in cache.layer_keys]  # each [R, kv_heads, C, D]
        values = [v[:r, :, :c] for v in cache.layer_values]
        position = torch.zeros(1, dtype=torch.long, device=device)
        inputs = self._inputs(key)
        every = key.kind == "score"

        def forward() -> Outputs:
            x = self._embeds(key.kind, inputs)  # [R, T, H]
            return runner.pure_step(x, position, keys, values, every=every)

        log.debug("capturing a graph: %s", key)
        outputs, replay = self.capture(forward)
        return Graph(position, inputs, outputs, replay)

    def _inputs(self, key: GraphKey) -> dict[str, torch.Tensor]:
        """The static input buffers of a graph of ``key``, zeros (a valid input)."""
        device, r = self.runner.device, key.rows
        if key.kind == "embeds":
            hidden = self.runner.embed(torch.zeros(1, 1, dtype=torch.long)).shape[-1]
            return {"x": torch.zeros(r, key.tokens, hidden, device=device)}
        if key.kind == "mixture":
            return {
                "ids": torch.zeros(r, key.width, dtype=torch.long, device=device),
                "weights": torch.zeros(r, key.width, device=device),
            }
        return {"ids": torch.zeros(r, key.tokens, dtype=torch.long, device=device)}

    def _embeds(self, kind: str, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """A graph's input embeddings [R, T, H] from its static inputs (inside the graph)."""
        if kind == "embeds":
            return inputs["x"]
        embedded = self.runner.embed(inputs["ids"])  # [R, T or M, H] fp32
        if kind == "score":
            return embedded
        # superposed.superposed_input's sum_i gamma_i E(x_i), one position per row
        return (inputs["weights"][..., None] * embedded).sum(1, keepdim=True)  # [R, 1, H]


class GraphRunner:
    """A FastRunner whose forwards of a few tokens replay CUDA graphs (a ModelRunner).

    Steps and the prefill of a typed word go through the runner's ``compiled_steps`` (its
    own bookkeeping); the superposed step and the scoring batch through ``step_mixture`` and
    ``score`` here. Everything else is the runner's.
    """

    def __init__(self, runner: FastRunner, capture: Capture | None = None) -> None:
        """capture: how a forward is captured; None: a CUDA graph, where the runner allows
        it (``unsupported_reason``), else a clear error."""
        if capture is None:
            reason = unsupported_reason(runner)
            if reason is not None:
                raise EngineError(f"cannot capture the decode step: {reason}")
        self.runner = runner
        self.graphs = Graphs(runner, capture or cuda_capture)
        self.vocab_size = runner.vocab_size
        self.max_context = runner.max_context
        self.device = runner.device
        runner.compiled_steps.update(dict.fromkeys(range(1, MAX_ROWS + 1), self._step))

    # --- the runner's own --------------------------------------------------------------------

    @property
    def length(self) -> int:
        return self.runner.length

    @property
    def cached_ids(self) -> list[int]:
        return self.runner.cached_ids

    @property
    def compiled_calls(self) -> int:
        """Forwards that replayed a graph (the runner's counter of compiled forwards)."""
        return self.runner.compiled_calls

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.runner.embed(ids)

    def prefill(self, ids: list[int]) -> torch.Tensor:
        return self.runner.prefill(ids)  # a typed word (<= TYPED_TOKENS) through _step

    def step(self, embeds: torch.Tensor) -> torch.Tensor:
        return self.runner.step(embeds)  # through _step

    def expand(self, batch: int) -> None:
        self.runner.expand(batch)

    def select(self, rows: torch.Tensor) -> None:
        self.runner.select(rows)

    def rewind(self, length: int) -> None:
        self.runner.rewind(length)

    # --- the captured forwards ---------------------------------------------------------------

    def _step(
        self,
        x: torch.Tensor,
        position: torch.Tensor,
        keys: list[torch.Tensor],
        values: list[torch.Tensor],
    ) -> Outputs:
        """The runner's compiled step (fast_runner.StepFn): x [B, T, H] at the cache's next
        positions -> logits [B, V] and the new keys and values, which the runner stores."""
        b, t = x.shape[0], x.shape[1]
        graph = self.graphs.get("embeds", b, t) if t <= TYPED_TOKENS else None
        if graph is None:
            return self.runner.pure_step(x, position, keys, values)
        logits, new_keys, new_values = graph(self.runner.cache.length, x=x)
        return logits.clone(), new_keys, new_values  # the runner stores the keys at once

    @torch.inference_mode()
    def step_mixture(self, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """A superposed step: ids, weights [1, D] (the drafts' newest tokens and their
        normalised probabilities) -> logits [1, V] at the next position, the weighted sum of
        the embeddings taken inside the graph (FastRunner.step's bookkeeping otherwise)."""
        cache, d = self.runner.cache, ids.shape[1]
        if cache.rows != 1:
            raise ValueError(f"a superposed step runs on one row, the cache has {cache.rows}")
        n = cache.length
        cache.reserve(1, n + 1)
        width = power_of_two(d)
        graph = self.graphs.get("mixture", 1, 1, width)
        if graph is None:  # past the storage: the eager step on the same mixture
            embeds = self.runner.embed(ids)  # [1, D, H]
            mixed = weights.to(embeds.device, embeds.dtype)[..., None] * embeds
            return self.runner.step(mixed.sum(1, keepdim=True))
        padded_ids = torch.zeros(1, width, dtype=torch.long)
        padded_weights = torch.zeros(1, width)
        padded_ids[:, :d], padded_weights[:, :d] = ids, weights
        logits, new_keys, new_values = graph(n, ids=padded_ids, weights=padded_weights)
        cache.write(n, new_keys, new_values)
        cache.length += 1
        self.runner.compiled_calls += 1
        return check_finite(logits.clone())

    @torch.inference_mode()
    def score(self, ids: torch.Tensor) -> torch.Tensor:
        """ids [B, T] appended to the B cache rows -> fp32 logits [B, T, V] at every position
        (the scoring batch), T padded inside the graph (the padding's keys are not kept)."""
        b, t = ids.shape
        cache = self.runner.cache
        if b != cache.rows:
            raise ValueError(f"score got {b} rows, the cache has {cache.rows}")
        n = cache.length
        cache.reserve(b, n + t)
        padded = power_of_two(t)
        graph = self.graphs.get("score", b, padded)
        if graph is None:
            return self.runner.score(ids)
        tokens = ids.new_zeros(b, padded)  # where ids are (the scoring batch's: the GPU)
        tokens[:, :t] = ids
        logits, new_keys, new_values = graph(n, ids=tokens)  # [B, T', V]
        cache.write(n, new_keys[..., :t, :], new_values[..., :t, :])
        cache.length += t
        self.runner.compiled_calls += 1
        return check_finite(logits[:, :t].clone())
