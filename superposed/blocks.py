"""The decoder layers of the architectures the fast runner implements, one ``Block`` class each.

A block holds one layer's weights (fused q/k/v and gate/up projections, in the decode
precision: quant.Linear) and knows what its architecture does around the attention: how it
projects a layer's input to queries, keys and values (``project``), and the residual path
through its norms and MLP (``forward``). The attention itself, and the layer loop, are the
runner's and shared by all (fast_runner.FastRunner, attention.py):

- ``Block``: the Llama family (Llama, SmolLM2, Mistral, Qwen2).
- ``GemmaBlock``: Gemma 3, whose differences are all in the block: four "sandwich" norms,
  per-head query/key norms, a gelu (tanh) MLP, and on local layers a sliding ``window`` and
  their own rotary table (``kind``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from superposed.attention import rms_norm, rotate
from superposed.quant import Linear, quantize

# A model parameter -> its values in memory of the caller's own (a model.Checkpoint, or
# copy_parameter).
Fetch = Callable[[torch.Tensor], torch.Tensor]
# A layer's attention for its input: h [B, T, H] -> the attention's output [B, T, H].
Attention = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Dims:
    """The attention's shape and numerics, the same for every layer of a model."""

    heads: int
    kv_heads: int
    head_dim: int
    eps: float  # the RMSNorms'
    dtype: torch.dtype  # queries, keys and values (the KV cache's)


def copy_parameter(parameter: torch.Tensor) -> torch.Tensor:
    """A copy of a loaded parameter (the parameter itself may map the checkpoint file)."""
    return parameter.detach().clone()


def owned(weight: torch.Tensor) -> torch.Tensor:
    """An fp32 copy of ``weight`` in memory of its own (``.float()`` alone may be a view)."""
    return weight.detach().to(torch.float32, copy=True)


def fused(modules: list[Any], precision: str, fetch: Fetch) -> Linear:
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


def _split_heads(qkv: torch.Tensor, dims: Dims) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """[B, T, (heads + 2 kv_heads) * D] -> q [B, T, heads, D], k and v [B, T, kv_heads, D]."""
    b, t, _ = qkv.shape
    d, heads, kv_heads = dims.head_dim, dims.heads, dims.kv_heads
    q, k, v = qkv.split([heads * d, kv_heads * d, kv_heads * d], dim=-1)
    return q.view(b, t, heads, d), k.view(b, t, kv_heads, d), v.view(b, t, kv_heads, d)


