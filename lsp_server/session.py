"""The server's state: the loaded model's ``Session``, and the stores' side that outlives loads.

A ``Session`` is the engine, the stores that count with its tokenizer and the memory (suffix
indexes over those stores and the open documents). ``load`` builds it in one piece on the
engine thread and the loader (loader.py) swaps it in with one assignment, so a handler that
took ``server.session`` reads an engine, stores and memory that belong together. Until a
session is in, the slot holds ``Loading`` (the model loads) or ``Failed`` (it did not, and
why): they answer every call a handler makes as a server without a model should
(``NotReady``), so no handler asks which of the three it holds. A call that does work takes
what does it (the Decoder, the Warmer, ahead.Drafts): a Session hands itself to it, and
NotReady answers in its place, in one line each. Work queued on the engine thread (a
decode, a warm-up) takes the session in when it runs, and is cancelled if a reload has
emptied the slot meanwhile.

The stores open before the model, with its tokenizer alone, and outlive a session: they
are ``server.learning``'s (learning.py), which the session's stores are when it is built.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from lsprotocol import types

from lsp_server.completion import Answer, CursorContext, decode
from lsp_server.context import ContextAssembler
from lsp_server.definition_source import store_lookup, with_definitions
from lsp_server.knn import KnnMemories
from lsp_server.memory import Memory
from lsp_server.models import load_engine
from lsp_server.notifier import Notifier
from lsp_server.scheduler import Scheduler
from lsp_server.settings import DecodingSettings, ModelSettings, Settings
from lsp_server.shareable import Shareable
from lsp_server.stores import Stores, explain
from lsp_server.workspace import Where
from ngram_db.errors import NgramStoreError
from ngram_db.tokenizer import as_tokenizer
from superposed.api import Engine
from superposed.knn import HiddenSource
from superposed.ngram import MatchSource, NgramSource
from superposed.types import Cancelled, EngineError

if TYPE_CHECKING:
    from lsp_server.ahead import Drafts
    from lsp_server.warmup import Warmer


@dataclass(frozen=True)
class Session:
    """The loaded engine, its stores and its memory, swapped in whole (see the module)."""

    engine: Engine
    stores: Stores
    memory: Memory  # suffix indexes over the stores' files and the open documents
    # the open documents that other documents' drafts may copy from (a save's rules)
    shareable: Shareable = field(default_factory=Shareable)
    knn: KnnMemories = field(default_factory=KnnMemories)  # index-repo --knn's, by store
    error = None  # the load did not fail

    def status(self) -> tuple[str, str | None]:
        """superposed/status's state and message."""
        return "ready", None

    def describe(self, model: str) -> tuple[str, str | None]:
        """The model for superposed/status: its name and decode step (``model``: the
        settings' name, which a slot without a session says)."""
        return self.engine.name, self.engine.decode_step()

    def stats(self, model: str) -> dict[str, Any]:
        """superposed.stats' model fields."""
        engine = self.engine
        return {
            "ready": True,
            "model": engine.name,
            "error": None,
            "compiledStep": engine.compile_status(),
            # What decodes the drafts now: the compiled step once built, else the eager one.
            "decodeStep": engine.decode_step(),
            "compiledCalls": engine.compiled_calls,
        }

    def reloading(self) -> State:
        """The slot while a new load runs: it is loading."""
        return Loading()

    def stores_changed(self, forgotten: bool) -> None:
        """A store was written: the memory's indexes of it are out of date (Memory)."""
        self.memory.stores_changed(forgotten=forgotten)

    def closed(self, uri: str) -> None:
        """The document ``uri`` (unquoted) closed: what the memory held of it goes."""
        self.memory.close(uri)
        self.shareable.forget(uri)

    def erasures(self, where: Where) -> object:
        """A stamp that moves when text is erased from the stores that apply ``where``
        (Memory.erasures); off the event loop: it reads them."""
        return self.memory.erasures(where.stores(self.stores))

    async def answer(
        self, decoder: Decoder, key: str, where: Where, context: CursorContext, settings: Settings
    ) -> Answer | None:
        """A request's answer from the model (None: superseded)."""
        return await decoder.request(self, key, where, context, settings)

    def draft_ahead(
        self,
        decoder: Decoder,
        drafts: Drafts,
        key: str,
        where: Where,
        context: CursorContext,
        settings: Settings,
    ) -> None:
        """On accept: decode at ``context`` before the editor asks (ahead.Drafts)."""
        drafts.draft_ahead(key, context, decoder.job(self, where, context, settings))

    def warm(
        self,
        warmer: Warmer,
        place: Place,
        where: Where,
        context: CursorContext,
        settings: Settings,
    ) -> None:
        """Warm the cache for a request at ``context`` (``place``: where it is, for a slot
        without a session to keep)."""
        warmer.warm(where, context, settings, place[2])

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

    def knn_source(self, where: Where, notifier: Notifier) -> HiddenSource | None:
        """The hidden-state memory beside the request's codebase store (lsp_server/knn.py);
        on the engine thread, as ``ngram_source``."""
        try:
            store = self.stores.for_path(where.path, where.roots).codebase
        except NgramStoreError:
            return None  # ngram_source says why
        if store is None:
            return None
        fingerprint = store.tokenizer.fingerprint
        return self.knn.for_store(store, self.engine.name, fingerprint, notifier.once)

    def matches_later(
        self, where: Where, context: CursorContext, definition_weight: float
    ) -> Callable[[], MatchSource | None]:
        """What builds a request's memory matches on the engine thread.

        The open documents are indexed from now on the memory's own thread (while the
        request waits its turn and the engine prefills). The stores' indexes are taken on
        the engine thread (like ``ngram_source``), and the definitions' proposals join them
        (lsp_server/definition_source.py).
        """
        shared = partial(
            self.shareable.others, roots=where.roots, max_bytes=self.stores.max_file_bytes
        )
        pending = self.memory.source_later(where.uri, len(context.before), where.documents, shared)

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
        open_uris: Mapping[str, str] = where.documents
        if decoding.context == "definitions+recent":  # other documents' chunks: as the memory
            max_bytes = self.stores.max_file_bytes
            open_uris = self.shareable.others(where.documents, where.roots, max_bytes)
        preamble = assembler.preamble(
            decoding.context,
            decoding.context_tokens,
            unquote(where.uri),
            str(where.path) if where.path else where.uri,
            context.before + context.following,
            len(context.before),
            [unquote(u) for u in open_uris],
            store_lookup(where.stores(self.stores)),
            lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"]),
        )
        return replace(context, preamble=preamble)


