"""A fast runner for the Llama-family block (Llama, SmolLM2, Mistral, Qwen2), and the forward
every fast runner shares (Gemma 3's, fast_gemma.py, changes only its block and tables).

The same math as the transformers model, written out lean (after gpt-fast): fused q/k/v and
gate/up projections (blocks.py), a preallocated KV cache (kv_cache.py), the residual stream
in fp32, and weights in the ``precision`` of the decode step. Each precision is kept where a
committed benchmark shows it serving the product:

- fp32: the logits match the transformers model's (bench/results/fidelity.md: 100%
  agreement); the reference the others are held to.
- bf16: the default on a GPU (default_precision; bench/results/latency-cuda.md).
- int4: the default on a CPU, the fastest decode (bench/results/latency.md, kernels.md) and
  on the default model the most faithful after fp32 (fidelity.md).
- int8: faster than int4 with two threads in latency.md's second table (greedy 366 against
  418 ms), as faithful (fidelity.md).

int8/int4 are weight-only quantized decode matmuls (quant.py) with bf16 activations and an
int4 output head whose best logits are recomputed exactly (quant.RefinedHead); their longer
prefills run on dense weights (prefill.py). A decode step reads every weight once, so its
cost is about the bytes of the weights.

Each forward runs eagerly (``_forward``: SDPA over the filled cache) or, for a decode step
or a typed word on the CPU, through the step compiled from ``pure_step`` by compiled.py
where it is ready (latency.md: fast-int4-compiled against fast-int4).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from superposed.attention import (
    eager_mask,
    rms_norm,
    sdpa,
    split_attention,
    step_masks,
    window_start,
)
from superposed.blocks import Block, Dims, Fetch, copy_parameter, owned
from superposed.kv_cache import KVCache
from superposed.model import Checkpoint
from superposed.options import PRECISIONS, QUANTIZED
from superposed.prefill import TYPED_TOKENS, PrefillPlan, Weights
from superposed.quant import Linear, RefinedHead, kv_dtype, quantize
from superposed.runner import check_finite
from superposed.types import EngineError

log = logging.getLogger(__name__)

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2")
_STATIC_ROPE = ("default", "linear", "llama3", "yarn")  # inv_freq does not depend on length

# One layer's attention for the shared layer loop: (layer index, block, h [B, T, H]) -> [B, T, H].
Attend = Callable[[int, Block, torch.Tensor], torch.Tensor]
# A compiled FastRunner.pure_step: (x, position, keys, values) -> (logits, new keys, new values).
StepFn = Callable[
    [torch.Tensor, torch.Tensor, list[torch.Tensor], list[torch.Tensor]],
    tuple[torch.Tensor, torch.Tensor, torch.Tensor],
]


class UnsupportedModel(EngineError):
    """The fast runner does not implement this model's architecture; use runner "hf"."""


def unsupported_reason(model: Any) -> str | None:
    """Why the fast runner cannot run ``model``, or None if it can."""
    config = model.config
    kind = getattr(config, "model_type", None)
    if kind not in SUPPORTED_MODEL_TYPES:
        return f"model type {kind!r} is not one of {', '.join(SUPPORTED_MODEL_TYPES)}"
    if getattr(config, "hidden_act", "silu") != "silu":
        return f"activation {config.hidden_act!r} is not silu"
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type not in _STATIC_ROPE:
        return f"rope type {rope_type!r} changes with the length"
    window = getattr(config, "sliding_window", None)
    uses_window = getattr(config, "use_sliding_window", window is not None)
    if uses_window and window is not None and window < config.max_position_embeddings:
        return f"sliding-window attention ({window}) is not implemented"
    if getattr(config, "mlp_bias", False):
        return "MLP biases are not implemented"
    return None


def build_head(model: Any, precision: str, head_weight: torch.Tensor, fetch: Fetch) -> Linear:
    """The output head in ``precision``; ``head_weight`` is its weight as the runner keeps it
    (shared with the embedding when they are tied)."""
    output = model.get_output_embeddings()
    bias = getattr(output, "bias", None)
    bias = None if bias is None else fetch(bias)
    if precision in QUANTIZED:  # coarse logits, the best ones recomputed exactly
        return RefinedHead(head_weight, bias)
    return quantize(head_weight, bias, precision)


