"""A fast runner for the Llama-family block (Llama, SmolLM2, Mistral, Qwen2).

The same math as the transformers model, written out lean (after gpt-fast): fused q/k/v and
gate/up projections, a preallocated KV cache (KVCache: one K and one V tensor for all layers,
with per-layer views for the eager step), the residual stream in fp32, and weights in the
``precision`` of the decode step:

- fp32: everything in fp32; the logits match the transformers model's.
- bf16: bf16 weights, activations and KV cache.
- int8 / int4: weight-only quantized decode matmuls (see quant.py) with bf16 activations, and
  an int4 output head whose best logits are recomputed exactly (quant.RefinedHead); a longer
  prefill runs on dense weights, bf16 where the CPU's bf16 matmuls (AVX-512 BF16 or AMX) are
  fast and fp32 where they are emulated (AVX2: 45x slower; quant.prefill_dtype), since the
  quantized kernels are slow there (``prefill_weights``): by default each layer's decode
  weights de-quantized as the prefill reaches it and freed after it (DequantizedBlocks: a few
  MB at a time), which pays from about 80 tokens on; or with ``prefill_copy`` a bf16 copy of
  all the layers kept beside the decode ones (200 MB more on the default model), from a few
  tokens on.

A decode step reads every weight once, so its cost is about the bytes of the weights.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

import torch
import torch.nn.functional as F

from lsp_server.engine.model import Checkpoint
from lsp_server.engine.options import PRECISIONS, RUNNERS
from lsp_server.engine.quant import Linear, RefinedHead, dequantized, prefill_dtype, quantize
from lsp_server.engine.runner import HFRunner, ModelRunner, check_finite
from lsp_server.engine.types import EngineError

log = logging.getLogger(__name__)

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2")
_STATIC_ROPE = ("default", "linear", "llama3", "yarn")  # inv_freq does not depend on length
_PREFILL_CHUNK = 512  # tokens per prefill forward: bounds the activations' memory
# ... with weights de-quantized per forward: fewer, longer forwards de-quantize less often (SDPA's
# CPU kernel does not hold a [T, L] attention matrix, masked or causal). On a 1,500-token prefill
# of the default model 1,024 was as fast as 2,048, 10% faster than 512, with the lowest peak.
_DEQUANTIZED_CHUNK = 1024
# Up to this many tokens, a prefill runs on the decode weights: the quantized kernels beat bf16
# for a few rows (0.09 vs 0.23 ms for a 1536x576 matmul, one row), bf16 wins from about 16.
_FEW_TOKENS = 4
# ... and up to this many where the layers are de-quantized per forward (no prefill copy): that
# costs about 50 ms whatever the length, and the int4 kernels take 1.4 ms a token against 0.8
# for the whole de-quantized forward, so they win below about 80 tokens (default model, one
# thread: 64 tokens 86 vs 103 ms, 96 tokens 130 vs 119, measured when this was set; the
# committed bench/results/kernels.md has 128, 256 and 1,500 tokens, and
# ``python -m bench.kernels --prefill-tokens 64 96`` times these lengths).
_FEW_TOKENS_DEQUANTIZED = 80
_LENGTH_QUANTUM = 128  # the KV tensors grow to a multiple of this many positions

# One layer's attention for the shared layer loop: (layer index, block, h [B, T, H]) -> [B, T, H].
Attend = Callable[[int, "Block", torch.Tensor], torch.Tensor]
# A compiled FastRunner.pure_step: (x, position, keys, values) -> (logits, new keys, new values).
StepFn = Callable[
    [torch.Tensor, torch.Tensor, list[torch.Tensor], list[torch.Tensor]],
    tuple[torch.Tensor, torch.Tensor, torch.Tensor],
]


class UnsupportedModel(EngineError):
    """The fast runner does not implement this model's architecture; use runner "hf"."""


@dataclass
class Block:
    """One decoder layer's weights."""

    attn_norm: torch.Tensor  # [H] fp32
    mlp_norm: torch.Tensor  # [H] fp32
    qkv: Linear  # H -> (heads + 2 * kv_heads) * head_dim
    out: Linear  # heads * head_dim -> H
    gate_up: Linear  # H -> 2 * I
    down: Linear  # I -> H


