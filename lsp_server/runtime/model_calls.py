"""The server's model calls: a request's ``answer`` queued on the engine thread.

``ModelCalls.request`` is the one place that says a request came before a model was in
(counted ``not_ready``); a ready session's request becomes a job for the scheduler
(scheduler.py: one engine thread, in request order, the newest request per document), which
runs ``answer.answer`` with the session in when it runs: a job queued before a reload emptied
the slot is cancelled then. The memory starts indexing the open documents when the job is
made, while the request waits its turn.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial

from lsp_server.completion.answer import answer, start_memory
from lsp_server.completion.decode import Answer
from lsp_server.completion.request import Request
from lsp_server.runtime.notifier import Notifier
from lsp_server.runtime.scheduler import Scheduler
from lsp_server.session import Session, SessionSlot
from lsp_server.stores.match_sources import PendingSource
from superposed.types import Cancelled, EngineError

Job = Callable[[threading.Event], Answer | None]  # job(cancel) on the engine thread


class ModelCalls:
    """Requests' model calls on the engine thread, with the session in when they run."""

    def __init__(
        self,
        slot: SessionSlot,
        scheduler: Scheduler,
        notifier: Notifier,
        counters: Counter[str],
    ) -> None:
        self.last_timing_ms: dict[str, float] = {}  # the last model call's, by phase
        self._slot = slot
        self._scheduler = scheduler
        self._notifier = notifier
        self._counters = counters

    def ready(self) -> Session | None:
        """The session in now; None (the model loads, or did not load) otherwise."""
        session = self._slot.state
        return session if isinstance(session, Session) else None

    async def request(self, request: Request) -> Answer | None:
        """The request's answer (Scheduler.request): None if superseded, or if no model is
        in yet (counted ``not_ready``: it answers nothing). An answer cut at its deadline
        comes with the job that decodes it whole (``Answer.rest``)."""
        session = self.ready()
        if session is None:
            self._counters["not_ready"] += 1
            return None
        debounce_s = request.settings.decoding.debounce_ms / 1000
        pending = self._memory(session, request)
        job = partial(self._run, replace(request, due=True), pending)  # in answerWithinMs
        where = place(request, request.context.automatic)
        answer = await self._scheduler.request(request.key, job, debounce_s, where)
        if answer is not None and answer.cut:  # the same memory: the documents indexed once
            answer = replace(answer, rest=partial(self._run, request, pending))
        return answer

    def join(self, request: Request) -> Awaitable[Answer | None] | None:
        """The answer of the request in flight for ``request``'s document, when it answers
        this one too (Scheduler.join): at the same place with the same settings, and asked
        for, or both automatic (an automatic request may be answered with nothing where an
        asked-for one drafts). None: ``request`` needs its own call."""
        places = [place(request, automatic=False)]
        if request.context.automatic:
            places.append(place(request, automatic=True))
        return self._scheduler.join(request.key, places)

    def job(self, session: Session, request: Request) -> Job:
        """The model call for ``request``, made now: ``job(cancel)`` on the engine thread. The
        memory (when on) starts indexing the open documents at once."""
        return partial(self._run, request, self._memory(session, request))

    def _memory(self, session: Session, request: Request) -> PendingSource | None:
        return start_memory(session, request) if request.settings.decoding.memory else None

    def _run(
        self, request: Request, pending: PendingSource | None, cancel: threading.Event
    ) -> Answer | None:
        """On the engine thread: the answer with the session in now, or None if cancelled
        (or queued before a reload emptied the slot: no session is in)."""
        session = self.ready()
        if cancel.is_set() or session is None:
            self._counters["cancelled"] += 1
            return None
        self._counters["model_calls"] += 1
        try:
            drafts = answer(
                session,
                request,
                self._scheduler.cancel_check(cancel),
                report=self._notifier.once,
                pending=pending,
            )
        except Cancelled:
            self._counters["cancelled"] += 1
            return None
        except EngineError as err:  # e.g. a method the model cannot run: say so, answer nothing
            self._notifier.error(str(err))
            return None
        self.last_timing_ms = drafts.timing_ms
        return drafts


def place(request: Request, automatic: bool) -> object:
    """What a request's answer depends on, for ``ModelCalls.join``: its text around the
    cursor, whether it is ``automatic``, its settings."""
    return (replace(request.context, automatic=automatic), request.settings)
