"""The server's state: the loaded model's ``Session``, and the stores' side that outlives loads.

A ``Session`` is the engine, the stores that count with its tokenizer and the memory (suffix
indexes over those stores and the open documents). ``load`` builds it in one piece on the
engine thread and the server swaps it in with one assignment, so a handler that took
``server.session`` reads an engine, stores and memory that belong together. Until a session
is in (the model loads, another one loads, or the load failed) ``server.session`` is None:
requests answer nothing, warm-ups wait for it, and the status says loading or error.

The stores open before the model, with its tokenizer alone, and outlive a session: they
are ``server.learning``'s (learning.py), which the session's stores are when it is built.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.workspace import Workspace

from lsp_server.completion import Answer, CursorContext, decode
from lsp_server.context import ContextAssembler
from lsp_server.definition_source import store_lookup, with_definitions
from lsp_server.learning import Learning, path_of, roots_of
from lsp_server.memory import Memory
from lsp_server.models import load_engine, load_store_tokenizer
from lsp_server.notifier import Notifier
from lsp_server.scheduler import Scheduler
from lsp_server.settings import DecodingSettings, ModelSettings, Settings
from lsp_server.stores import Stores, explain
from ngram_db.errors import NgramStoreError
from ngram_db.store import NgramStore
from ngram_db.tokenizer import as_tokenizer
from superposed.api import Engine
from superposed.embedded import terms_notice
from superposed.ngram import MatchSource, NgramSource
from superposed.types import Cancelled, EngineError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Where:
    """A request's document and the workspace around it, as they were when it came."""

    uri: str
    path: Path | None  # the document's file (None: not a file: URI)
    roots: list[Path]  # the workspace folders
    documents: dict[str, str]  # the open documents: uri -> text (pygls keeps them current)

    @classmethod
    def of(cls, uri: str, workspace: Workspace) -> Where:
        documents = {u: d.source for u, d in workspace.text_documents.items()}
        return cls(uri, path_of(uri), roots_of(workspace), documents)

    def stores(self, stores: Stores) -> list[NgramStore]:
        """The stores that apply here (Stores.for_path); none where one cannot be opened
        (``Session.ngram_source`` reports it)."""
        try:
            return stores.for_path(self.path, self.roots).present()
        except NgramStoreError:
            return []


@dataclass(frozen=True)
class Session:
    """The loaded engine, its stores and its memory, swapped in whole (see the module)."""

    engine: Engine
    stores: Stores
    memory: Memory  # suffix indexes over the stores' files and the open documents

    def ngram_source(
        self, where: Where, lambdas: Mapping[int, float], notifier: Notifier
    ) -> NgramSource | None:
        """The stores' n-gram source for a request; None (and one message) if unusable.

        On the engine thread, where a model reload reopens the stores, so that none closes
        under a decode waiting to run."""
        try:
            return self.stores.source_for(where.path, where.roots, lambdas)
        except NgramStoreError as err:  # the user must fix it: say so once, serve without
            notifier.once(f"n-gram store unusable: {explain(err)}", types.MessageType.Error)
            return None

    def matches_later(
        self, where: Where, context: CursorContext, definition_weight: float
    ) -> Callable[[], MatchSource | None]:
        """What builds a request's memory matches on the engine thread.

        The open documents are indexed from now on the memory's own thread (while the
        request waits its turn and the engine prefills). The stores' indexes are taken on
        the engine thread (like ``ngram_source``), and the definitions' proposals join them
        (lsp_server/definition_source.py).
        """
        pending = self.memory.source_later(where.uri, len(context.before), where.documents)

        def build() -> MatchSource | None:
            stores = where.stores(self.stores)
            return with_definitions(
                pending.with_stores(stores, self.stores.shared()),  # sharedIndexes
                self.engine.tokenizer,
                where.documents.get(where.uri, ""),
                str(where.path) if where.path else where.uri,
                context.before,
                stores,
                definition_weight,
            )

        return build

    def with_preamble(
        self,
        assembler: ContextAssembler,
        where: Where,
        context: CursorContext,
        decoding: DecodingSettings,
    ) -> CursorContext:
        """On the engine thread (it reads the stores): ``context`` with the codebase in the
        prompt (lsp_server/context.py), or as it is when the setting is off."""
        if decoding.context == "off" or not where.uri:
            return context
        tokenizer = self.engine.tokenizer
        preamble = assembler.preamble(
            decoding.context,
            decoding.context_tokens,
            unquote(where.uri),
            str(where.path) if where.path else where.uri,
            context.before + context.following,
            len(context.before),
            [unquote(u) for u in where.documents],
            store_lookup(where.stores(self.stores)),
            lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"]),
        )
        return replace(context, preamble=preamble)


def load(
    model: ModelSettings,
    stores: Stores | None,
    open_stores: Callable[[Callable[[], Any]], Stores | None],
) -> Session:
    """On the engine thread: the model's session (EngineError: the model cannot load).

    ``stores``: those open now; they are kept when they count with the model's tokenizer,
    else ``open_stores`` opens them with it.
    """
    engine = load_engine(model)
    if stores is None or stores.fingerprint != as_tokenizer(engine.tokenizer).fingerprint:
        stores = open_stores(lambda: engine.tokenizer)
    assert stores is not None  # the loaded model's tokenizer always opens them
    return Session(engine, stores, Memory(engine.tokenizer))