@dataclass
class Weights:
    """All layers' weights in one precision, and the output head."""

    blocks: Sequence[Block]
    norm: torch.Tensor  # [H] fp32
    lm_head: Linear  # H -> V


class DequantizedBlocks(Sequence[Block]):
    """Quantized blocks read as bf16 ones: each block read is de-quantized then (a few MB
    for a small model), so a forward that walks the layers holds one layer's bf16 weights at
    a time rather than a bf16 copy of them all."""

    def __init__(self, blocks: Sequence[Block]) -> None:
        self.blocks = blocks

    def __len__(self) -> int:
        return len(self.blocks)

    @overload
    def __getitem__(self, index: int) -> Block: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Block]: ...

    def __getitem__(self, index: int | slice) -> Block | Sequence[Block]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        block = self.blocks[index]
        return dataclasses.replace(
            block,
            qkv=dequantized(block.qkv),
            out=dequantized(block.out),
            gate_up=dequantized(block.gate_up),
            down=dequantized(block.down),
        )

    def __iter__(self) -> Iterator[Block]:
        return (self[i] for i in range(len(self)))


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


# A model parameter -> its values in memory of the caller's own (Checkpoint, or _copy).
Fetch = Callable[[torch.Tensor], torch.Tensor]


def _copy(parameter: torch.Tensor) -> torch.Tensor:
    """A copy of a loaded parameter (the parameter itself may map the checkpoint file)."""
    return parameter.detach().clone()


def _linear(modules: list[Any], precision: str, fetch: Fetch) -> Linear:
    """Fuse the linear ``modules`` (same input) into one layer along the output dimension."""
    weight = torch.cat([fetch(m.weight) for m in modules], dim=0)
    biases = [m.bias for m in modules]
    if all(b is None for b in biases):
        bias = None
    else:
        bias = torch.cat(
            [
                fetch(b) if b is not None else weight.new_zeros(m.weight.shape[0])
                for m, b in zip(modules, biases, strict=True)
            ]
        )
    return quantize(weight, bias, precision)


def _owned(weight: torch.Tensor) -> torch.Tensor:
    """An fp32 copy of ``weight`` in memory of its own (``.float()`` alone may be a view)."""
    return weight.detach().to(torch.float32, copy=True)


def build_head(model: Any, precision: str, head_weight: torch.Tensor, fetch: Fetch) -> Linear:
    """The output head in ``precision``; ``head_weight`` is its weight as the runner keeps it
    (shared with the embedding when they are tied)."""
    output = model.get_output_embeddings()
    bias = getattr(output, "bias", None)
    bias = None if bias is None else fetch(bias)
    if precision in ("int8", "int4"):  # int4 logits, the best ones recomputed exactly
        return RefinedHead(head_weight, bias)
    return quantize(head_weight, bias, precision)


