"""The language server: thin pygls handlers over completion.py, the engine and the stores.

State-changing handlers run on the event loop and do no blocking work. Model calls run on
the scheduler's engine thread (scheduler.py: one thread, in request order; a newer request
for the same document, ``$/cancelRequest`` or ``didClose`` cancels the older one); store
writes (saves, accepted drafts, forgetting) go through a queue on another, which keeps
and retries a write that meets another process's lock, so no save is lost and no request
waits for the lock; saves that come before the model (and so the stores) are ready are kept
and applied once it is.

Tests slow the model's load and steps through their own entry point
(tests/e2e/hooked_server.py); ``SUPERPOSED_TEST_TINY_MODEL=1`` selects the tiny model
(models.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from lsp_server.ahead import Ahead, after_accept
from lsp_server.completion import (
    Answer,
    CursorContext,
    Suggestion,
    TypingCache,
    clean_text,
    cold_cache,
    decode,
    request_prompt,
)
from lsp_server.definition_source import with_definitions
from lsp_server.memory import Memory, store_list
from lsp_server.models import load_engine, load_store_tokenizer
from lsp_server.notifier import Notifier
from lsp_server.protocol import SuperposedProtocol
from lsp_server.scheduler import Scheduler
from lsp_server.settings import SECTION, Settings, parse_settings, to_dict
from lsp_server.stores import Stores, WriteQueue, accepted_name, explain
from lsp_server.triggers import refusal
from lsp_server.warmup import WARM_IDLE_S, prefill_missing
from ngram_db.errors import NgramStoreError, StoreClosed
from ngram_db.store import NgramStore
from ngram_db.tokenizer import as_tokenizer
from superposed.api import Engine
from superposed.embedded import terms_notice
from superposed.ngram import NgramSource
from superposed.types import Cancelled, EngineError

log = logging.getLogger(__name__)

VERSION = "0.1.0"
CMD_INDEX = "superposed.indexWorkspace"
CMD_STATS = "superposed.stats"
CMD_ACCEPT = "superposed.accept"
CMD_FORGET = "superposed.forget"
# Notification: the server's state for editors' status lines (docs/architecture.md, "Status").
STATUS = "superposed/status"
# Notification, client to server: {"textDocument": {"uri"}, "position"} where the cursor rests.
CURSOR_REST = "superposed/cursorRest"
ACCEPT_WAIT_S = 2.0  # superposed.accept answers within this; a write still waiting stays queued
FORGET_WAIT_S = 30.0  # superposed.forget waits this long for the erasure to finish
SHUTDOWN_WAIT_S = 10.0  # shutdown waits this long for queued saves to be written
LABEL_CHARS = 60  # completion labels longer than this are shortened (the insert is not)
# Where a client that completes as you type (Neovim 0.11's autotrigger, Helix, Emacs) asks on
# its own: where the rest of a line is worth drafting. After a space ends a word ("return ",
# "x = ", "if "), and after the characters that open an attribute, a call, an index, a literal
# or a value. Not after letters: the list would chase every keystroke, and the typing-along
# cache already answers those while a shown draft still matches.
TRIGGER_CHARACTERS = [" ", ".", "(", "[", "{", ",", ":", "="]


class SuperposedServer(LanguageServer):
    """Serves k drafts per request from one engine; learns saved and accepted text."""

    def __init__(self) -> None:
        super().__init__("superposed-lsp", VERSION, protocol_cls=SuperposedProtocol)
        self.settings = Settings()
        self.engine: Engine | None = None
        self.engine_error: str | None = None
        self.stores: Stores | None = None
        self.memory: Memory | None = None  # suffix indexes over the stores and open documents
        self.cache = TypingCache()
        self.ahead = Ahead()  # the next draft per document, decoded on accept
        self.counters: Counter[str] = Counter()
        self.last_timing_ms: dict[str, float] = {}  # the last model call's, by phase
        self.last_prompt: dict[str, Any] = {}  # the last answer's prompt: tokens, reused, short
        self.init_options: Any = None
        self.notifier = Notifier(self, self._call_soon)  # messages, said once, progress
        self._load_started = False
        self.loop: asyncio.AbstractEventLoop | None = None
        # The engine thread (loads, decodes, warm-ups, in order), the store thread (index
        # runs), and which request is each document's newest.
        self.scheduler = Scheduler(self.counters)
        self.writes = WriteQueue()  # saves, accepted drafts and forgetting, in order
        self._early_saves: dict[str, tuple[Path, str]] = {}  # uri -> saved before stores opened
        self.stores_ready = threading.Event()  # the stores are open (or cannot be, the load failed)
        # (uri, offset, resting): what to warm once the model is ready
        self._warm_when_ready: tuple[str, int | None, bool] | None = None

    # -- settings and model -------------------------------------------------------------

    async def apply_options(self, options: Any) -> None:
        """Parse settings; report invalid values; reload what changed."""
        settings, errors = parse_settings(options)
        for error in errors:
            log.warning(error)
            self.window_show_message(
                types.ShowMessageParams(type=types.MessageType.Warning, message=error)
            )
        old, self.settings = self.settings, settings
        if settings != old:
            self.cache.clear()  # drafts shown under the old settings (k, method) are stale
            self.ahead.clear()
        if self._load_started and settings.model != old.model:
            await self.start_loading()  # runs after any load in progress (one engine thread)
        if self.stores is not None and settings.stores != old.stores:
            # On the engine thread, between decodes: a decode never reads a closed store.
            self.scheduler.submit(self.stores.configure, settings.stores)

    async def start_loading(self) -> None:
        """Load the model (and open the stores) on the engine thread, reporting progress."""
        self._load_started = True
        progress = await self.notifier.progress("load")
        model = self.settings.model

        def load() -> None:
            progress.begin(f"loading {model.model}")
            self._call_soon(self._status, "loading", f"loading {model.model}")
            # The stores need only the tokenizer (well under a second): saves made while the
            # model loads are learned at once, not lost when the editor quits before it is up.
            self._open_stores(partial(load_store_tokenizer, model))
            try:
                engine = load_engine(model)
            except EngineError as err:  # a problem the user must fix: say what to do
                self.engine_error = str(err)
                self.notifier.error(str(err))
                progress.end(f"failed: {err}")
                self._call_soon(self._status, "error", str(err))
                self.stores_ready.set()
                return
            # The stores count token ids of this model's tokenizer: open them with it.
            if (
                self.stores is None
                or self.stores.fingerprint != as_tokenizer(engine.tokenizer).fingerprint
            ):
                self._open_stores(lambda: engine.tokenizer)
            self.memory = Memory(engine.tokenizer)
            self.engine, self.engine_error = engine, None
            log.info("model %s ready (context %d)", engine.name, engine.max_context)
            progress.end(f"ready: {engine.name}")
            self._call_soon(self._status, "ready")
            self._call_soon(self._warm_pending)
            compiler = engine.compiler
            if compiler is not None and not compiler.done.is_set():
                threading.Thread(
                    target=self._say_when_compiled, args=(engine,), daemon=True
                ).start()
            notice = terms_notice(engine.name)
            if notice is not None:  # the user who picked the model sees its terms
                self.notifier.info(notice)

        self.engine = None
        self.stores_ready.clear()
        self.scheduler.submit(load)

    def _open_stores(self, tokenizer: Callable[[], Any]) -> None:
        """On the engine thread: (re)open the stores with ``tokenizer()``, then learn the
        files saved meanwhile. A tokenizer that cannot load leaves it to the model's."""
        try:
            loaded = tokenizer()
        except Exception:  # e.g. a hub id without network: the model's load says what to do
            log.warning(
                "the stores wait for the model: its tokenizer did not load alone", exc_info=True
            )
            return
        # The new stores first, then the old ones closed: a handler on the event loop (stats)
        # never finds self.stores closed; writes queued for the old run again on the new.
        stores = Stores(loaded, self.settings.stores, report=self.notifier.once)
        old, self.stores = self.stores, stores
        if old is not None:
            old.close()
        self.stores_ready.set()
        self._call_soon(self._apply_early_saves)

    def _say_when_compiled(self, engine: Engine) -> None:
        """Once the compiled step is in (or failed), say "ready" again: the editors' status
        lines read superposed.stats' ``decodeStep`` anew (eager until then)."""
        assert engine.compiler is not None
        engine.compiler.wait()
        if self.engine is engine:
            self._call_soon(self._status, "ready", f"decode step: {engine.compile_status()}")

    def _warm_pending(self) -> None:
        """The model is ready: warm where the editor last opened, edited or rested."""
        pending, self._warm_when_ready = self._warm_when_ready, None
        if pending is not None:
            self.warm_document(*pending)

    def _call_soon(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run ``callback(*args)`` on the event loop (from any thread); nothing once the loop
        is closed (the server is exiting: a model load or a write finished after ``exit``)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # closed between the check and the call
            loop.call_soon_threadsafe(callback, *args)

    def _status(self, state: str, message: str | None = None, percent: int | None = None) -> None:
        """Send superposed/status (event loop only): ``state`` is loading, indexing, ready or
        error; the payload adds the model, a message for people, indexing, a percentage, and,
        ready, which decode step serves (``step``: compiled, or eager until it is built)."""
        engine = self.engine
        status: dict[str, Any] = {
            "state": state,
            "model": engine.name if engine else self.settings.model.model,
        }
        if state == "ready" and engine is not None:
            status["step"] = engine.decode_step()
        if message is not None:
            status["message"] = message
        if percent is not None:
            status["percent"] = percent
        self.protocol.notify(STATUS, status)

    def _status_after_work(self) -> None:
        """superposed/status once indexing is over: the model's state again."""
        if self.engine is not None:
            self._status("ready")
        elif self.engine_error is not None:
            self._status("error", self.engine_error)
        else:
            self._status("loading")

    # -- completion ---------------------------------------------------------------------

    async def suggest(
        self,
        uri: str,
        position: types.Position,
        automatic: bool = False,
        selected: types.SelectedCompletionInfo | None = None,
    ) -> tuple[str, list[Suggestion]]:
        """The cursor line's text before the cursor, and the suggestions at the cursor.

        Empty when the document is not open, the model is not ready, or the request is
        ``automatic`` (the user did not ask) and the trigger rules refuse it (triggers.py).
        ``selected``: the completion item selected in the editor's suggest widget; the
        drafts continue the document as it will be once that item is accepted (its text in
        its range, the cursor after it), and the line returned is that one.
        """
        self.counters["requests"] += 1
        document = self.open_document(uri)
        if document is None:
            return "", []  # unknown or closed document: nothing to complete
        source, offset = document.source, document.offset_at_position(position)
        if selected is not None:
            start = document.offset_at_position(selected.range.start)
            end = max(start, document.offset_at_position(selected.range.end))
            source = source[:start] + selected.text + source[end:]
            offset = start + len(selected.text)
            self.counters["after_selected_item"] += 1
        context = CursorContext.at(source, offset, _language(document), automatic)
        line = context.before[context.before.rfind("\n") + 1 :]
        if automatic and (why := refusal(self.settings.triggers, line, context.after)):
            self.counters[f"not triggered: {why}"] += 1
            return line, []
        return line, await self._suggest(uri, context)

    def open_document(self, uri: str) -> TextDocument | None:
        """The document the client opened at ``uri``, however it percent-encodes the URI.

        pygls keys open documents by the unquoted URI (``file:///a%20b/x.py`` is ``file:///a
        b/x.py``); its lookup falls back to a document read from disk, which has no version.
        """
        document = self.workspace.get_text_document(uri)
        return document if document.version is not None else None

    async def _suggest(self, uri: str, context: CursorContext) -> list[Suggestion]:
        key = _doc_key(uri)
        self.scheduler.supersede(key)  # this request supersedes older ones for the document
        along = self.cache.along(key, context)
        if along is not None:
            self.counters["typed_along"] += 1
            self.ahead.leave(key, context)  # an accept's job for another place is stale
            return along
        if (taken := self.ahead.take(key, context)) is not None:
            along = await self._answer_ahead(key, context, *taken)
            if along is not None:
                return along
        if self.engine is None:
            self.counters["not_ready"] += 1
            return []
        settings = self.settings
        memory = self._memory_source(uri, context) if settings.decoding.memory else None
        job = partial(self._decode, uri, context, settings, memory=memory)
        answer = await self.scheduler.request(key, job, settings.decoding.debounce_ms / 1000)
        if answer is None:
            return []  # superseded: a newer request answers instead
        self.last_prompt = {
            "tokens": answer.prompt_tokens,
            "reused": answer.reused_tokens,
            "short": answer.short_window,
        }
        if answer.short_window:  # a cold cache: extend it to the full window, in the background
            self.counters["short_window"] += 1
            self.warm(context)
        self.cache.remember(key, context.before, answer.suggestions)
        return answer.suggestions

    async def _answer_ahead(
        self, key: str, context: CursorContext, where: CursorContext, job: Future[Any]
    ) -> list[Suggestion] | None:
        """The drafts the accept's job decoded at ``where``, continued to ``context``; None:
        none fit (the request decodes its own), or a newer request came meanwhile."""
        answer = await self.scheduler.adopt(key, job)
        if answer is None:
            return None
        self.cache.remember(key, where.before, answer.suggestions)
        along = self.cache.along(key, context)
        if along is not None:
            self.counters["answered_ahead"] += 1
        return along

    def draft_ahead(self, item: dict[str, Any]) -> None:
        """On accept: decode at the cursor after the accepted text, before the editor asks.

        ``item``: the accept command's argument; its ``position`` is where ``text`` went in.
        Nothing when the setting is off, the model is not ready, or the argument does not say
        where (a client's partial accept may not)."""
        uri, text, at = item.get("uri"), item.get("text"), item.get("position")
        if not self.settings.triggers.on_accept or self.engine is None:
            return
        if not (isinstance(uri, str) and isinstance(text, str) and isinstance(at, dict)):
            return
        document = self.open_document(uri)
        line, character = at.get("line"), at.get("character")
        if document is None or not isinstance(line, int) or not isinstance(character, int):
            return
        offset = document.offset_at_position(types.Position(line=line, character=character))
        context = after_accept(document.source, offset, text, _language(document))
        key, settings = _doc_key(uri), self.settings
        memory = self._memory_source(uri, context) if settings.decoding.memory else None
        cancel = threading.Event()
        self.scheduler.stop_warming()  # the engine thread is this job's next
        job = self.scheduler.submit(partial(self._decode, uri, context, settings, cancel, memory))
        self.ahead.start(key, context, cancel, job, self.cache.entry(key))
        self.counters["drafted_ahead"] += 1
        job.add_done_callback(lambda _: self._call_soon(self._ahead_done, key, job))

    def _ahead_done(self, key: str, job: Future[Any]) -> None:
        """On the event loop: an accept's job finished; if no request took it, its drafts
        answer the next request there through the typing-along cache."""
        where = self.ahead.finished(key, job, self.cache.entry(key))
        if where is None or job.cancelled() or job.exception() is not None:
            return
        if (answer := job.result()) is not None:
            self.cache.remember(key, where.before, answer.suggestions)
            self.counters["ahead_ready"] += 1

    def warm(self, context: CursorContext, resting: bool = False) -> None:
        """Queue a warm-up of the KV cache for a request at ``context`` (see warmup.py).

        It runs on the engine thread after what is queued there; a newer warm-up or any
        request that needs the engine cancels it between chunks. ``resting``: the cursor
        rests there (superposed/cursorRest), so no pause is waited for, and what is warmed
        is the prompt a request there would decode from now: the short window when the
        cache lacks more than ``firstPromptTokens`` of the full one (the full window would
        take over a second, and a request coming sooner could use none of it).
        """
        settings = self.settings
        if self.engine is None or not settings.decoding.first_prompt_tokens:
            return
        self.scheduler.warm(partial(self._warm_up, context, settings, resting))

    def _warm_up(
        self, context: CursorContext, settings: Settings, resting: bool, event: threading.Event
    ) -> None:
        """On the engine thread: prefill the prompt at ``context``, chunk by chunk."""
        engine = self.engine
        if event.wait(0 if resting else WARM_IDLE_S) or engine is None:  # a request came
            self.counters["warmups_cancelled"] += 1
            return
        max_prompt = settings.decoding.max_prompt_tokens or None
        if resting and cold_cache(engine, context, settings.decoding, max_prompt):
            max_prompt = settings.decoding.first_prompt_tokens  # what a request would use
        prompt = request_prompt(engine, context, settings.decoding, max_prompt)
        done = prefill_missing(engine.runner, prompt.ids, self.scheduler.cancel_check(event))
        if done is None:
            self.counters["warmups_cancelled"] += 1
        else:
            self.counters["warmups_done"] += 1
            self.counters["warmup_tokens"] += done

    def warm_document(self, uri: str, offset: int | None = None, resting: bool = False) -> None:
        """didOpen/didChange/cursorRest: warm the cache for a request at ``offset`` (None: the
        end). Before the model is ready, the last such place is warmed once it is (an editor
        opens the file it starts with before the model has loaded)."""
        document = self.open_document(uri)
        if document is None:
            return
        if self.engine is None:
            self._warm_when_ready = (uri, offset, resting)
            return
        source = document.source
        at = len(source) if offset is None else max(0, min(offset, len(source)))
        self.warm(CursorContext.at(source, at, _language(document)), resting)

    def _ngram_source(self, uri: str, settings: Settings) -> NgramSource | None:
        """The stores' n-gram source for a document; None (and one message) if unusable.

        On the engine thread, so that a model reload (which reopens the stores, also on that
        thread) never closes the stores of a decode that is waiting to run.
        """
        if self.stores is None:
            return None
        try:
            return self.stores.source_for(_path_of(uri), self._roots(), settings.decoding.lambdas)
        except NgramStoreError as err:  # the user must fix it: say so once, serve without
            self.notifier.once(f"n-gram store unusable: {explain(err)}", types.MessageType.Error)
            return None

    def _memory_source(self, uri: str, context: CursorContext) -> Callable[[], Any] | None:
        """What builds the request's memory on the engine thread: a snapshot of the open
        documents now (pygls keeps them current on didOpen/didChange), indexed from now on
        the memory's own thread (while the request waits its turn and the engine prefills),
        and, on the engine thread, the stores (like _ngram_source, so that a model reload
        never closes them under it)."""
        if self.memory is None:
            return None
        offset = len(context.before)
        documents = {u: d.source for u, d in self.workspace.text_documents.items()}
        pending = self.memory.source_later(uri, offset, documents)

        def build() -> Any:
            stores: list[NgramStore] = []
            if self.stores is not None:
                try:
                    stores = store_list(self.stores, _path_of(uri), self._roots())
                except NgramStoreError:  # reported by _ngram_source: match the documents only
                    stores = []
            engine, weight = self.engine, self.settings.decoding.definition_weight
            if engine is None:
                return pending.with_stores(stores)
            path = _path_of(uri)  # the definitions' proposals: lsp_server/definition_source.py
            document, where = documents.get(uri, ""), str(path) if path else uri
            memory = pending.with_stores(stores)
            tokenizer = engine.tokenizer
            return with_definitions(
                memory, tokenizer, document, where, context.before, stores, weight
            )

        return build

    def _decode(
        self,
        uri: str,
        context: CursorContext,
        settings: Settings,
        cancel: threading.Event,
        memory: Callable[[], Any] | None = None,
    ) -> Answer | None:
        """On the engine thread: one model call, or None if cancelled."""
        engine = self.engine
        if cancel.is_set() or engine is None:
            self.counters["cancelled"] += 1
            return None
        ngram = self._ngram_source(uri, settings)
        self.counters["model_calls"] += 1
        try:
            answer = decode(
                engine,
                context,
                settings.decoding,
                ngram,
                cancel=self.scheduler.cancel_check(cancel),
                max_prompt_tokens=settings.decoding.max_prompt_tokens or None,
                memory=memory() if memory is not None else None,
            )
            self.last_timing_ms = answer.timing_ms
            return answer
        except Cancelled:
            self.counters["cancelled"] += 1
            return None
        except EngineError as err:  # e.g. a method the model cannot run: say so, answer nothing
            self.notifier.error(str(err))
            return None

    def close_document(self, uri: str) -> None:
        """didClose: cancel the document's request in flight and forget its drafts."""
        key = _doc_key(uri)
        self.scheduler.supersede(key)
        self.cache.forget(key)
        self.ahead.cancel(key)

    def _roots(self) -> list[Path]:
        roots = [Path(to_fs_path(f.uri) or "") for f in self.workspace.folders.values()]
        if not roots and self.workspace.root_path:
            roots.append(Path(self.workspace.root_path))
        return roots

    # -- stores ---------------------------------------------------------------------------

    async def learn_file(self, uri: str) -> None:
        """didSave: queue the saved document's text for its stores (off the event loop)."""
        document = self.open_document(uri)
        path = _path_of(uri)
        if document is None or path is None or not self.settings.stores.index_on_save:
            return
        text = clean_text(document.source)
        if self.stores is None:
            if self.engine_error is None:  # loading: learn it once the stores can open
                self._early_saves[uri] = (path, text)
            return
        self._queue_save(path, text)

    def _queue_save(self, path: Path, text: str) -> None:
        roots = self._roots()
        future = self.writes.submit(
            f"save:{path}", partial(self._on_stores, "update_file", path, text, roots)
        )
        future.add_done_callback(lambda f: self._call_soon(self._saved, path, f))

    def _on_stores(self, method: str, *args: Any) -> Any:
        """On the write thread: ``method`` of the stores open when the write runs, not when it
        was queued (a model switch reopens them; a write for closed ones is run again)."""
        stores = self.stores
        if stores is None:
            raise StoreClosed("the stores are being opened")
        return getattr(stores, method)(*args)

    def _saved(self, path: Path, future: Future[Any]) -> None:
        """A queued save has run: count it (a replaced or failed one is not counted)."""
        if future.cancelled() or future.exception() is not None:
            return
        reason = future.result()
        if reason is None:
            self.counters["saves_indexed"] += 1
            self._stores_changed()
        else:
            log.info("not learned: %s (%s)", path, reason)
            self.counters["saves_skipped"] += 1

    def _apply_early_saves(self) -> None:
        """The stores are ready: learn the files saved while the model was loading."""
        early, self._early_saves = self._early_saves, {}
        for path, text in early.values():
            self._queue_save(path, text)

    async def _written(self, future: Future[Any], wait_s: float) -> tuple[bool, Any]:
        """Wait up to ``wait_s`` for a queued write: (finished, result); it goes on regardless."""
        try:
            return True, await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), wait_s)
        except TimeoutError:
            return False, None

    async def accept(self, args: list[Any]) -> dict[str, Any]:
        """superposed.accept: add the accepted draft (with the line before it) to the user store.

        Answers within ACCEPT_WAIT_S: a write that waits for another writer's lock stays queued.
        """
        item = args[0] if args and isinstance(args[0], dict) else {}
        self.draft_ahead(item)
        text = item.get("text")
        stores = self.stores
        if not isinstance(text, str) or not text.strip() or stores is None:
            return {"learned": False}
        if not self.settings.stores.user_store:
            return {"learned": False}
        learned, name = clean_text(str(item.get("context", "")) + text), accepted_name()
        self.counters["accepted"] += 1
        future = self.writes.submit(name, partial(self._on_stores, "learn_text", learned, name))
        future.add_done_callback(lambda _: self._stores_changed())
        finished, ok = await self._written(future, ACCEPT_WAIT_S)
        return {"learned": bool(ok)} if finished else {"learned": True, "queued": True}

    async def forget(self, args: list[Any]) -> dict[str, Any]:
        """superposed.forget: erase a file or folder (``{"path"}`` or ``{"uri"}``) from the
        stores, or with no argument clear the user store."""
        stores = self.stores
        if stores is None:
            return {"error": self.engine_error or "the model is still loading: try again"}
        item = args[0] if args else None
        path: Path | None = None
        if isinstance(item, str):
            path = _path_of(item) if item.startswith("file:") else Path(item)
        elif isinstance(item, dict) and isinstance(item.get("path"), str):
            path = Path(item["path"])
        elif isinstance(item, dict) and isinstance(item.get("uri"), str):
            path = _path_of(item["uri"])
        if item is not None and path is None:
            return {"error": 'give {"path": FILE_OR_FOLDER}, {"uri": URI}, or nothing'}
        roots = self._roots()
        future = self.writes.submit(
            f"forget:{uuid.uuid4()}", partial(self._on_stores, "forget", path, roots)
        )
        future.add_done_callback(lambda _: self._stores_changed(forgotten=True))
        finished, result = await self._written(future, FORGET_WAIT_S)
        return result if finished else {"queued": True}

    def _stores_changed(self, forgotten: bool = False) -> None:
        """A store was written (any thread): the memory's indexes of it are out of date.

        After a forget they are dropped, so that nothing erased is ever proposed again."""
        if self.memory is not None:
            self.memory.stores_changed(forgotten=forgotten)

    async def index_workspace(self) -> dict[str, Any]:
        """superposed.indexWorkspace: index every folder, reporting $/progress."""
        stores = self.stores
        if stores is None:
            return {"indexed": [], "error": self.engine_error or "the model is still loading"}
        progress = await self.notifier.progress("index")
        progress.begin("indexing the workspace")
        self._status("indexing", "indexing the workspace", 0)

        def report(done: int, total: int, path: str) -> None:
            pct = int(100 * done / total) if total else 100
            msg = f"{done}/{total} {path}"
            progress.report(msg, pct)
            self._call_soon(self._status, "indexing", msg, pct)

        results = []
        try:
            for root in self._roots():
                summary = await self.scheduler.on_store_thread(stores.index_root, root, report)
                results.append({"root": str(root), **summary})
        finally:
            self._status_after_work()
        failed = sum("error" in r for r in results)
        done = f"indexed {len(results) - failed} folder(s)"
        progress.end(done + (f", {failed} failed" if failed else ""))
        self._stores_changed()
        return {"indexed": results}

    def stats(self) -> dict[str, Any]:
        engine = self.engine
        return {
            "ready": engine is not None,
            "model": engine.name if engine else self.settings.model.model,
            "error": self.engine_error,
            "settings": to_dict(self.settings),
            "counters": dict(self.counters),
            "stores": self.stores.stats(self._roots()) if self.stores else None,
            "writes": {"pending": self.writes.pending(), "retried": self.writes.retries},
            "compiledStep": engine.compile_status() if engine else None,
            # What decodes the drafts now: the compiled step once built, else the eager one.
            "decodeStep": engine.decode_step() if engine else None,
            "compiledCalls": engine.compiled_calls if engine else 0,
            "lastTimingMs": self.last_timing_ms,  # the last model call's, by phase
            "lastPrompt": self.last_prompt,  # its prompt tokens, those reused, short window
            "memoryMb": memory_mb(),
        }


