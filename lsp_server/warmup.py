"""Warming the KV cache between requests, so that the first request in a file comes fast.

The engine's KV cache reuses the longest common prefix of token ids. A request whose prompt
the cache lacks (a file just opened or switched to) would prefill the whole window (1024
tokens, over a second on one CPU thread) on the request path. Instead (``firstPromptTokens``):

- such a request answers from a short recent window (completion.cold_cache), which shares
  no prefix with the full window, and the server then queues a warm-up at its cursor;
- didOpen (at the end of the document) and didChange (after the edit) queue a warm-up too.

A warm-up waits for a pause (``WARM_IDLE_S`` without a request), then prefills the
full-window prompt that a request at that position would decode from
(completion.request_prompt), on the engine thread, ``WARM_CHUNK`` tokens at a time. Any
request that needs the engine sets the warm-up's cancel event: it waits at most one chunk,
and what was prefilled so far stays in the cache (a later request or warm-up resumes from
that prefix). The next request near that position then prefills only the few new tokens.
"""

from __future__ import annotations

import torch

from superposed.runner import ModelRunner, reusable_prefix
from superposed.types import CancelCheck

# Seconds of quiet (no request) a warm-up waits for before it touches the cache. A warm-up
# rewinds the cache to the full window's prefix, which drops the short window the requests
# of a typing user reuse: started at once, every keystroke's request paid a short-window
# prefill again (bench/lsp_latency.py's typing case: p50 prefill 178 ms instead of ~30).
# After a pause this long the user has stopped typing for a moment, and the next request
# finds the full window.
WARM_IDLE_S = 0.5
# Tokens per warm-up prefill: a request waits for at most one such chunk. Without a prefill
# copy, chunks run on the int4 kernels at about the same cost per token whatever their size
# (bench/results/kernels.md: 128 tokens 199 ms), so a short one keeps that wait short.
WARM_CHUNK = 64


@torch.inference_mode()
def prefill_missing(
    runner: ModelRunner, ids: list[int], cancel: CancelCheck, chunk: int = WARM_CHUNK
) -> int | None:
    """Prefill what the cache lacks of ``ids``, a chunk at a time; the tokens prefilled.

    None when ``cancel`` said stop between chunks (the chunks done stay in the cache).
    """
    start = reusable_prefix(runner.cached_ids, ids)
    runner.rewind(start)
    for offset in range(start, len(ids), chunk):
        if cancel():
            return None
        runner.prefill(ids[offset : offset + chunk])
    return len(ids) - start