def build_weights(model: Any, precision: str, head: Linear, fetch: Fetch) -> Weights:
    """The model's layers in ``precision``, with the output ``head``; ``fetch`` gives each
    parameter's values.

    Nothing returned is a view of the model's tensors: those may map the checkpoint file,
    whose pages stay resident while any view of them lives.
    """
    blocks = []
    for layer in model.model.layers:
        attn, mlp = layer.self_attn, layer.mlp
        blocks.append(
            Block(
                attn_norm=_owned(fetch(layer.input_layernorm.weight)),
                mlp_norm=_owned(fetch(layer.post_attention_layernorm.weight)),
                qkv=_linear([attn.q_proj, attn.k_proj, attn.v_proj], precision, fetch),
                out=_linear([attn.o_proj], precision, fetch),
                gate_up=_linear([mlp.gate_proj, mlp.up_proj], precision, fetch),
                down=_linear([mlp.down_proj], precision, fetch),
            )
        )
    return Weights(blocks, _owned(fetch(model.model.norm.weight)), head)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two parameters are one (tied); a skeleton's meta tensors have no address."""
    return a is b or (a.device.type != "meta" and a.data_ptr() == b.data_ptr())


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x [..., H] fp32 -> normalised and scaled, fp32."""
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding. x [B, heads, T, D]; cos, sin [T, D]."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def split_attention(
    q: torch.Tensor,
    cached_keys: torch.Tensor,
    cached_values: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    cached_mask: torch.Tensor,
    new_mask: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Attention of T new queries over a cache and the T new keys, one softmax over both
    without concatenating them (the compiled step's attention; pure_step).

    q [B, heads, T, D]; cached_keys, cached_values [B, kv_heads, C, D], the whole cache;
    keys, values [B, kv_heads, T, D], the new positions'. kv_heads divides heads (grouped
    queries: query head h reads kv head h // (heads / kv_heads)). The masks are True where a
    query must not look: cached_mask over the cache (broadcast to [T, C]: the positions not
    yet written, a window's old ones), new_mask over the new keys ([T, T]: the later ones).
    Every query must see at least one key. -> [B, T, heads * D] in q's dtype.

    The scores are fp32; the cache is read in its own dtype, as the eager step's SDPA reads
    it (converting it to fp32 first tripled the memory traffic of a long context). Equals
    F.scaled_dot_product_attention over the concatenated keys with the joined mask
    (tests/test_fast_runner.py).
    """
    b, heads, t, d = q.shape
    kv_heads = cached_keys.shape[1]
    q = q.view(b, kv_heads, heads // kv_heads, t, d)  # [B, kv, G, T, D]
    old = torch.einsum("bkgtd,bkcd->bkgtc", q, cached_keys).float() * scale  # [B,kv,G,T,C]
    old = old.masked_fill(cached_mask, float("-inf"))
    fresh = torch.einsum("bkgtd,bkud->bkgtu", q.float(), keys.float()) * scale  # [.., T, T]
    fresh = fresh.masked_fill(new_mask, float("-inf"))
    top = torch.maximum(old.amax(-1, keepdim=True), fresh.amax(-1, keepdim=True))
    p_old, p_new = torch.exp(old - top), torch.exp(fresh - top)
    mixed = torch.einsum("bkgtc,bkcd->bkgtd", p_old.to(cached_values.dtype), cached_values)
    mixed = mixed.float() + torch.einsum("bkgtu,bkud->bkgtd", p_new, values.float())
    out = mixed / (p_old.sum(-1, keepdim=True) + p_new.sum(-1, keepdim=True))
    return out.permute(0, 3, 1, 2, 4).reshape(b, t, heads * d).to(q.dtype)


class KVCache:
    """Every layer's keys and values, and which rows and positions of them hold a sequence.

    The storage is one tensor [layers, R, kv_heads, C, D] for K and one for V (``keys``,
    ``values``), so a compiled step's new keys are stored in one copy; ``layer_keys[i]``,
    ``layer_values[i]`` are layer i's views [R, kv_heads, C, D], which the eager step reads
    (indexing the storage on every layer of every step costs more). Rows 0..rows-1 hold the
    sequences, positions 0..length-1 of them are filled; R and C are the capacity.

    static: the storage holds the whole context from the first reserve on and is never
    reallocated, so its addresses never change (what CUDA graphs need). Otherwise it grows
    with the longest prompt in steps of _LENGTH_QUANTUM positions, which keeps a CPU process
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
        elif length > have_length:  # no doubling: a compiled step reads every position
            new_length = min(-(-length // _LENGTH_QUANTUM) * _LENGTH_QUANTUM, self.max_context)
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

    def views(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Every layer's whole capacity in the sequences' rows: [rows, kv_heads, C, D] each
        (what a compiled step reads, masking the positions from ``length`` on)."""
        b = self.rows
        return [k[:b] for k in self.layer_keys], [v[:b] for v in self.layer_values]

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
        rows. A rewind to nothing frees a growing storage: a compiled step reads every
        position the storage holds, so one long prompt would otherwise slow every later
        short one."""
        self.rows = 1
        self.length = max(0, min(length, self.length))
        if self.length == 0 and not self.static:
            self._store(self.empty(1, 0), self.empty(1, 0))


class FastRunner:
    """The ModelRunner for Llama-family models: preallocated per-layer KV, quantized decode."""

    def __init__(
        self,
        model: Any,
        precision: str = "bf16",
        static_cache: bool | None = None,
        checkpoint: Checkpoint | None = None,
        prefill_copy: bool = False,
    ) -> None:
        """static_cache: allocate the KV tensors for the whole context at once, so their
        addresses never change (what CUDA graphs need); None means on a GPU only. Otherwise
        they grow with the longest prompt, which keeps a CPU process small.

        checkpoint: ``model`` is a skeleton (model.load_model(skeleton=True)) and this reads
        its weights, one tensor at a time; None: ``model`` has its weights.

        prefill_copy (int8, int4): keep a bf16 copy of the layers for prefills of many tokens
        instead of de-quantizing the decode weights one layer at a time as a prefill runs."""
        if precision not in PRECISIONS:
            raise EngineError(f"unknown precision {precision!r}: use {', '.join(PRECISIONS)}")
        reason = self.unsupported(model)
        if reason is not None:
            raise UnsupportedModel(f"the fast runner cannot run this model: {reason}")
        fetch: Fetch = checkpoint if checkpoint is not None else _copy
        self.device = checkpoint.device if checkpoint else next(model.parameters()).device
        if precision in ("int8", "int4") and self.device.type != "cpu":
            raise EngineError(f"precision {precision} runs on the CPU only: use bf16 on a GPU")
        config = model.config
        self.precision = precision
        self.static_cache = self.device.type != "cpu" if static_cache is None else static_cache
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self.max_context = int(getattr(config, "max_position_embeddings", 2048) or 2048)
        self.heads = int(config.num_attention_heads)
        self.kv_heads = int(getattr(config, "num_key_value_heads", None) or self.heads)
        self.head_dim = int(
            getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        )
        self.eps = float(config.rms_norm_eps)
        self.dtype = torch.float32 if precision == "fp32" else torch.bfloat16  # KV, attention
        # What identifies the weights (compiled.py keys compiled steps by it).
        self.config_json: str = config.to_json_string()
        self._sample = [
            _owned((fetch(p) if checkpoint else p.detach()).flatten()[:64]).cpu()
            for p in model.parameters()
        ]
        # The embedding (and a tied head) as a copy of the runner's own: a view of the loaded
        # weights would keep the checkpoint's memory map resident (0.5 GB for the default).
        embedding = model.get_input_embeddings().weight
        if precision in ("int8", "int4"):  # bf16 rows: half the memory (54 MB for the default)
            self._embed_weight = (
                checkpoint(embedding, torch.bfloat16)
                if checkpoint is not None
                else _copy(embedding).to(torch.bfloat16)
            )  # [V, H]
        else:
            self._embed_weight = fetch(embedding)
        head = model.get_output_embeddings().weight
        head_weight = self._embed_weight if _same(head, embedding) else fetch(head)
        self._rotary = model.model.rotary_emb
        with torch.no_grad():
            lm_head = build_head(model, precision, head_weight, fetch)
            self.decode_weights = self.build_weights(model, precision, lm_head, fetch)
            # Only the layers: the head reads one row per sequence, in its decode precision.
            self.prefill_weights = self.decode_weights
            self.prefill_chunk = _PREFILL_CHUNK
            self.few_tokens = _FEW_TOKENS  # prefills up to this long run on the decode weights
            if precision in ("int8", "int4") and prefill_copy:
                dense = "bf16" if prefill_dtype() == torch.bfloat16 else "fp32"
                self.prefill_weights = self.build_weights(model, dense, lm_head, fetch)
            elif precision in ("int8", "int4"):
                blocks = DequantizedBlocks(self.decode_weights.blocks)
                self.prefill_weights = dataclasses.replace(self.decode_weights, blocks=blocks)
                self.prefill_chunk = _DEQUANTIZED_CHUNK
                self.few_tokens = _FEW_TOKENS_DEQUANTIZED
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
        self._cos, self._sin = self.rotary_table()  # [L, D]
        # Compiled decode steps (FastRunner.pure_step) by rows, installed by compiled.py;
        # a step with no compiled one for its rows runs eagerly.
        self.compiled_steps: dict[int, StepFn] = {}
        self.compiled_calls = 0  # forwards that went through one
        self._ids: list[int] = []  # prompt tokens in row 0 of the cache

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

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids.to(self.device), self._embed_weight).float()

    def _project(
        self, block: Block, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """h [B, T, H] -> rotated q [B, heads, T, D], k and v [B, kv_heads, T, D]."""
        b, t, _ = h.shape
        d, heads, kv_heads = self.head_dim, self.heads, self.kv_heads
        qkv = block.qkv(h).to(self.dtype)  # [B, T, (heads + 2 kv_heads) * D]
        q, k, v = qkv.split([heads * d, kv_heads * d, kv_heads * d], dim=-1)
        q = q.view(b, t, heads, d).transpose(1, 2)
        k = k.view(b, t, kv_heads, d).transpose(1, 2)
        v = v.view(b, t, kv_heads, d).transpose(1, 2)
        q = rotate(q.float(), cos, sin).to(self.dtype)
        k = rotate(k.float(), cos, sin).to(self.dtype)
        return q, k, v

    def _layers(
        self, weights: Weights, x: torch.Tensor, attend: Attend, every: bool = False
    ) -> torch.Tensor:
        """x [B, T, H] through every block -> fp32 logits [B, V] of the last position
        (every: [B, T, V] of every position).

        attend(i, block, h) is layer i's attention output [B, T, H] for its input h.
        """
        x = x.float()  # the residual stream stays fp32
        for i, block in enumerate(weights.blocks):
            x = x + attend(i, block, rms_norm(x, block.attn_norm, self.eps))
            gate, up = block.gate_up(rms_norm(x, block.mlp_norm, self.eps)).chunk(2, dim=-1)
            x = x + block.down(F.silu(gate) * up)
        if every:
            b, t, h = x.shape
            rows = rms_norm(x.reshape(b * t, h), weights.norm, self.eps)  # [B * T, H]
            return self.decode_weights.lm_head(rows).float().reshape(b, t, -1)
        last = rms_norm(x[:, -1], weights.norm, self.eps)  # [B, H]
        # The head reads one row per sequence: the decode head, whichever weights ran the layers.
        return self.decode_weights.lm_head(last).float()

    def _attend(
        self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, **sdpa: Any
    ) -> torch.Tensor:
        """q [B, heads, T, D] over keys, values [B, kv_heads, L, D] -> [B, T, heads * D].

        sdpa: scaled_dot_product_attention's mask (``is_causal`` or ``attn_mask``), and its
        ``scale`` where it is not 1/sqrt(D).
        """
        b, heads, t, d = q.shape
        out = F.scaled_dot_product_attention(
            q, keys, values, enable_gqa=self.kv_heads != heads, **sdpa
        )  # [B, heads, T, D]
        return out.transpose(1, 2).reshape(b, t, heads * d)

    def forward_weights(self, tokens: int) -> Weights:
        """The weights an eager forward of ``tokens`` new positions runs on: the decode ones
        up to ``few_tokens``, the prefill ones beyond."""
        return self.decode_weights if tokens <= self.few_tokens else self.prefill_weights

    def _forward(self, x: torch.Tensor, start: int, every: bool = False) -> torch.Tensor:
        """x [B, T, H] at positions start..start+T-1 -> fp32 logits [B, V] of the last one
        ([B, T, V] of every one with ``every``).

        The eager path: attention reads only the filled part of the cache.
        """
        b, t, _ = x.shape
        end = start + t
        cos, sin = self._cos[start:end], self._sin[start:end]  # [T, D]
        mask: dict[str, Any] = {"is_causal": t > 1}
        if t > 1 and start > 0:  # the new tokens see the whole cache and each other causally
            queries = torch.arange(start, end, device=self.device)[:, None]  # [T, 1]
            allowed = torch.arange(end, device=self.device)[None, :] <= queries  # [T, L]
            mask = {"attn_mask": allowed}

        def attend(i: int, block: Block, h: torch.Tensor) -> torch.Tensor:
            q, k, v = self._project(block, h, cos, sin)
            self.cache.write(start, k, v, layer=i)
            keys, values = self.cache.read(i, end)  # [B, kv, L, D]
            return block.out(self._attend(q, keys, values, **mask))

        return check_finite(self._layers(self.forward_weights(t), x, attend, every))

    def pure_step(
        self,
        x: torch.Tensor,
        position: torch.Tensor,
        keys: list[torch.Tensor],
        values: list[torch.Tensor],
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A decode step (or a prefill of a few tokens) as a pure function, for torch.export
        and AOTInductor (compiled.py).

        x [B, T, H] at positions ``position`` [1] onwards; keys, values: each layer's whole
        cache [B, kv_heads, C, D], of which the positions before ``position`` are read (a
        mask, so C can be any capacity). It writes nothing: it returns fp32 logits [B, V] of
        the last position (not checked for finiteness) and the new positions' keys and
        values [layers, B, kv_heads, T, D], for the caller to store.
        """
        t = x.shape[1]
        new = position + torch.arange(t, device=x.device)  # [T]
        cos, sin = self._cos[new], self._sin[new]  # [T, D]
        hidden = torch.arange(keys[0].shape[2], device=x.device) >= position  # [C] unwritten
        later = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)  # [T, T] causal
        scale = self.head_dim**-0.5
        new_keys: list[torch.Tensor] = []
        new_values: list[torch.Tensor] = []

        def attend(i: int, block: Block, h: torch.Tensor) -> torch.Tensor:
            q, k, v = self._project(block, h, cos, sin)  # q [B, heads, T, D]; k, v [B, kv, T, D]
            new_keys.append(k)
            new_values.append(v)
            out = split_attention(q, keys[i], values[i], k, v, hidden, later, scale)
            return block.out(out)

        logits = self._layers(self.decode_weights, x, attend)
        return logits, torch.stack(new_keys), torch.stack(new_values)

    def _compiled_forward(self, step: StepFn, x: torch.Tensor) -> torch.Tensor:
        """x [B, T, H] at the next positions through a compiled step; stores the new K, V."""
        n = self.cache.length
        position = torch.tensor([n], device=self.device)
        keys, values = self.cache.views()
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
        if compiled is not None and len(ids) <= _FEW_TOKENS:  # typing: a few new tokens
            logits = self._compiled_forward(compiled, self.embed(tokens))
            cache.length += len(ids)
        else:
            for offset in range(0, len(ids), self.prefill_chunk):
                chunk = tokens[:, offset : offset + self.prefill_chunk]  # [1, T']
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