def memory_mb() -> dict[str, float | None]:
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


def _doc_key(uri: str) -> str:
    """One key per document for the caches, as pygls keys its open documents."""
    return unquote(uri)


def _language(document: TextDocument) -> str:
    """What the syntax rules (lineMode auto) know the document by: the client's language
    id, else its URI (its extension)."""
    return document.language_id or document.uri


def _path_of(uri: str) -> Path | None:
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return Path(path) if path else None


SERVER = SuperposedServer()


# -- lifecycle and settings ---------------------------------------------------------------


@SERVER.feature(types.INITIALIZE)
def initialize(ls: SuperposedServer, params: types.InitializeParams) -> None:
    ls.init_options = params.initialization_options


@SERVER.feature(types.INITIALIZED)
async def initialized(ls: SuperposedServer, params: types.InitializedParams) -> None:
    ls.loop = asyncio.get_running_loop()
    await ls.apply_options(ls.init_options)
    await ls.start_loading()


@SERVER.feature(types.SHUTDOWN)
async def shutdown(ls: SuperposedServer, params: None) -> None:
    """Queued saves are written before the server exits (a lock may have held them back, or
    the stores were still opening: saves made just after the start are kept too)."""
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, ls.stores_ready.wait, SHUTDOWN_WAIT_S)
    if ls.stores is not None:
        ls._apply_early_saves()
    if not await loop.run_in_executor(None, ls.writes.drain, SHUTDOWN_WAIT_S):
        log.warning("shutdown: %d store write(s) not written", ls.writes.pending())
    if ls._early_saves:
        log.warning("shutdown: %d save(s) not written: no store opened", len(ls._early_saves))


