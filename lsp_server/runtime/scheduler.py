"""Where the server's work runs, and which of it still matters.

- One engine thread: model loads, decodes and KV-cache warm-ups run there in order (the
  engine holds one KV cache and is not thread-safe).
- One store thread: index runs (saves and the other writes have their own queue,
  writes.WriteQueue).
- Supersession: a request for a document cancels the older one for the same document (and
  ``$/cancelRequest`` or ``didClose`` cancel it too). A cancelled request's event is set;
  the engine checks it between decoding steps, and its answer is dropped, so a stale answer
  is never sent after a newer one. A newer request at the same place ``join``s the older
  one instead: both are answered from its one decode (an editor's Show Drafts and its
  inline request at one cursor: the first was answered empty).
- Warm-ups: at most one is queued or running; a newer warm-up or any request that needs the
  engine cancels it.
- Held requests: an inline request made while the model loads waits for the load to end
  (the newest per document), so that ghost text comes without another keystroke.

No pygls and no model here: the server (server.py) says what to run, this says where and
whether it still should.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Collection
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from superposed.types import CancelCheck

log = logging.getLogger(__name__)

T = TypeVar("T")


class Scheduler:
    """The engine and store threads, the requests in flight per document, the warm-up."""

    def __init__(self, counters: Counter[str] | None = None) -> None:
        self.counters: Counter[str] = Counter() if counters is None else counters
        # Runs at every cancellation check (None: nothing). Tests set it, through their own
        # entry point, to make the engine slow enough to be caught mid-request.
        self.step_hook: Callable[[], None] | None = None
        self._engine = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decode")
        self._store = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store")
        self._inflight: dict[str, _Flight] = {}  # document key -> its request in flight
        self._warming: threading.Event | None = None  # the queued or running warm-up's cancel

    # -- threads --------------------------------------------------------------------------

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run ``fn(*args)`` on the engine thread after what is queued there; a failure is
        logged."""
        future = self._engine.submit(fn, *args)
        future.add_done_callback(log_failure)
        return future

    async def on_store_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the store thread, awaited."""
        return await asyncio.get_running_loop().run_in_executor(self._store, fn, *args)

    # -- requests ---------------------------------------------------------------------------

    def supersede(self, key: str) -> None:
        """Cancel the request in flight for document ``key``, if any (a newer one came, or
        the document closed): everyone waiting for it gets None."""
        previous = self._inflight.pop(key, None)
        if previous is not None and not previous.cancel.is_set():
            previous.cancel.set()
            self.counters["superseded"] += 1

    def join(self, key: str, places: Collection[object]) -> Awaitable[Any] | None:
        """The answer of document ``key``'s request in flight, if it is at one of ``places``
        (what the newer request would be answered from): awaited, it is that request's
        result, None if it is superseded. None: no such request, the newer one goes on.

        The job runs on while anyone waits for it: a waiter cancelled (``$/cancelRequest``,
        which clients send for the older of two requests at one place) only stops waiting.
        """
        flight = self._inflight.get(key)
        if flight is None or flight.cancel.is_set() or flight.place is None:
            return None
        if flight.place not in places:
            return None
        self.counters["joined"] += 1
        return self._wait(flight)

    async def request(
        self,
        key: str,
        job: Callable[[threading.Event], T | None],
        debounce_s: float = 0.0,
        place: object = None,
    ) -> T | None:
        """``job(cancel)`` on the engine thread as document ``key``'s request in flight.

        After ``debounce_s`` seconds (if a newer request has not taken its place meanwhile);
        stops any warm-up first. None when it was superseded or cancelled, whatever ``job``
        returned. ``place``: where the request is (None: nowhere a newer one ``join``s).
        Called on the event loop.
        """
        self.stop_warming()  # the engine thread is this request's now
        flight = _Flight(place, asyncio.get_running_loop().create_future())
        self._inflight[key] = flight
        flight.task = asyncio.ensure_future(self._fly(key, flight, job, debounce_s))
        flight.task.add_done_callback(_settle)
        return await self._wait(flight)

    async def adopt(self, key: str, job: Future[T]) -> T | None:
        """Await ``job``, already queued on the engine thread, as document ``key``'s request
        in flight: None if a newer request supersedes it meanwhile (the job runs on; its
        answer is dropped here)."""
        flight = _Flight(None, asyncio.wrap_future(job))
        self._inflight[key] = flight
        try:
            result = await flight.outcome
        finally:
            if self._inflight.get(key) is flight:
                del self._inflight[key]
        return None if flight.cancel.is_set() else result

    async def _fly(
        self,
        key: str,
        flight: _Flight,
        job: Callable[[threading.Event], Any],
        debounce_s: float,
    ) -> None:
        """Run ``job`` for ``flight`` and settle its outcome (None if cancelled)."""
        try:
            if debounce_s:  # a newer request may come and take its place
                await asyncio.sleep(debounce_s)
                if flight.cancel.is_set():
                    self.counters["debounced"] += 1
                    flight.settle(None)
                    return
            loop = asyncio.get_running_loop()
            result = await loop.run_in_executor(self._engine, job, flight.cancel)
            flight.settle(None if flight.cancel.is_set() else result)
        except Exception as err:  # the job's failure is every waiter's
            flight.settle(err)
            raise
        finally:
            flight.settle(None)  # (the loop shut down: no one waits)
            if self._inflight.get(key) is flight:
                del self._inflight[key]

    @staticmethod
    async def _wait(flight: _Flight) -> Any:
        """``flight``'s outcome; a cancelled waiter stops waiting, and the job stops once no
        one waits for it."""
        flight.waiters += 1
        try:
            return await asyncio.shield(flight.outcome)
        except asyncio.CancelledError:  # $/cancelRequest: stop the decoding, unless joined
            flight.waiters -= 1
            if flight.waiters == 0:
                flight.cancel.set()
            raise

    def cancel_check(self, event: threading.Event) -> CancelCheck:
        """What the engine calls between steps: whether ``event`` is set (after the step hook)."""
        hook = self.step_hook
        if hook is None:
            return event.is_set

        def check() -> bool:
            hook()
            return event.is_set()

        return check

    # -- warm-ups ----------------------------------------------------------------------------

    def warm(self, job: Callable[[threading.Event], None]) -> None:
        """Queue ``job(cancel)`` on the engine thread as the one warm-up; it runs after what
        is queued there, and a newer warm-up or any request sets its cancel event."""
        self.stop_warming()
        event = threading.Event()
        self._warming = event
        self.submit(job, event)

    def stop_warming(self) -> None:
        if self._warming is not None:
            self._warming.set()
            self._warming = None


@dataclass
class _Flight:
    """A request in flight: where it is, its outcome, how many wait for it."""

    place: object  # where it is (compared by ==): None, nowhere joined
    outcome: asyncio.Future[Any]
    cancel: threading.Event = field(default_factory=threading.Event)
    waiters: int = 0
    task: asyncio.Future[None] | None = None  # what runs the job (held: the loop holds weakly)

    def settle(self, result: Any) -> None:
        """The outcome is ``result`` (an exception: raised to every waiter), if not settled."""
        if self.outcome.done():
            return
        if isinstance(result, Exception):
            self.outcome.set_exception(result)
        else:
            self.outcome.set_result(result)


def _settle(task: asyncio.Future[None]) -> None:
    """The flight's task is done: its failure, already every waiter's, is not logged again."""
    if not task.cancelled():
        task.exception()


class HeldRequests:
    """Inline requests made while the model loads, the newest per document, held until the
    load ends (issue 52: they were answered empty, and no ghost text came after "ready" until
    the user typed again).

    Called on the event loop only. A held request is let go with True once a model is in
    (it is answered then), with False when the load failed, a newer request for its document
    came, or the document changed, closed or its cursor moved (it is answered empty then).
    """

    def __init__(self, counters: Counter[str] | None = None) -> None:
        self.counters: Counter[str] = Counter() if counters is None else counters
        self._held: dict[str, tuple[asyncio.Future[bool], Any]] = {}  # key -> (its end, where)

    async def wait(self, key: str, where: Any = None) -> bool:
        """Hold document ``key``'s request at ``where`` (its cursor) until the load ends:
        whether it is to be answered (see the class)."""
        self.release(key)  # an older one for the document is answered empty
        future = asyncio.get_running_loop().create_future()
        self._held[key] = (future, where)
        self.counters["held_while_loading"] += 1
        try:
            return await future
        finally:
            if self._held.get(key, (None,))[0] is future:
                del self._held[key]

    def release(self, key: str, answer: bool = False) -> None:
        """Let document ``key``'s held request go: answered (True) or empty (False)."""
        future, _ = self._held.pop(key, (None, None))
        if future is not None and not future.done():
            future.set_result(answer)

    def moved(self, key: str, where: Any) -> None:
        """The cursor of document ``key`` rests at ``where``: a request held elsewhere goes."""
        if key in self._held and self._held[key][1] != where:
            self.release(key)

    def end(self, loaded: bool) -> None:
        """The load ended: every held request is answered (``loaded``) or answered empty."""
        for key in list(self._held):
            self.release(key, loaded)

    def __contains__(self, key: str) -> bool:
        return key in self._held


def log_failure(future: Future[Any]) -> None:
    """A background task's exception, logged (a done callback)."""
    if (err := future.exception()) is not None:
        log.error("background task failed", exc_info=err)
