"""The attention every fast runner block shares: RMSNorm, the rotary embedding, and the two
ways a step attends over the KV cache.

- eager (``sdpa``, ``eager_mask``): SDPA over the filled part of the cache, the new keys
  already written into it; what an uncompiled forward (prefill, score, step) runs.
- pure (``split_attention``, ``step_masks``): one softmax over the whole cache and the new
  keys, masking what a query must not see, without writing; what the compiled step traces
  (compiled.py), since torch.export needs a function of fixed shapes that writes nothing.

A sliding ``window`` (Gemma 3's local layers) is a mask here, not a second attention: a
query at position p sees the keys at p - window + 1 .. p; ``window`` None sees them all.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x [..., H] fp32 -> normalised and scaled, fp32."""
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding. x [B, heads, T, D]; cos, sin [T, D]."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def window_start(window: int | None, start: int) -> int:
    """The first cached position any query from ``start`` on sees."""
    return 0 if window is None else max(0, start - window + 1)


def eager_mask(window: int | None, start: int, end: int, device: torch.device) -> dict[str, Any]:
    """SDPA's mask for queries start..end-1 over the keys window_start(window, start)..end-1.

    One query sees every key it is given; from an empty cache without a window the mask is
    SDPA's own causal one, otherwise an explicit [T, L] one (True: may look).
    """
    t, first = end - start, window_start(window, start)
    if t == 1:
        return {}
    if start == 0 and window is None:
        return {"is_causal": True}
    queries = torch.arange(start, end, device=device)[:, None]  # [T, 1]
    keys = torch.arange(first, end, device=device)[None, :]  # [1, L]
    allowed = keys <= queries
    if window is not None:
        allowed = allowed & (keys > queries - window)
    return {"attn_mask": allowed}


def sdpa(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, **options: Any) -> torch.Tensor:
    """q [B, heads, T, D] over keys, values [B, kv_heads, L, D] -> [B, T, heads * D].

    options: scaled_dot_product_attention's mask (``is_causal`` or ``attn_mask``) and
    ``scale`` (None: 1/sqrt(D)).
    """
    b, heads, t, d = q.shape
    out = F.scaled_dot_product_attention(
        q, keys, values, enable_gqa=keys.shape[1] != heads, **options
    )  # [B, heads, T, D]
    return out.transpose(1, 2).reshape(b, t, heads * d)


def step_masks(
    window: int | None, position: torch.Tensor, tokens: int, capacity: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """split_attention's masks (True: must not look) for ``tokens`` queries from ``position``
    [1] on: over the cache [C] or [T, C] (the positions not yet written, and those older than
    the window) and over the new keys [T, T] (the later ones, and those older than the
    window)."""
    device = position.device
    cached = torch.arange(capacity, device=device)  # [C]
    hidden = cached >= position  # [C] unwritten
    later = torch.ones(tokens, tokens, dtype=torch.bool, device=device).triu(1)  # [T, T]
    if window is None:
        return hidden, later
    new = position + torch.arange(tokens, device=device)  # [T]
    too_old = cached[None, :] <= new[:, None] - window  # [T, C]
    steps = torch.arange(tokens, device=device)
    fresh_old = steps[None, :] <= steps[:, None] - window  # [T, T]
    return hidden | too_old, later | fresh_old


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
    (tests/test_runner_parts.py).
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