@SERVER.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(
    ls: SuperposedServer, params: types.DidChangeConfigurationParams
) -> None:
    options = params.settings
    if not isinstance(options, dict) or SECTION not in options:
        workspace = ls.client_capabilities.workspace
        if not (workspace and workspace.configuration):
            return
        pulled = await ls.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
        )
        options = pulled[0] if pulled else None
    await ls.apply_options(options)


# -- documents ------------------------------------------------------------------------------


@SERVER.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: SuperposedServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.warm_document(params.text_document.uri)  # the cursor is unknown: the document's end


@SERVER.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: SuperposedServer, params: types.DidChangeTextDocumentParams) -> None:
    """Warm the cache for a request just after the last edit."""
    change = params.content_changes[-1] if params.content_changes else None
    document = ls.open_document(params.text_document.uri)
    if document is None:
        return
    offset = None  # a whole-document change: its end
    if isinstance(change, types.TextDocumentContentChangePartial):
        offset = document.offset_at_position(change.range.start) + len(change.text)
    ls.warm_document(params.text_document.uri, offset)


@SERVER.feature(CURSOR_REST)
def cursor_rest(ls: SuperposedServer, params: Any) -> None:
    """The cursor rests (the editor's CursorHold, a pause after moving it): warm the cache
    for a request there, as the document's end is warmed on open."""
    try:
        uri = params.textDocument.uri
        position = types.Position(line=params.position.line, character=params.position.character)
    except AttributeError:
        log.warning("ignored %s without textDocument.uri and position: %r", CURSOR_REST, params)
        return
    document = ls.open_document(uri)
    if document is not None:
        ls.warm_document(uri, document.offset_at_position(position), resting=True)