# Where to warm once a session is in: (uri, offset or None for the document's end, resting).
Place = tuple[str, int | None, bool]


class NotReady:
    """The session slot without a model: what a server answers while it has none.

    It has Session's calls, so that handlers make them without asking what the slot holds.
    Requests answer nothing at once (counted ``not_ready``) and draft nothing ahead; the place
    last opened, edited or rested on is kept and warmed once a session is in (warmup.Warmer);
    a decode or warm-up queued before a reload emptied the slot is cancelled when it runs.
    """

    error: str | None = None  # why the load failed (Failed)

    def status(self) -> tuple[str, str | None]:
        return "loading", None

    def describe(self, model: str) -> tuple[str, str | None]:
        return model, None

    def stats(self, model: str) -> dict[str, Any]:
        return {
            "ready": False,
            "model": model,
            "error": self.error,
            "compiledStep": None,
            "decodeStep": None,
            "compiledCalls": 0,
        }

    def reloading(self) -> State:
        """A new load keeps a failed load's error until it ends (the stores stay shut to
        early saves, and the status says error)."""
        return self

    def stores_changed(self, forgotten: bool) -> None:
        pass  # no memory yet: the next session's indexes the stores as they are

    def closed(self, uri: str) -> None:
        pass  # no memory yet: nothing of the document is held

    def erasures(self, where: Where) -> object:
        return None  # no drafts are shown without a session

    async def answer(
        self, decoder: Decoder, key: str, where: Where, context: CursorContext, settings: Settings
    ) -> Answer | None:
        decoder.not_ready()
        return None

    def draft_ahead(
        self,
        decoder: Decoder,
        drafts: Drafts,
        key: str,
        where: Where,
        context: CursorContext,
        settings: Settings,
    ) -> None:
        pass

    def warm(
        self,
        warmer: Warmer,
        place: Place,
        where: Where,
        context: CursorContext,
        settings: Settings,
    ) -> None:
        warmer.waiting = place  # the last such place is warmed once a session is in


class Loading(NotReady):
    """No session yet: the model loads (or the server waits for ``initialized`` to load it).
    Saves are kept for the stores, which open before the model."""


class Failed(NotReady):
    """The load failed: ``error`` says why and what to do. Saves are not kept: no stores
    will open until the settings name a model that loads."""

    def __init__(self, error: str) -> None:
        self.error = error

    def status(self) -> tuple[str, str | None]:
        return "error", self.error


State = Session | NotReady  # what the session slot holds: a Session, Loading or Failed


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


class Decoder:
    """A request's model call on the engine thread, with the session in when it runs."""

    def __init__(
        self,
        current: Callable[[], State],
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

    async def request(
        self, session: Session, key: str, where: Where, context: CursorContext, settings: Settings
    ) -> Answer | None:
        """Document ``key``'s request in flight (Scheduler.request): None if superseded."""
        job = self.job(session, where, context, settings)
        return await self._scheduler.request(key, job, settings.decoding.debounce_ms / 1000)

    def not_ready(self) -> None:
        """A request came before a session was in: it answers nothing."""
        self._counters["not_ready"] += 1

    def cancelled(self) -> None:
        self._counters["cancelled"] += 1

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
        """On the engine thread: one model call with the session in now, or None if
        cancelled (or queued before a reload emptied the slot: no session is in)."""
        session = self._current()
        if cancel.is_set() or not isinstance(session, Session):
            self.cancelled()
            return None
        decoding = settings.decoding
        ngram = session.ngram_source(where, decoding.lambdas, self._notifier)
        knn = session.knn_source(where, self._notifier) if decoding.knn_weight > 0 else None
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
                knn=knn,
            )
        except Cancelled:
            self.cancelled()
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
