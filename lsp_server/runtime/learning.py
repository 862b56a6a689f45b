"""The stores' side of the server: the stores open now, and the writes to them.

The stores open before the model, with its tokenizer alone (``Learning.open``, on the engine
thread): saves made while the model loads are learned at once, not lost when the editor quits
before it is up; saves made before any store opened are kept and queued once one is. A
loaded session (session.py) serves with the same stores; a model switch reopens them.

Writes (saves, accepted drafts, forgetting) go through one queue (writes.WriteQueue) on a
thread of its own, which keeps and retries a write that meets another process's lock, so no
save is lost and no request waits for the lock. Each write runs on the stores open when it
runs, not when it was queued.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from lsp_server.runtime.notifier import Notifier
from lsp_server.runtime.scheduler import Scheduler
from lsp_server.session import ServerNow, SessionSlot, ready
from lsp_server.settings import StoreSettings
from lsp_server.stores.stores import Stores, accepted_name
from lsp_server.stores.write_queue import WriteQueue
from lsp_server.workspace import path_of, roots_of
from ngram_db.errors import StoreClosed
from ngram_db.tokenizer import clean_text

log = logging.getLogger(__name__)
T = TypeVar("T")

ACCEPT_WAIT_S = 2.0  # superposed.accept answers within this; a write still waiting stays queued
FORGET_WAIT_S = 30.0  # superposed.forget waits this long for the erasure to finish
# Shutdown waits for the queued writes while they are being made: until none has ended for
# SHUTDOWN_WAIT_S (a lock held by another process, a full disk), SHUTDOWN_MAX_S at most. What is
# left then is said (log, message, superposed.stats' writes.dropped), never dropped silently.
SHUTDOWN_WAIT_S = 10.0
SHUTDOWN_MAX_S = 60.0


class Learning:
    """The stores open now, and the writes to them: saves, accepted drafts, forgetting."""

    def __init__(
        self,
        notifier: Notifier,
        counters: Counter[str],
        server: ServerNow,
        slot: SessionSlot,
    ) -> None:
        self.stores: Stores | None = None
        self.ready = threading.Event()  # the stores are open (or cannot be: the load failed)
        self.writes = WriteQueue()  # saves, accepted drafts and forgetting, in order
        self._notifier = notifier
        self._counters = counters
        self._server = server  # its workspace's folders now
        self._slot = slot  # the server's session (its memory indexes the stores)
        self._early: dict[str, tuple[Path, str]] = {}  # uri -> saved before stores opened

    def _roots(self) -> list[Path]:
        """The workspace's folders now."""
        return roots_of(self._server.workspace)

    def open(self, tokenizer: Callable[[], Any], settings: StoreSettings) -> Stores | None:
        """On the engine thread: (re)open the stores with ``tokenizer()``, then learn the
        files saved meanwhile. A tokenizer that cannot load leaves it to the model's."""
        try:
            loaded = tokenizer()
        except Exception:  # e.g. a hub id without network: the model's load says what to do
            log.warning(
                "the stores wait for the model: its tokenizer did not load alone", exc_info=True
            )
            return None
        # The new stores first, then the old ones closed: a handler on the event loop (stats)
        # never finds the stores closed; writes queued for the old run again on the new.
        stores = Stores(loaded, settings, report=self._notifier.once)
        old, self.stores = self.stores, stores
        if old is not None:
            old.close()
        self.ready.set()
        self._notifier.call_soon(self._apply_early_saves)
        return stores

    def configure(self, scheduler: Scheduler, settings: StoreSettings) -> None:
        """The store settings changed: apply them to the stores open now (those opened
        later read the settings then). On the engine thread, between decodes: a decode
        never reads a closed store."""
        if (stores := self.stores) is not None:
            scheduler.submit(stores.configure, settings)

    def stats(self, roots: list[Path]) -> dict[str, Any]:
        """superposed.stats' stores (None while none is open) and queued writes."""
        stores, writes = self.stores, self.writes
        return {
            "stores": stores.stats(roots) if stores is not None else None,
            "writes": {
                "pending": writes.pending(),
                "retried": writes.retries,
                "dropped": len(writes.dropped),  # given up at shutdown
            },
        }

    def _unavailable(self, loading: str) -> str:
        """Why no store is open: the model's load failed (its error), or ``loading``."""
        return self._slot.state.error or loading

    # -- writes ---------------------------------------------------------------------------

    def save(self, uri: str, path: Path, text: str) -> None:
        """Queue a saved file's text for its stores. Before any is open, it is learned once
        they are, unless the model's load failed (no stores will open)."""
        if self.stores is None:
            if self._slot.state.error is None:
                self._early[uri] = (path, text)
            return
        self._queue_save(path, text)

    def _queue_save(self, path: Path, text: str) -> None:
        roots = self._roots()
        future = self.writes.submit(
            f"save:{path}",
            partial(self._on_stores, lambda stores: stores.update_file(path, text, roots)),
        )
        future.add_done_callback(lambda f: self._notifier.call_soon(self._saved, path, f))

    def _saved(self, path: Path, future: Future[Any]) -> None:
        """A queued save has run: count it (a replaced or failed one is not counted)."""
        if future.cancelled() or future.exception() is not None:
            return
        reason = future.result()
        if reason is None:
            self._counters["saves_indexed"] += 1
            self._changed(False)
        else:
            log.info("not learned: %s (%s)", path, reason)
            self._counters["saves_skipped"] += 1

    def _apply_early_saves(self) -> None:
        """The stores are ready: learn the files saved while the model was loading."""
        early, self._early = self._early, {}
        for path, text in early.values():
            self._queue_save(path, text)

    async def accept(self, item: Mapping[str, Any], user_store: bool) -> dict[str, Any]:
        """superposed.accept: the accepted draft (with the line before it) into the user store,
        unless a save of its file would not be learned or the draft itself would not be
        (Stores.learn_text): then ``{"learned": false, "reason": ...}``.

        Answers within ACCEPT_WAIT_S: a write that waits for another writer's lock stays queued.
        """
        text, uri = item.get("text"), item.get("uri")
        if not isinstance(text, str) or not text.strip() or self.stores is None:
            return {"learned": False}
        if not user_store:
            return {"learned": False}
        self._counters["accepted"] += 1
        learned, name = clean_text(str(item.get("context", "")) + text), accepted_name()
        path, roots = path_of(uri) if isinstance(uri, str) else None, self._roots()
        future = self.writes.submit(
            name,
            partial(self._on_stores, lambda stores: stores.learn_text(learned, path, roots, name)),
        )
        future.add_done_callback(lambda _: self._changed(False))
        finished, reason = await written(future, ACCEPT_WAIT_S)
        if not finished:
            return {"learned": True, "queued": True}
        if reason is not None:
            log.info("accepted draft not learned: %s (%s)", uri, reason)
            self._counters["accepts_skipped"] += 1
            return {"learned": False, "reason": reason}
        return {"learned": True}

    async def forget(self, item: Any) -> dict[str, Any]:
        """superposed.forget: erase a file or folder (``{"path"}``, ``{"uri"}`` or either as a
        string) from the stores, or with no argument (None) clear the user store."""
        path: Path | None = None
        if isinstance(item, str):
            path = path_of(item) if item.startswith("file:") else Path(item)
        elif isinstance(item, dict) and isinstance(item.get("path"), str):
            path = Path(item["path"])
        elif isinstance(item, dict) and isinstance(item.get("uri"), str):
            path = path_of(item["uri"])
        if self.stores is None:
            return {"error": self._unavailable("the model is still loading: try again")}
        if item is not None and path is None:
            return {"error": 'give {"path": FILE_OR_FOLDER}, {"uri": URI}, or nothing'}
        roots = self._roots()
        future = self.writes.submit(
            f"forget:{uuid.uuid4()}",
            partial(self._on_stores, lambda stores: stores.forget(path, roots)),
        )
        future.add_done_callback(lambda _: self._changed(True))
        finished, result = await written(future, FORGET_WAIT_S)
        return result if finished else {"queued": True}

    async def index(
        self, scheduler: Scheduler, roots: Sequence[Path], status_now: Callable[[], None]
    ) -> dict[str, Any]:
        """superposed.indexWorkspace: index every folder on the store thread, reporting
        $/progress and superposed/status (``status_now`` says the model's state after)."""
        if (stores := self.stores) is None:
            return {"indexed": [], "error": self._unavailable("the model is still loading")}
        progress = await self._notifier.progress("index")
        progress.begin("indexing the workspace")
        self._notifier.status("indexing", "indexing the workspace", 0)

        def report(done: int, total: int, path: str) -> None:
            pct = int(100 * done / total) if total else 100
            msg = f"{done}/{total} {path}"
            progress.report(msg, pct)
            self._notifier.status("indexing", msg, pct)

        results = []
        try:
            for root in roots:
                summary = await scheduler.on_store_thread(stores.index_root, root, report)
                results.append({"root": str(root), **summary})
        finally:
            status_now()
        failed = sum("error" in r for r in results)
        done = f"indexed {len(results) - failed} folder(s)"
        progress.end(done + (f", {failed} failed" if failed else ""))
        self._changed(False)
        return {"indexed": results}

    def _changed(self, forgotten: bool = False) -> None:
        """A store was written (any thread): the memory's indexes of it are out of date.

        After a forget they are dropped, so that nothing erased is ever proposed again."""
        if (session := ready(self._slot.state)) is not None:
            session.indexes.stores.stores_changed(forgotten=forgotten)

    def _on_stores(self, write: Callable[[Stores], T]) -> T:
        """On the write thread: ``write`` on the stores open when it runs, not when it was
        queued (a model switch reopens them; a write for closed ones is run again)."""
        stores = self.stores
        if stores is None:
            raise StoreClosed("the stores are being opened")
        return write(stores)

    async def drain(self) -> None:
        """Shutdown: queued saves are written before the server exits (a lock may have held
        them back, or the stores were still opening: saves made just after the start are
        kept too)."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.ready.wait, SHUTDOWN_WAIT_S)
        if self.stores is not None:
            self._apply_early_saves()
        dropped = await loop.run_in_executor(
            None, self.writes.flush, SHUTDOWN_WAIT_S, SHUTDOWN_MAX_S
        )
        dropped += [f"save:{path}" for path, _ in self._early.values()]  # no store opened
        if dropped:
            shown = ", ".join(dropped[:5]) + (
                f" and {len(dropped) - 5} more" if len(dropped) > 5 else ""
            )
            message = (
                f"shutdown: {len(dropped)} store write(s) not made in time, dropped ({shown}); "
                "run index-repo on the workspace to learn those saves"
            )
            log.warning("%s", message)
            self._counters["writes_dropped"] += len(dropped)
            self._notifier.once(message)


async def written(future: Future[Any], wait_s: float) -> tuple[bool, Any]:
    """Wait up to ``wait_s`` for a queued write: (finished, result); it goes on regardless."""
    try:
        return True, await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), wait_s)
    except TimeoutError:
        return False, None