def build_weights(model: Any, precision: str, head: Linear, fetch: Fetch) -> Weights:
    """The model's layers in ``precision``, with the output ``head``; ``fetch`` gives each
    parameter's values.

    Nothing returned is a view of the model's tensors: those may map the checkpoint file,
    whose pages stay resident while any view of them lives.
    """
    blocks = [Block.from_layer(layer, precision, fetch) for layer in model.model.layers]
    return Weights(blocks, owned(fetch(model.model.norm.weight)), head)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two parameters are one (tied); a skeleton's meta tensors have no address."""
    return a is b or (a.device.type != "meta" and a.data_ptr() == b.data_ptr())


class FastRunner:
    """The ModelRunner for Llama-family models: preallocated per-layer KV, quantized decode."""

    # The attention's scale where it is not 1/sqrt(head_dim) (Gemma 3's).
    scale: float | None = None

    def __init__(
        self,
        model: Any,
        precision: str = "bf16",
        static_cache: bool | None = None,
        checkpoint: Checkpoint | None = None,
        prefill_copy: bool = False,
        kv_dtype: torch.dtype | None = None,
    ) -> None:
        """static_cache: allocate the KV tensors for the whole context at once, so their
        addresses never change (what CUDA graphs need); None means on a GPU only (the
        default there). Otherwise they grow with the longest prompt, which keeps a CPU
        process small (kv_cache.py).

        checkpoint: ``model`` is a skeleton (model.load_model(skeleton=True)) and this reads
        its weights, one tensor at a time; None: ``model`` has its weights.

        prefill_copy (int8, int4): keep a dense copy of the layers for prefills of many
        tokens instead of de-quantizing the decode weights one layer at a time as a prefill
        runs (prefill.py).

        kv_dtype: the dtype of the KV cache (and the attention); None: quant.kv_dtype's
        choice for the precision and this CPU."""
        if precision not in PRECISIONS:
            raise EngineError(f"unknown precision {precision!r}: use {', '.join(PRECISIONS)}")
        reason = self.unsupported(model)
        if reason is not None:
            raise UnsupportedModel(f"the fast runner cannot run this model: {reason}")
        fetch: Fetch = checkpoint if checkpoint is not None else copy_parameter
        self.device = checkpoint.device if checkpoint else next(model.parameters()).device
        if precision in QUANTIZED and self.device.type != "cpu":
            raise EngineError(f"precision {precision} runs on the CPU only: use bf16 on a GPU")
        self.precision = precision
        self.static_cache = self.device.type != "cpu" if static_cache is None else static_cache
        self._kv_dtype = kv_dtype
        self._read_config(model.config)
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self._sample = [
            owned((fetch(p) if checkpoint else p.detach()).flatten()[:64]).cpu()
            for p in model.parameters()
        ]
        head_weight = self._keep_embedding(model, checkpoint, fetch)
        self._rotary = model.model.rotary_emb
        with torch.no_grad():
            lm_head = build_head(model, precision, head_weight, fetch)
            self.decode_weights = self.build_weights(model, precision, lm_head, fetch)
            self.plan = PrefillPlan.choose(
                self.decode_weights,
                precision,
                prefill_copy,
                lambda dense: self.build_weights(model, dense, lm_head, fetch),
            )
        self.layers = len(self.decode_weights.blocks)
        self.cache = KVCache(
            self.layers,
            self.kv_heads,
            self.head_dim,
            self.max_context,
            self.dtype,
            self.device,
            self.static_cache,
        )
        # The rotary table for the whole context, made once (a compiled step holds it).
        self._cos, self._sin = self.rotary_table()  # [L, D] (or [kinds, L, D])
        # Compiled decode steps (FastRunner.pure_step) by rows, installed by compiled.py;
        # a step with no compiled one for its rows runs eagerly.
        self.compiled_steps: dict[int, StepFn] = {}
        self.compiled_calls = 0  # forwards that went through one
        self._ids: list[int] = []  # prompt tokens in row 0 of the cache

    def _read_config(self, config: Any) -> None:
        """The shape and numerics of the attention, and the context."""
        self.max_context = int(getattr(config, "max_position_embeddings", 2048) or 2048)
        self.heads = int(config.num_attention_heads)
        self.kv_heads = int(getattr(config, "num_key_value_heads", None) or self.heads)
        self.head_dim = int(
            getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        )
        self.eps = float(config.rms_norm_eps)
        self.dtype = self._kv_dtype or kv_dtype(self.precision, self.device)  # q, k, v: the KV
        self.dims = Dims(self.heads, self.kv_heads, self.head_dim, self.eps, self.dtype)
        # What identifies the weights (compiled.py keys compiled steps by it).
        self.config_json: str = config.to_json_string()

    def _keep_embedding(self, model: Any, checkpoint: Checkpoint | None, fetch: Fetch) -> Any:
        """Keep the embedding as a copy of the runner's own: a view of the loaded weights
        would keep the checkpoint's memory map resident (0.5 GB for the default); returns
        the head's weight (the same tensor where they are tied)."""
        embedding = model.get_input_embeddings().weight
        if self.precision in QUANTIZED:  # bf16 rows: half the memory (54 MB here)
            self._embed_weight = (
                checkpoint(embedding, torch.bfloat16)
                if checkpoint is not None
                else copy_parameter(embedding).to(torch.bfloat16)
            )  # [V, H]
        else:
            self._embed_weight = fetch(embedding)
        head = model.get_output_embeddings().weight
        return self._embed_weight if _same(head, embedding) else fetch(head)

    # --- what a sibling architecture overrides (fast_gemma.py) -------------------------------

    @staticmethod
    def unsupported(model: Any) -> str | None:
        """Why this runner cannot run ``model``, or None if it can."""
        return unsupported_reason(model)

    def build_weights(self, model: Any, precision: str, head: Linear, fetch: Fetch) -> Weights:
        """The model's layers in ``precision`` with the output ``head`` (see build_weights)."""
        return build_weights(model, precision, head, fetch)

    def rotary_table(self) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [L, D] fp32 for every position of the context."""
        positions = torch.arange(self.max_context, device=self.device)[None]  # [1, L]
        probe = torch.empty(0, dtype=torch.float32, device=self.device)
        cos, sin = self._rotary(probe, positions)  # [1, L, D]
        return cos[0].float(), sin[0].float()

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids.to(self.device), self._embed_weight).float()

    # --- the cache ------------------------------------------------------------------------

    def weight_sample(self) -> list[torch.Tensor]:
        """The first values of every parameter of the model the runner was built from."""
        return self._sample

    @property
    def length(self) -> int:
        return self.cache.length

    @property
    def cached_ids(self) -> list[int]:
        return self._ids

    def expand(self, batch: int) -> None:
        self.cache.expand(batch)

    def select(self, rows: torch.Tensor) -> None:
        self.cache.gather(rows)

    def rewind(self, length: int) -> None:
        self.cache.rewind(length)  # row 0 holds the prompt: the other rows are dropped
        self._ids = self._ids[: self.cache.length]

    # --- the forward ----------------------------------------------------------------------

    def _layers(
        self, weights: Weights, x: torch.Tensor, attend: Attend, every: bool = False
    ) -> torch.Tensor:
        """x [B, T, H] through every block -> fp32 logits [B, V] of the last position
        (every: [B, T, V] of every position).

        attend(i, block, h) is layer i's attention output [B, T, H] for its input h.
        """
        x = x.float()  # the residual stream stays fp32
        for i, block in enumerate(weights.blocks):
            x = block.forward(x, functools.partial(attend, i, block), self.eps)
        # The head reads one row per sequence: the decode head, whichever weights ran the layers.
        head = self.decode_weights.lm_head
        if every:
            b, t, h = x.shape
            rows = rms_norm(x.reshape(b * t, h), weights.norm, self.eps)  # [B * T, H]
            return head(rows).float().reshape(b, t, -1)
        last = rms_norm(x[:, -1], weights.norm, self.eps)  # [B, H]
        return head(last).float()  # [B, V]

    def _forward(self, x: torch.Tensor, start: int, every: bool = False) -> torch.Tensor:
        """x [B, T, H] at positions start..start+T-1 -> fp32 logits [B, V] of the last one
        ([B, T, V] of every one with ``every``).

        The eager path: attention reads only the filled part of the cache (from a window's
        start on).
        """
        t = x.shape[1]
        end = start + t
        cos, sin = self._cos[..., start:end, :], self._sin[..., start:end, :]  # [T, D]
        masks: dict[int | None, dict[str, Any]] = {}  # by window

        def attend(i: int, block: Block, h: torch.Tensor) -> torch.Tensor:
            if block.window not in masks:
                masks[block.window] = eager_mask(block.window, start, end, self.device)
            q, k, v = block.project(h, cos, sin, self.dims)
            self.cache.write(start, k, v, layer=i)
            keys, values = self.cache.read(i, end, first=window_start(block.window, start))
            return block.out(sdpa(q, keys, values, scale=self.scale, **masks[block.window]))

        return check_finite(self._layers(self.plan.weights(t), x, attend, every))

    def pure_step(
        self,
        x: torch.Tensor,
        position: torch.Tensor,
        keys: list[torch.Tensor],
        values: list[torch.Tensor],
        every: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A decode step (or a prefill of a few tokens) as a pure function, for torch.export
        and AOTInductor (compiled.py) and CUDA graphs (cuda_graph.py; ``every``: the logits
        [B, T, V] of every new position, for the scoring batch).

        x [B, T, H] at positions ``position`` [1] onwards; keys, values: each layer's whole
        cache [B, kv_heads, C, D], of which the positions before ``position`` are read (a
        mask, so C can be any capacity). It writes nothing: it returns fp32 logits [B, V] of
        the last position (not checked for finiteness) and the new positions' keys and
        values [layers, B, kv_heads, T, D], for the caller to store.
        """
        t = x.shape[1]
        new = position + torch.arange(t, device=x.device)  # [T]
        cos, sin = self._cos[..., new, :], self._sin[..., new, :]  # [T, D]
        scale = self.scale if self.scale is not None else self.head_dim**-0.5
        masks: dict[int | None, tuple[torch.Tensor, torch.Tensor]] = {}  # by window
        new_keys: list[torch.Tensor] = []
        new_values: list[torch.Tensor] = []

        def attend(i: int, block: Block, h: torch.Tensor) -> torch.Tensor:
            if block.window not in masks:
                masks[block.window] = step_masks(block.window, position, t, keys[0].shape[2])
            q, k, v = block.project(
                h, cos, sin, self.dims
            )  # q [B, heads, T, D]; k, v [B, kv, T, D]
            new_keys.append(k)
            new_values.append(v)
            old_mask, new_mask = masks[block.window]
            return block.out(
                split_attention(q, keys[i], values[i], k, v, old_mask, new_mask, scale)
            )

        logits = self._layers(self.decode_weights, x, attend, every)
        return logits, torch.stack(new_keys), torch.stack(new_values)

    def _compiled_forward(self, step: StepFn, x: torch.Tensor) -> torch.Tensor:
        """x [B, T, H] at the next positions through a compiled step; stores the new K, V."""
        n = self.cache.length
        position = torch.tensor([n], device=self.device)
        keys, values = self.cache.views(self.cache.attended())  # [B, kv, A, D] each
        logits, new_keys, new_values = step(x.to(self.device), position, keys, values)
        self.compiled_calls += 1
        self.cache.write(n, new_keys, new_values)  # [layers, B, kv_heads, T, D]
        return check_finite(logits)

    @torch.inference_mode()
    def prefill(self, ids: list[int]) -> torch.Tensor:
        if not ids:
            raise ValueError("prefill needs at least one token")
        cache = self.cache
        if cache.rows != 1:
            raise ValueError("prefill extends the single prompt row: rewind first")
        cache.reserve(1, cache.length + len(ids))
        tokens = torch.tensor([ids], dtype=torch.long, device=self.device)  # [1, T]
        compiled = self.compiled_steps.get(1)
        if compiled is not None and len(ids) <= TYPED_TOKENS:  # typing: a few new tokens
            logits = self._compiled_forward(compiled, self.embed(tokens))
            cache.length += len(ids)
        else:
            with self.plan.threading(len(ids)):
                for offset in range(0, len(ids), self.plan.chunk):
                    chunk = tokens[:, offset : offset + self.plan.chunk]  # [1, T']
                    logits = self._forward(self.embed(chunk), cache.length)
                    cache.length += chunk.shape[1]
        if len(self._ids) == cache.length - len(ids):  # row 0 is all prompt: remember its tokens
            self._ids = self._ids + list(ids)
        return logits[0]

    @torch.inference_mode()
    def step(self, embeds: torch.Tensor) -> torch.Tensor:
        b, n = self.cache.rows, self.cache.length
        if embeds.shape[0] != b:
            raise ValueError(f"step got {embeds.shape[0]} rows, the cache has {b}")
        self.cache.reserve(b, n + 1)
        compiled = self.compiled_steps.get(b)
        if compiled is None:
            logits = self._forward(embeds.to(self.device), n)
        else:
            logits = self._compiled_forward(compiled, embeds)
        self.cache.length += 1
        return logits

    @torch.inference_mode()
    def score(self, ids: torch.Tensor) -> torch.Tensor:
        b, t = ids.shape
        cache = self.cache
        if b != cache.rows:
            raise ValueError(f"score got {b} rows, the cache has {cache.rows}")
        cache.reserve(b, cache.length + t)
        logits = self._forward(self.embed(ids), cache.length, every=True)  # [B, T, V]
        cache.length += t
        return logits