def default_precision(device: torch.device) -> str:
    """int4 on a CPU (fastest, and on the default model the most faithful after fp32: its
    layers were 4-bit in the GGUF it ships as); bf16 on a GPU, where the int kernels here
    do not run."""
    return "int4" if device.type == "cpu" else "bf16"


def make_runner(
    model: Any,
    kind: str = "auto",
    precision: str = "auto",
    checkpoint: Checkpoint | None = None,
    prefill_copy: bool = False,
) -> ModelRunner:
    """The runner for ``model``: "hf" (any causal LM), "fast" (Llama family, Gemma 3) or "auto".

    auto takes the fast runner when it supports the model and the transformers one otherwise.
    precision: fp32 | bf16 | int8 | int4, or auto (see default_precision).
    checkpoint: ``model`` is a skeleton whose weights this reads (the fast runner only).
    prefill_copy: see FastRunner.
    """
    if kind not in RUNNERS:
        raise EngineError(f"unknown runner {kind!r}: use {', '.join(RUNNERS)}")
    runner_class = fast_runner_class(model)
    if kind == "auto":
        reason = runner_class.unsupported(model)
        if reason is not None:
            log.info("using the transformers runner: %s", reason)
            kind = "hf"
    if kind == "hf":
        if checkpoint is not None:
            raise EngineError("the transformers runner needs the model with its weights")
        return HFRunner(model)
    device = checkpoint.device if checkpoint else next(model.parameters()).device
    chosen = default_precision(device) if precision == "auto" else precision
    return runner_class(model, chosen, checkpoint=checkpoint, prefill_copy=prefill_copy)


def fast_runner_class(model: Any) -> type[FastRunner]:
    """The fast runner for ``model``'s architecture: Gemma 3's (fast_gemma.py) or the Llama
    family's."""
    from lsp_server.engine.fast_gemma import GEMMA_MODEL_TYPES, GemmaRunner

    if getattr(model.config, "model_type", None) in GEMMA_MODEL_TYPES:
        return GemmaRunner
    return FastRunner
