"""The fast runner for Gemma 3 (text): the Llama-family runner's cache and kernels, Gemma's block.

What differs from Llama (transformers' modeling_gemma3.py is the reference, and
tests/test_fast_gemma.py checks the logits against it call for call):

- the embeddings are scaled by sqrt(hidden size), so ``embed`` returns them scaled: the
  superposed decoder mixes exactly what the first block receives;
- every RMSNorm multiplies by (1 + weight), and each block has four: before and after the
  attention, before and after the MLP (the "sandwich");
- queries and keys are RMS-normalised per head before the rotary embedding;
- local layers attend to the last ``sliding_window`` positions only, with their own rotary
  base; the global ones (every sixth in Gemma 3 270M) see the whole context;
- the attention scale is query_pre_attn_scalar ** -0.5, the MLP's activation gelu (tanh);
- the 262k-token output head is the embedding (tied): int4 with the best logits refined.

The KV cache keeps every position for every layer (a local layer masks the old ones out):
one layout for both kinds keeps FastRunner's KVCache (reserve, write, gather, rewind) as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from lsp_server.engine.fast_runner import (
    Block,
    FastRunner,
    Fetch,
    Weights,
    _linear,
    _owned,
    rms_norm,
    rotate,
    split_attention,
)
from lsp_server.engine.model import Checkpoint
from lsp_server.engine.quant import Linear
from lsp_server.engine.runner import check_finite

GEMMA_MODEL_TYPES = ("gemma3_text",)
_GELU = ("gelu_pytorch_tanh", "gelu_tanh")
_LAYER_KINDS = ("sliding_attention", "full_attention")  # index 0: local, 1: global
# The rotary tables hold this many positions at most (4 tables of [L, 256] fp32: 32 MB here,
# 128 MB for the model's 32k context, which a CPU would take minutes to prefill anyway).
MAX_POSITIONS = 8192


@dataclass
class GemmaBlock(Block):
    """A Gemma 3 layer: a Llama block with its extra norms (each stored as 1 + weight)."""

    post_attn_norm: torch.Tensor  # [H] fp32, on the attention's output
    post_mlp_norm: torch.Tensor  # [H] fp32, on the MLP's output
    q_norm: torch.Tensor  # [D] fp32, per query head
    k_norm: torch.Tensor  # [D] fp32, per key head
    kind: int  # 0: local (sliding window), 1: global


def _norm_weight(weight: torch.Tensor) -> torch.Tensor:
    """Gemma's RMSNorm scales by (1 + weight): stored that way, rms_norm applies it as Llama's."""
    return _owned(weight) + 1.0


class GemmaRunner(FastRunner):
    """The ModelRunner for Gemma 3 text models: FastRunner's cache and precisions, Gemma's block."""

    def __init__(
        self,
        model: Any,
        precision: str = "bf16",
        static_cache: bool | None = None,
        checkpoint: Checkpoint | None = None,
        prefill_copy: bool = False,
    ) -> None:
        super().__init__(model, precision, static_cache, checkpoint, prefill_copy)
        config = model.config
        self.max_context = min(self.max_context, MAX_POSITIONS)
        self.window = int(config.sliding_window)
        self.scale = float(config.query_pre_attn_scalar) ** -0.5
        self.embed_scale = float(model.model.embed_tokens.embed_scale)

    # --- FastRunner's hooks ------------------------------------------------------------------

    @staticmethod
    def unsupported(model: Any) -> str | None:
        config = model.config
        kind = getattr(config, "model_type", None)
        if kind not in GEMMA_MODEL_TYPES:
            return f"model type {kind!r} is not one of {', '.join(GEMMA_MODEL_TYPES)}"
        if getattr(config, "hidden_activation", None) not in _GELU:
            return f"activation {config.hidden_activation!r} is not gelu (tanh)"
        for name in ("final_logit_softcapping", "attn_logit_softcapping"):
            if getattr(config, name, None) is not None:
                return f"{name} is not implemented"
        if getattr(config, "use_bidirectional_attention", False):
            return "bidirectional attention is not implemented"
        if getattr(config, "attention_bias", False):
            return "attention biases are not implemented"
        rope = getattr(config, "rope_parameters", None) or {}
        for layer_kind in _LAYER_KINDS:
            rope_type = (rope.get(layer_kind) or {}).get("rope_type", "default")
            if rope_type != "default":
                return f"rope type {rope_type!r} ({layer_kind}) is not implemented"
        unknown = set(config.layer_types) - set(_LAYER_KINDS)
        if unknown:
            return f"layer types {sorted(unknown)} are not implemented"
        return None

    def build_weights(self, model: Any, precision: str, head: Linear, fetch: Fetch) -> Weights:
        config = model.config

        def norm(module: Any) -> torch.Tensor:
            return _norm_weight(fetch(module.weight))

        blocks: list[Block] = []
        for layer, layer_kind in zip(model.model.layers, config.layer_types, strict=True):
            attn, mlp = layer.self_attn, layer.mlp
            blocks.append(
                GemmaBlock(
                    attn_norm=norm(layer.input_layernorm),
                    mlp_norm=norm(layer.pre_feedforward_layernorm),
                    qkv=_linear([attn.q_proj, attn.k_proj, attn.v_proj], precision, fetch),
                    out=_linear([attn.o_proj], precision, fetch),
                    gate_up=_linear([mlp.gate_proj, mlp.up_proj], precision, fetch),
                    down=_linear([mlp.down_proj], precision, fetch),
                    post_attn_norm=norm(layer.post_attention_layernorm),
                    post_mlp_norm=norm(layer.post_feedforward_layernorm),
                    q_norm=norm(attn.q_norm),
                    k_norm=norm(attn.k_norm),
                    kind=_LAYER_KINDS.index(layer_kind),
                )
            )
        # The head only ever runs through the decode weights (one row per sequence): FastRunner
        # passes the bf16 prefill copy the same head (a second 262k x 640 one would be 335 MB).
        return Weights(blocks, norm(model.model.norm), head)

    def rotary_table(self) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [2, L, D] fp32: index 0 for the local layers, 1 for the global ones."""
        length = min(self.max_context, MAX_POSITIONS)
        positions = torch.arange(length, device=self.device)[None]  # [1, L]
        probe = torch.empty(0, dtype=torch.float32, device=self.device)
        tables = [self._rotary(probe, positions, layer_kind) for layer_kind in _LAYER_KINDS]
        cos = torch.stack([c[0].float() for c, _ in tables])  # [2, L, D]
        sin = torch.stack([s[0].float() for _, s in tables])
        return cos, sin

    # --- the forward ----------------------------------------------------------------------

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """ids [B, T] -> the scaled embeddings [B, T, H] the first block receives."""
        return F.embedding(ids.to(self.device), self._embed_weight).float() * self.embed_scale

    def _project_gemma(
        self, block: GemmaBlock, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """h [B, T, H] -> normalised, rotated q [B, heads, T, D], k and v [B, kv_heads, T, D];
        cos, sin [2, T, D] (both layer kinds)."""
        b, t, _ = h.shape
        d, heads, kv_heads = self.head_dim, self.heads, self.kv_heads
        qkv = block.qkv(h).float()  # [B, T, (heads + 2 kv_heads) * D]
        q, k, v = qkv.split([heads * d, kv_heads * d, kv_heads * d], dim=-1)
        q = rms_norm(q.view(b, t, heads, d), block.q_norm, self.eps).transpose(1, 2)
        k = rms_norm(k.view(b, t, kv_heads, d), block.k_norm, self.eps).transpose(1, 2)
        v = v.view(b, t, kv_heads, d).transpose(1, 2).to(self.dtype)
        cos, sin = cos[block.kind], sin[block.kind]  # [T, D]
        return rotate(q, cos, sin).to(self.dtype), rotate(k, cos, sin).to(self.dtype), v

    def _gemma_layers(self, weights: Weights, x: torch.Tensor, attend: Any, every: bool) -> Any:
        """x [B, T, H] through every block -> fp32 logits [B, V] of the last position
        (every: [B, T, V]); attend(i, block, h) -> layer i's attention output [B, T, H]."""
        x = x.float()  # the residual stream stays fp32
        for i, block in enumerate(weights.blocks):
            assert isinstance(block, GemmaBlock)
            attended = attend(i, block, rms_norm(x, block.attn_norm, self.eps)).float()
            x = x + rms_norm(attended, block.post_attn_norm, self.eps)
            gate, up = block.gate_up(rms_norm(x, block.mlp_norm, self.eps)).chunk(2, dim=-1)
            out = block.down(F.gelu(gate, approximate="tanh") * up).float()
            x = x + rms_norm(out, block.post_mlp_norm, self.eps)
        if every:
            b, t, h = x.shape
            rows = rms_norm(x.reshape(b * t, h), weights.norm, self.eps)  # [B * T, H]
            return self.decode_weights.lm_head(rows).float().reshape(b, t, -1)
        last = rms_norm(x[:, -1], weights.norm, self.eps)  # [B, H]
        return self.decode_weights.lm_head(last).float()

    def _window_start(self, kind: int, start: int) -> int:
        """The first cached position any query from ``start`` on sees in a layer of ``kind``."""
        return max(0, start - self.window + 1) if kind == 0 else 0

    def _mask(self, kind: int, start: int, end: int) -> dict[str, Any]:
        """SDPA's mask for queries start..end-1 over keys _window_start(kind, start)..end-1."""
        t, first = end - start, self._window_start(kind, start)
        if t == 1:  # one query: every key from the window's start on is visible
            return {}
        queries = torch.arange(start, end, device=self.device)[:, None]  # [T, 1]
        keys = torch.arange(first, end, device=self.device)[None, :]  # [1, L]
        allowed = keys <= queries
        if kind == 0:
            allowed = allowed & (keys > queries - self.window)
        return {"attn_mask": allowed}

    def _forward(self, x: torch.Tensor, start: int, every: bool = False) -> torch.Tensor:
        """x [B, T, H] at positions start..start+T-1 -> fp32 logits [B, V] of the last one
        ([B, T, V] of every one with ``every``); the eager path."""
        t = x.shape[1]
        end = start + t
        cos, sin = self._cos[:, start:end], self._sin[:, start:end]  # [2, T, D]
        masks = [self._mask(kind, start, end) for kind in range(len(_LAYER_KINDS))]

        def attend(i: int, block: GemmaBlock, h: torch.Tensor) -> torch.Tensor:
            q, k, v = self._project_gemma(block, h, cos, sin)
            self.cache.write(start, k, v, layer=i)
            keys, values = self.cache.read(i, end, first=self._window_start(block.kind, start))
            return block.out(self._attend(q, keys, values, scale=self.scale, **masks[block.kind]))

        return check_finite(self._gemma_layers(self.forward_weights(t), x, attend, every))

    def pure_step(
        self,
        x: torch.Tensor,
        position: torch.Tensor,
        keys: list[torch.Tensor],
        values: list[torch.Tensor],
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """FastRunner.pure_step with Gemma's block and the local layers' window."""
        b, t, _ = x.shape
        new = position + torch.arange(t, device=x.device)  # [T]
        cos, sin = self._cos[:, new], self._sin[:, new]  # [2, T, D]
        cached = torch.arange(keys[0].shape[2], device=x.device)  # [C]
        hidden = (cached >= position)[None, :]  # [1, C] unwritten
        too_old = cached[None, :] <= new[:, None] - self.window  # [T, C] outside a local window
        steps = torch.arange(t, device=x.device)
        later = steps[None, :] > steps[:, None]  # [T, T] causal
        fresh_old = steps[None, :] <= steps[:, None] - self.window  # [T, T]
        new_keys: list[torch.Tensor] = []
        new_values: list[torch.Tensor] = []

        def attend(i: int, block: GemmaBlock, h: torch.Tensor) -> torch.Tensor:
            q, k, v = self._project_gemma(block, h, cos, sin)  # q [B, heads, T, D]
            new_keys.append(k)
            new_values.append(v)
            old_mask = hidden | too_old if block.kind == 0 else hidden  # [T or 1, C]
            new_mask = later | fresh_old if block.kind == 0 else later  # [T, T]
            out = split_attention(q, keys[i], values[i], k, v, old_mask, new_mask, self.scale)
            return block.out(out)

        logits = self._gemma_layers(self.decode_weights, x, attend, every=False)
        return logits, torch.stack(new_keys), torch.stack(new_values)
