"""The session slot: the loader that fills it, on the engine thread, saying how it goes.

It holds ``Loading`` until a model is loaded, then its ``Session``, swapped in whole with
one assignment, or ``Failed`` with the reason when the model does not load (session.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from lsp_server.models import load_store_tokenizer
from lsp_server.runtime.learning import Learning
from lsp_server.runtime.notifier import Notifier
from lsp_server.runtime.scheduler import Scheduler
from lsp_server.session import Failed, ServerNow, Session, SessionSlot, load
from lsp_server.stores.stores import Stores
from superposed.embedded import cache_dir, terms_notice
from superposed.types import EngineError

log = logging.getLogger(__name__)


class Loader:
    """Fills the session slot: Loading until a model is loaded, then its Session, swapped in
    whole (Failed, with the reason, if it does not load).

    Loads run on the engine thread (after what is queued there), saying how they go: $/progress,
    superposed/status, and an error message that says what to do.
    """

    def __init__(
        self,
        scheduler: Scheduler,
        notifier: Notifier,
        learning: Learning,
        slot: SessionSlot,
        server: ServerNow,
        ready: Callable[[], None],
        failed: Callable[[], None] = lambda: None,
    ) -> None:
        self.started = False  # a load was asked for (the server is initialized)
        self._scheduler = scheduler
        self._notifier = notifier
        self._learning = learning
        self._slot = slot  # the one this loader alone swaps
        self._server = server  # its settings now
        self._ready = ready  # on the event loop, once a session is in
        self._failed = failed  # on the event loop, once a load failed

    async def start(self) -> None:
        """Load the model the settings name (and open the stores) on the engine thread."""
        self.started = True
        progress = await self._notifier.progress("load")
        model, notifier, learning = self._server.settings.model, self._notifier, self._learning

        def open_stores(tokenizer: Callable[[], Any]) -> Stores | None:
            return learning.open(tokenizer, self._server.settings.stores)

        def report(message: str, percent: int | None) -> None:  # a conversion, the size
            progress.report(message, percent)
            notifier.status("loading", message, percent)

        def run() -> None:
            progress.begin(f"loading {model.model}")
            notifier.status("loading", f"loading {model.model}")
            open_stores(partial(load_store_tokenizer, model))  # saves are learned meanwhile
            try:
                session = load(model, learning.stores, open_stores, report)
            except EngineError as err:  # a problem the user must fix: say what to do
                fail(str(err))
                return
            except Exception as err:  # anything else (a damaged file, a bug) ends loading too
                log.exception("loading model %s failed", model.model)
                fail(failure_message(err))
                return
            self._slot.swap(session)
            engine = session.engine
            log.info("model %s ready (context %d)", engine.name, engine.max_context)
            progress.end(f"ready: {engine.name}")
            notifier.status("ready")
            notifier.call_soon(self._ready)
            if engine.compiler is not None and not engine.compiler.done.is_set():
                threading.Thread(
                    target=self._say_when_compiled, args=(session,), daemon=True
                ).start()
            if (notice := terms_notice(engine.name)) is not None:
                notifier.info(notice)  # the user who picked the model sees its terms
            for notice in engine.notices:  # a slower runner, the default model instead
                notifier.once(notice)

        def fail(message: str) -> None:
            self._slot.swap(Failed(message))
            notifier.error(message)
            progress.end(f"failed: {message}")
            notifier.status("error", message)
            learning.ready.set()
            notifier.call_soon(self._failed)

        self._slot.swap(self._slot.state.reloading())
        learning.ready.clear()
        self._scheduler.submit(run)

    def _say_when_compiled(self, session: Session) -> None:
        """Once the compiled step is in (or failed), say "ready" again: the editors' status
        lines read superposed.stats' ``decodeStep`` anew (eager until then)."""
        engine = session.engine
        assert engine.compiler is not None
        engine.compiler.wait()
        if self._slot.state is session:
            self._notifier.status("ready", f"decode step: {engine.compile_status()}")

    def status_now(self) -> None:
        """superposed/status with the model's state (after other work, e.g. indexing)."""
        self._notifier.status(*self._slot.state.status())


def failure_message(err: Exception) -> str:
    """The one message for a load that failed with something other than an EngineError.

    Those say what to do themselves; anything else (a SafetensorError from a model cache
    damaged on disk, a RuntimeError from torch) left the server "loading" for ever, with no
    message (issue 51). The caches are rebuilt when deleted, so that is the first thing to try.
    """
    return (
        f"the model did not load ({type(err).__name__}: {err}). If a cache is damaged, "
        f"delete the folder {cache_dir()} (it is rebuilt) and restart the server; if it "
        "fails again, check the superposed.model, device and dtype settings and the log"
    )