@dataclass
class Block:
    """A Llama-family decoder layer: pre-norm attention and SiLU-gated MLP, each added to the
    residual stream."""

    attn_norm: torch.Tensor  # [H] fp32
    mlp_norm: torch.Tensor  # [H] fp32
    qkv: Linear  # H -> (heads + 2 * kv_heads) * head_dim
    out: Linear  # heads * head_dim -> H
    gate_up: Linear  # H -> 2 * I
    down: Linear  # I -> H
    window: int | None = None  # a query sees the last ``window`` positions; None: all

    @classmethod
    def from_layer(cls, layer: Any, precision: str, fetch: Fetch) -> Block:
        """A transformers Llama-family decoder layer's weights, fused, in ``precision``."""
        attn, mlp = layer.self_attn, layer.mlp
        return cls(
            attn_norm=owned(fetch(layer.input_layernorm.weight)),
            mlp_norm=owned(fetch(layer.post_attention_layernorm.weight)),
            qkv=fused([attn.q_proj, attn.k_proj, attn.v_proj], precision, fetch),
            out=fused([attn.o_proj], precision, fetch),
            gate_up=fused([mlp.gate_proj, mlp.up_proj], precision, fetch),
            down=fused([mlp.down_proj], precision, fetch),
        )

    def project(
        self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, dims: Dims
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """h [B, T, H] -> rotated q [B, heads, T, D], k and v [B, kv_heads, T, D] in
        dims.dtype; cos, sin [T, D], the rotary table at the new positions."""
        q, k, v = _split_heads(self.qkv(h).to(dims.dtype), dims)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q = rotate(q.float(), cos, sin).to(dims.dtype)
        k = rotate(k.float(), cos, sin).to(dims.dtype)
        return q, k, v

    def activate(self, gate: torch.Tensor) -> torch.Tensor:
        return F.silu(gate)

    def mlp(self, h: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(h).chunk(2, dim=-1)
        return self.down(self.activate(gate) * up)

    def forward(self, x: torch.Tensor, attention: Attention, eps: float) -> torch.Tensor:
        """The residual stream x [B, T, H] fp32 through this layer, ``attention`` being its
        attention (projection, cache, ``out``) for a normalised input."""
        x = x + attention(rms_norm(x, self.attn_norm, eps))
        return x + self.mlp(rms_norm(x, self.mlp_norm, eps))


def gemma_norm(weight: torch.Tensor) -> torch.Tensor:
    """Gemma's RMSNorm scales by (1 + weight): stored that way, rms_norm applies it as Llama's."""
    return owned(weight) + 1.0


@dataclass(kw_only=True)
class GemmaBlock(Block):
    """A Gemma 3 layer: a Llama block with norms after the attention and the MLP too, per-head
    query/key norms, a gelu (tanh) MLP; local layers (``kind`` 0) have a ``window`` and
    their own rotary base. Its norms are stored as 1 + weight (gemma_norm)."""

    post_attn_norm: torch.Tensor  # [H] fp32, on the attention's output
    post_mlp_norm: torch.Tensor  # [H] fp32, on the MLP's output
    q_norm: torch.Tensor  # [D] fp32, per query head
    k_norm: torch.Tensor  # [D] fp32, per key head
    kind: int  # 0: local (sliding window), 1: global; its rotary table's index

    @classmethod
    def from_gemma_layer(
        cls, layer: Any, precision: str, fetch: Fetch, kind: int, window: int | None
    ) -> GemmaBlock:
        """A transformers Gemma 3 decoder layer's weights, fused, in ``precision``."""

        def norm(module: Any) -> torch.Tensor:
            return gemma_norm(fetch(module.weight))

        attn, mlp = layer.self_attn, layer.mlp
        return cls(
            attn_norm=norm(layer.input_layernorm),
            mlp_norm=norm(layer.pre_feedforward_layernorm),
            qkv=fused([attn.q_proj, attn.k_proj, attn.v_proj], precision, fetch),
            out=fused([attn.o_proj], precision, fetch),
            gate_up=fused([mlp.gate_proj, mlp.up_proj], precision, fetch),
            down=fused([mlp.down_proj], precision, fetch),
            window=window,
            post_attn_norm=norm(layer.post_attention_layernorm),
            post_mlp_norm=norm(layer.post_feedforward_layernorm),
            q_norm=norm(attn.q_norm),
            k_norm=norm(attn.k_norm),
            kind=kind,
        )

    def project(
        self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, dims: Dims
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """As Block.project, the queries and keys normalised per head before the rotation;
        cos, sin [kinds, T, D], the tables of both layer kinds."""
        q, k, v = _split_heads(self.qkv(h).float(), dims)
        q = rms_norm(q, self.q_norm, dims.eps).transpose(1, 2)
        k = rms_norm(k, self.k_norm, dims.eps).transpose(1, 2)
        v = v.transpose(1, 2).to(dims.dtype)
        cos, sin = cos[self.kind], sin[self.kind]  # [T, D]
        return rotate(q, cos, sin).to(dims.dtype), rotate(k, cos, sin).to(dims.dtype), v

    def activate(self, gate: torch.Tensor) -> torch.Tensor:
        return F.gelu(gate, approximate="tanh")

    def forward(self, x: torch.Tensor, attention: Attention, eps: float) -> torch.Tensor:
        attended = attention(rms_norm(x, self.attn_norm, eps)).float()
        x = x + rms_norm(attended, self.post_attn_norm, eps)
        return x + rms_norm(
            self.mlp(rms_norm(x, self.mlp_norm, eps)).float(), self.post_mlp_norm, eps
        )