@SERVER.feature(types.TEXT_DOCUMENT_DID_SAVE)
async def did_save(ls: SuperposedServer, params: types.DidSaveTextDocumentParams) -> None:
    await ls.learn_file(params.text_document.uri)


@SERVER.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: SuperposedServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.close_document(params.text_document.uri)


# -- completion -----------------------------------------------------------------------------


def _accept_command(uri: str, line: str, s: Suggestion, at: types.Position) -> types.Command:
    """Runs when the user accepts a draft: the user store learns it (after its line's start),
    and the next draft is decoded at once after it, inserted at ``at``. (A score and source
    here broke Neovim 0.11's accept from the popup: the detail carries them instead.)"""
    argument = {
        "uri": uri,
        "context": line,
        "text": s.text,
        "position": {"line": at.line, "character": at.character},
    }
    return types.Command(title="accept", command=CMD_ACCEPT, arguments=[argument])


@SERVER.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
async def inline_completion(
    ls: SuperposedServer, params: types.InlineCompletionParams
) -> types.InlineCompletionList:
    uri, pos = params.text_document.uri, params.position
    automatic = params.context.trigger_kind == types.InlineCompletionTriggerKind.Automatic
    # With the suggest widget open, a draft extends the item the user is about to accept:
    # it replaces that item's range, starting with the item's text (as the protocol asks).
    selected = params.context.selected_completion_info
    line, suggestions = await ls.suggest(uri, pos, automatic, selected)
    here, head, at = types.Range(start=pos, end=pos), "", pos
    if selected is not None:  # the draft goes in after the item's text
        here, head = selected.range, selected.text
        start = selected.range.start
        at = types.Position(line=start.line, character=start.character + len(head))
    return types.InlineCompletionList(
        items=[
            types.InlineCompletionItem(
                insert_text=head + s.text,
                range=here,
                command=_accept_command(uri, line, s, at),
            )
            for s in suggestions
        ]
    )