class Loader:
    """The session slot: None until a model is loaded, then its Session, swapped in whole.

    Loads run on the engine thread (after what is queued there), saying how they go: $/progress,
    superposed/status, and an error message that says what to do.
    """

    def __init__(
        self,
        scheduler: Scheduler,
        notifier: Notifier,
        learning: Learning,
        settings: Callable[[], Settings],
        ready: Callable[[], None],
    ) -> None:
        self.session: Session | None = None
        self.error: str | None = None  # why the last load failed
        self.started = False  # a load was asked for (the server is initialized)
        self._scheduler = scheduler
        self._notifier = notifier
        self._learning = learning
        self._settings = settings  # the settings now
        self._ready = ready  # on the event loop, once a session is in

    async def start(self) -> None:
        """Load the model the settings name (and open the stores) on the engine thread."""
        self.started = True
        progress = await self._notifier.progress("load")
        model, notifier, learning = self._settings().model, self._notifier, self._learning

        def open_stores(tokenizer: Callable[[], Any]) -> Stores | None:
            return learning.open(tokenizer, self._settings().stores)

        def run() -> None:
            progress.begin(f"loading {model.model}")
            notifier.status("loading", f"loading {model.model}")
            open_stores(partial(load_store_tokenizer, model))  # saves are learned meanwhile
            try:
                session = load(model, learning.stores, open_stores)
            except EngineError as err:  # a problem the user must fix: say what to do
                self.error = str(err)
                notifier.error(str(err))
                progress.end(f"failed: {err}")
                notifier.status("error", str(err))
                learning.ready.set()
                return
            self.session, self.error = session, None
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

        self.session = None
        learning.ready.clear()
        self._scheduler.submit(run)

    def _say_when_compiled(self, session: Session) -> None:
        """Once the compiled step is in (or failed), say "ready" again: the editors' status
        lines read superposed.stats' ``decodeStep`` anew (eager until then)."""
        engine = session.engine
        assert engine.compiler is not None
        engine.compiler.wait()
        if self.session is session:
            self._notifier.status("ready", f"decode step: {engine.compile_status()}")

    def describe(self) -> tuple[str, str | None]:
        """The model for superposed/status: its name, and the decode step once loaded."""
        session = self.session  # the engine thread swaps it: read it once
        if session is None:
            return self._settings().model.model, None
        return session.engine.name, session.engine.decode_step()

    def status_now(self) -> None:
        """superposed/status with the model's state (after other work, e.g. indexing)."""
        if self.session is not None:
            self._notifier.status("ready")
        elif self.error is not None:
            self._notifier.status("error", self.error)
        else:
            self._notifier.status("loading")


class Decoder:
    """A request's model call on the engine thread, with the session in when it runs."""

    def __init__(
        self,
        current: Callable[[], Session | None],
        scheduler: Scheduler,
        notifier: Notifier,
        counters: Counter[str],
        assembler: ContextAssembler,
    ) -> None:
        self.last_timing_ms: dict[str, float] = {}  # the last model call's, by phase
        self._assembler = assembler  # the codebase in the prompt (setting ``context``)
        self._current = current
        self._scheduler = scheduler
        self._notifier = notifier
        self._counters = counters

    def job(
        self, session: Session, where: Where, context: CursorContext, settings: Settings
    ) -> Callable[[threading.Event], Answer | None]:
        """The model call for a request at ``context``, made now: ``job(cancel)`` on the
        engine thread. The memory (when on) starts indexing the open documents at once."""
        matches = None
        if settings.decoding.memory:
            matches = session.matches_later(where, context, settings.decoding.definition_weight)
        return partial(self._decode, where, context, settings, matches)

    def _decode(
        self,
        where: Where,
        context: CursorContext,
        settings: Settings,
        matches: Callable[[], MatchSource | None] | None,
        cancel: threading.Event,
    ) -> Answer | None:
        """On the engine thread: one model call, or None if cancelled (or no model now)."""
        session = self._current()
        if cancel.is_set() or session is None:
            self._counters["cancelled"] += 1
            return None
        decoding = settings.decoding
        ngram = session.ngram_source(where, decoding.lambdas, self._notifier)
        context = session.with_preamble(self._assembler, where, context, decoding)
        self._counters["model_calls"] += 1
        try:
            answer = decode(
                session.engine,
                context,
                decoding,
                ngram,
                cancel=self._scheduler.cancel_check(cancel),
                memory=matches() if matches is not None else None,
            )
        except Cancelled:
            self._counters["cancelled"] += 1
            return None
        except EngineError as err:  # e.g. a method the model cannot run: say so, answer nothing
            self._notifier.error(str(err))
            return None
        self.last_timing_ms = answer.timing_ms
        return answer


def resident_mb() -> dict[str, float | None]:
    """This process's resident memory now and at its peak, in MiB (None where unknown)."""
    peak: float | None = None
    now: float | None = None
    try:
        import resource

        scale = 2**20 if sys.platform == "darwin" else 2**10  # ru_maxrss: bytes or KiB
        peak = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale, 1)
        with open("/proc/self/statm") as statm:  # Linux: pages
            now = round(int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)
    except (ImportError, OSError, ValueError):
        pass
    if peak is not None and now is not None:
        peak = max(peak, now)  # the kernel's high-water mark can lag the current size
    return {"rss": now, "peak": peak}
