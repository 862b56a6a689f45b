"""Warming the KV cache between requests, so that the first request in a file comes fast.

The engine's KV cache reuses the longest common prefix of token ids. A request whose prompt
the cache lacks (a file just opened or switched to) would prefill the whole window (1024
tokens, over a second on one CPU thread) on the request path. Instead (``firstPromptTokens``):

- such a request answers from a short recent window (prompt_plan.PromptPlan.choose), which shares
  no prefix with the full window, and the server then queues a warm-up at its cursor;
- didOpen (at the end of the document) and didChange (after the edit) queue a warm-up too.

A warm-up waits for a pause (``WARM_IDLE_S`` without a request), then prefills the
full-window prompt that a request at that position would decode from
(prompt_plan.PromptPlan.prompt), on the engine thread, ``WARM_CHUNK`` tokens at a time. Any
request that needs the engine sets the warm-up's cancel event: it waits at most one chunk,
and what was prefilled so far stays in the cache (a later request or warm-up resumes from
that prefix). The next request near that position then prefills only the few new tokens.

``Warmer`` queues them (the scheduler runs them); ``prefill_missing`` is the prefill.
"""

from __future__ import annotations

import threading
from collections import Counter
from functools import partial
from typing import TYPE_CHECKING

import torch

from lsp_server.completion.plain import plain_request
from lsp_server.completion.prompt_plan import PromptPlan
from lsp_server.completion.request import Request
from lsp_server.runtime.scheduler import Scheduler
from lsp_server.session import ready
from superposed.runner import ModelRunner, reusable_prefix
from superposed.types import CancelCheck

if TYPE_CHECKING:
    from lsp_server.session import Place, SessionSlot

# Seconds of quiet (no request) a warm-up waits for before it touches the cache. A warm-up
# rewinds the cache to the full window's prefix, which drops the short window the requests
# of a typing user reuse: started at once, every keystroke's request paid a short-window
# prefill again (bench/lsp_latency's typing case: p50 prefill 178 ms instead of ~30).
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


class Warmer:
    """Warm-ups of the KV cache, queued on the scheduler's engine thread."""

    def __init__(
        self,
        scheduler: Scheduler,
        counters: Counter[str],
        slot: SessionSlot,
    ) -> None:
        self._scheduler = scheduler
        self._counters = counters
        self._slot = slot  # the server's session as it is when a warm-up runs
        # where to warm once a session is in (set and taken by the server)
        self.waiting: Place | None = None

    def warm(self, request: Request, resting: bool = False) -> None:
        """Queue a warm-up for ``request``.

        It runs on the engine thread after what is queued there; a newer warm-up or any
        request that needs the engine cancels it between chunks. ``resting``: the cursor
        rests there (superposed/cursorRest), so no pause is waited for, and what is warmed
        is the prompt a request there would decode from now: the short window when the
        cache lacks more than ``firstPromptTokens`` of the full one (the full window would
        take over a second, and a request coming sooner could use none of it).
        Queued with a session in (the server keeps the place until one is in); one that
        finds none when it runs is cancelled.
        """
        if not request.settings.decoding.first_prompt_tokens:
            return
        self._scheduler.warm(partial(self._warm_up, request, resting))

    def _warm_up(self, request: Request, resting: bool, event: threading.Event) -> None:
        """On the engine thread, after a pause: prefill the request's prompt chunk by chunk,
        with the session in now (none: a reload emptied the slot; cancelled)."""
        session = ready(self._slot.state)
        if event.wait(0 if resting else WARM_IDLE_S) or session is None:
            self._counters["warmups_cancelled"] += 1  # a request came, or no session is in
            return
        engine, decoding = session.engine, request.settings.decoding
        request = plain_request(request)[0]  # the prompt as the request's own (plain.py)
        max_prompt = decoding.max_prompt_tokens or None
        plan = PromptPlan.of(engine, request.context, decoding)
        if resting:  # what a request would use now: the short window on a cold cache
            prompt, _ = plan.choose(max_prompt, decoding.max_new_tokens)
        else:
            prompt = plan.prompt(max_prompt)
        done = prefill_missing(engine.runner, prompt.ids, self._scheduler.cancel_check(event))
        if done is None:
            self._counters["warmups_cancelled"] += 1
        else:
            self._counters["warmups_done"] += 1
            self._counters["warmup_tokens"] += done