def _snippet_body(text: str, line: str) -> str:
    """The draft as a snippet that inserts it as drafted on the line ``line`` (the cursor
    line's text before the cursor): literal, and its later lines written relative to that
    line's indentation, which every snippet engine adds to them (vim.snippet, LuaSnip, VS
    Code). A later line that starts with less stays as it is (a snippet cannot dedent)."""
    indentation = line[: len(line) - len(line.lstrip())]
    first, *later = text.split("\n")
    relative = [r.removeprefix(indentation) for r in later]
    return _snippet_escape("\n".join([first, *relative]))


def _snippet_escape(text: str) -> str:
    """The draft as a snippet that inserts itself literally."""
    return text.replace("\\", "\\\\").replace("$", "\\$").replace("}", "\\}")


def _snippets_supported(ls: SuperposedServer) -> bool:
    document = ls.client_capabilities.text_document
    item = document.completion.completion_item if document and document.completion else None
    return bool(item and item.snippet_support)


@SERVER.feature(
    types.TEXT_DOCUMENT_COMPLETION,
    types.CompletionOptions(resolve_provider=False, trigger_characters=TRIGGER_CHARACTERS),
)
async def completion(ls: SuperposedServer, params: types.CompletionParams) -> types.CompletionList:
    uri, pos = params.text_document.uri, params.position
    # A popup opened by a trigger character or kept open while typing is automatic; one the
    # user asked for (or a client that says nothing) is not.
    kind = params.context.trigger_kind if params.context else types.CompletionTriggerKind.Invoked
    line, suggestions = await ls.suggest(uri, pos, kind != types.CompletionTriggerKind.Invoked)
    here = types.Range(start=pos, end=pos)
    # Plain-text edits are cut at the first space by some clients (Neovim 0.11 inserts only
    # the first word); a snippet that escapes everything inserts the whole draft everywhere.
    snippet = _snippets_supported(ls)
    items = []
    for i, s in enumerate(suggestions):
        label = s.text.strip().replace("\n", "⏎ ")
        items.append(
            types.CompletionItem(
                label=label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…",
                kind=types.CompletionItemKind.Text,
                detail=f"superposed draft {i + 1} (score {s.score:.2f}, {s.source})",
                sort_text=f"{i:04d}",
                filter_text=s.text,
                text_edit=types.TextEdit(
                    range=here, new_text=_snippet_body(s.text, line) if snippet else s.text
                ),
                insert_text_format=types.InsertTextFormat.Snippet
                if snippet
                else types.InsertTextFormat.PlainText,
                command=_accept_command(uri, line, s, pos),
            )
        )
    # Incomplete: the client asks again as the user types, and typed-along drafts answer.
    return types.CompletionList(is_incomplete=True, items=items)


# -- commands -------------------------------------------------------------------------------


@SERVER.command(CMD_INDEX)
async def index_workspace(ls: SuperposedServer, *args: Any) -> dict[str, Any]:
    return await ls.index_workspace()


@SERVER.command(CMD_STATS)
def stats(ls: SuperposedServer, *args: Any) -> dict[str, Any]:
    return ls.stats()


@SERVER.command(CMD_ACCEPT)
async def accept(ls: SuperposedServer, *args: Any) -> dict[str, Any]:
    return await ls.accept(list(args))


@SERVER.command(CMD_FORGET)
async def forget(ls: SuperposedServer, *args: Any) -> dict[str, Any]:
    return await ls.forget(list(args))
