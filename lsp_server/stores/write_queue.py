"""Store writes on one thread, in order, retried until they land (lsp_server/runtime/learning.py
queues saves, accepted drafts and forgetting here; lsp_server/stores/stores.py makes them)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from functools import partial
from typing import Any

from ngram_db.errors import NgramStoreError, StoreBusy, StoreClosed, StoreFull

log = logging.getLogger(__name__)

# Errors after which the same write succeeds later, the store untouched: another writer's
# lock, a full disk, a store closed under the call (the settings named another file, or its
# file was replaced on disk).
TRANSIENT = (StoreBusy, StoreFull, StoreClosed)


class WriteQueue:
    """Store writes on one thread, in order; a write that cannot be made now is retried, not
    lost.

    A write is keyed (a saved file's path, an accepted draft's name): a newer write under
    the same key replaces one still waiting (whose future is cancelled). A write that raises
    one of the TRANSIENT errors stays first in line and runs again: at once after its store
    was reopened, after ``retry_s`` after another process's lock, and after a full disk with a
    delay that doubles up to ``max_retry_s`` (the store recovers by itself once there is room).
    Its future ends only once it is written. Any other error ends its future (and is logged).
    """

    def __init__(self, retry_s: float = 1.0, max_retry_s: float = 30.0) -> None:
        self._retry_s = retry_s
        self._max_retry_s = max_retry_s
        self._full_s = retry_s  # the next wait after a full disk; back to retry_s on a write
        self.retries = 0  # writes run again, all causes (superposed.stats)
        self.done = 0  # writes that ran to their end (what a flush watches progress by)
        self.dropped: list[str] = []  # keys of the writes given up at shutdown (flush)
        self._items: OrderedDict[str, tuple[Callable[[], Any], Future[Any]]] = OrderedDict()
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="store-writer", daemon=True)
        self._thread.start()

    def submit(self, key: str, write: Callable[[], Any]) -> Future[Any]:
        """Queue ``write``; the future holds its result once it has run."""
        future: Future[Any] = Future()
        with self._cond:
            replaced = self._items.pop(key, None)
            self._items[key] = (write, future)
            self._cond.notify_all()
        if replaced is not None:
            replaced[1].cancel()
        return future

    def pending(self) -> int:
        with self._cond:
            return len(self._items)

    def drain(self, timeout: float) -> bool:
        """Wait until every queued write has run (or ``timeout`` s): True if none is left."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._items, timeout)

    def flush(self, stall_s: float, max_s: float) -> list[str]:
        """Shutdown: wait while the queued writes are being made; returns the keys of those
        given up (their futures cancelled, kept in ``dropped``), [] when all were written.

        It gives up once no write has ended for ``stall_s`` (another process holds the lock,
        the disk stays full) or after ``max_s`` in all: a queue that moves is waited for (a
        save after each of many files is not cut off at a fixed time), a stuck one is not.
        """
        deadline = time.monotonic() + max_s
        with self._cond:
            while self._items:
                wait = min(stall_s, deadline - time.monotonic())
                moved = self._cond.wait_for(partial(self._moved, self.done), wait)
                if not moved or time.monotonic() >= deadline:
                    break
            left = list(self._items.items())
            self._items.clear()
            self.dropped.extend(key for key, _ in left)
            self._cond.notify_all()
        for _, (_, future) in left:  # the one running, if any, may still land: then it counts
            future.cancel()
        return [key for key, _ in left]

    def _moved(self, seen: int) -> bool:
        """(Under _cond.) Whether the queue is empty, or a write ended since ``seen``."""
        return not self._items or self.done != seen

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._items:
                    self._cond.wait()
                key, item = next(iter(self._items.items()))
            write, future = item
            try:
                result = write()
            except TRANSIENT as err:
                self.retries += 1
                time.sleep(self._delay(err))
                log.warning("store write %s not made, retrying: %s", key, err)
                continue
            except Exception as err:  # a bug: log it, keep serving the other writes
                log.exception("store write %s failed", key)
                with self._cond:
                    self._done(key, item)
                with contextlib.suppress(InvalidStateError):  # cancelled meanwhile
                    future.set_exception(err)
                continue
            self._full_s = self._retry_s
            with self._cond:
                self._done(key, item)
            with contextlib.suppress(InvalidStateError):
                future.set_result(result)

    def _delay(self, err: NgramStoreError) -> float:
        """Seconds to wait before running a write again after ``err``."""
        if isinstance(err, StoreClosed):
            return 0.0  # the next call opens the store the settings name now
        if isinstance(err, StoreFull):
            delay, self._full_s = self._full_s, min(2 * self._full_s, self._max_retry_s)
            return delay
        return self._retry_s

    def _done(self, key: str, item: tuple[Callable[[], Any], Future[Any]]) -> None:
        if self._items.get(key) is item:  # not replaced by a newer write meanwhile
            del self._items[key]
        self.done += 1
        self._cond.notify_all()
