"""The fast runner for Gemma 3 (text): FastRunner's forward, cache and precisions with Gemma's
block (blocks.GemmaBlock) and tables.

What differs from Llama (transformers' modeling_gemma3.py is the reference, and
tests/test_fast_gemma.py checks the logits against it call for call):

- the embeddings are scaled by sqrt(hidden size), so ``embed`` returns them scaled: the
  superposed decoder mixes exactly what the first block receives;
- every RMSNorm multiplies by (1 + weight), and each block has four: before and after the
  attention, before and after the MLP (the "sandwich"); queries and keys are RMS-normalised
  per head before the rotary embedding; the MLP's activation is gelu (tanh): GemmaBlock;
- local layers attend to the last ``sliding_window`` positions only (the block's window, a
  mask in the shared attention), with their own rotary base (a second rotary table); the
  global ones (every sixth in Gemma 3 270M) see the whole context;
- the attention scale is query_pre_attn_scalar ** -0.5;
- the 262k-token output head is the embedding (tied): int4 with the best logits refined.

The KV cache keeps every position for every layer (a local layer masks the old ones out):
one layout for both kinds keeps FastRunner's KVCache as it is.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from superposed.blocks import Block, Fetch, GemmaBlock, gemma_norm
from superposed.fast_runner import FastRunner
from superposed.model import Checkpoint
from superposed.prefill import Weights
from superposed.quant import Linear

GEMMA_MODEL_TYPES = ("gemma3_text",)
_GELU = ("gelu_pytorch_tanh", "gelu_tanh")
_LAYER_KINDS = ("sliding_attention", "full_attention")  # index 0: local, 1: global
# The rotary tables hold this many positions at most (4 tables of [L, 256] fp32: 32 MB here,
# 128 MB for the model's 32k context, which a CPU would take minutes to prefill anyway).
MAX_POSITIONS = 8192


class GemmaRunner(FastRunner):
    """The ModelRunner for Gemma 3 text models: FastRunner with Gemma's block and tables."""

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
        self.scale = float(config.query_pre_attn_scalar) ** -0.5
        self.embed_scale = float(model.model.embed_tokens.embed_scale)

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
        window = int(config.sliding_window)
        blocks: list[Block] = []
        for layer, layer_kind in zip(model.model.layers, config.layer_types, strict=True):
            kind = _LAYER_KINDS.index(layer_kind)
            local = window if kind == 0 else None
            blocks.append(GemmaBlock.from_gemma_layer(layer, precision, fetch, kind, local))
        # The head only ever runs through the decode weights (one row per sequence): the
        # prefill copy gets the same head (a second 262k x 640 one would be 335 MB).
        return Weights(blocks, gemma_norm(fetch(model.model.norm.weight)), head)

    def rotary_table(self) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [2, L, D] fp32: index 0 for the local layers, 1 for the global ones."""
        length = min(self.max_context, MAX_POSITIONS)
        positions = torch.arange(length, device=self.device)[None]  # [1, L]
        probe = torch.empty(0, dtype=torch.float32, device=self.device)
        tables = [self._rotary(probe, positions, layer_kind) for layer_kind in _LAYER_KINDS]
        cos = torch.stack([c[0].float() for c, _ in tables])  # [2, L, D]
        sin = torch.stack([s[0].float() for _, s in tables])
        return cos, sin

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """ids [B, T] -> the scaled embeddings [B, T, H] the first block receives."""
        return F.embedding(ids.to(self.device), self._embed_weight).float() * self.embed_scale
