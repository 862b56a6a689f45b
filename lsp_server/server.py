"""The language server: thin pygls handlers over the request path, the session and the stores.

A completion handler builds one ``Request`` (request.py) and hands it to ``ModelCalls``
(model_calls.py), which queues ``answer.answer`` on the scheduler's engine thread
(scheduler.py: one thread, in request order; a newer request for the same document,
``$/cancelRequest`` or ``didClose`` cancels the older one, and one at its place joins it).
State-changing handlers run on the event loop and do no blocking work. What a loaded model
serves with (engine, stores, memory) is ``server.session``, swapped in whole (session.py,
loader.py fills it); until then it is Loading or Failed: a request answers nothing
(ModelCalls says so), the place to warm is kept for when a session is in, and an inline
request waits for it (scheduler.HeldRequests).
Store writes go through ``server.learning``'s queue, which keeps and retries a write that
meets another process's lock and learns saves made before the model is ready.

Tests slow the model's load and steps through tests/e2e/hooked_server.py;
``SUPERPOSED_TEST_TINY_MODEL=1`` selects the tiny model (models.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from functools import partial
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from lsp_server.completion.answer import stores_here, unsaid
from lsp_server.completion.cleanup import Suggestion
from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.items import (
    CMD_ACCEPT,
    accepted_at,
    completion_items,
    inline_items,
    snippets_supported,
)
from lsp_server.completion.request import Request
from lsp_server.next_edits.service import (
    CMD_NEXT_EDIT_ACCEPTED,
    CMD_NEXT_EDIT_DISMISSED,
    NEXT_EDITS,
    NextEditService,
)
from lsp_server.protocol import SuperposedProtocol
from lsp_server.runtime.ahead import DraftsAhead, after_accept
from lsp_server.runtime.learning import Learning
from lsp_server.runtime.loader import Loader
from lsp_server.runtime.model_calls import ModelCalls
from lsp_server.runtime.notifier import Notifier
from lsp_server.runtime.scheduler import HeldRequests, Scheduler
from lsp_server.runtime.warmup import Warmer
from lsp_server.session import (
    Loading,
    Session,
    SessionSlot,
    State,
    describe,
    model_stats,
    ready,
    resident_mb,
)
from lsp_server.settings import SECTION, Settings, parse_settings, to_dict
from lsp_server.triggers import refusal
from lsp_server.workspace import Where, doc_key, path_of, roots_of
from ngram_db.tokenizer import clean_text

log = logging.getLogger(__name__)

VERSION = "0.1.0"
CMD_INDEX = "superposed.indexWorkspace"
CMD_STATS = "superposed.stats"
CMD_FORGET = "superposed.forget"
# Notification, client to server: {"textDocument": {"uri"}, "position"} where the cursor rests.
CURSOR_REST = "superposed/cursorRest"
# {textDocument: {uri}}: an answer cut at answerWithinMs is whole in the typing-along cache
DRAFTS_WHOLE = "superposed/draftsWhole"
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
        self.counters: Counter[str] = Counter()
        self.last_prompt: dict[str, Any] = {}  # the last answer's prompt: tokens, reused, short
        self.init_options: Any = None
        # The session: Loading, then the loaded model's, swapped in whole by the loader alone;
        # the services below hold this slot and read it when their work runs.
        self.slot = SessionSlot()
        self.notifier = Notifier(self, self.describe_model)  # messages, status
        # The engine thread (loads, decodes, warm-ups), the store thread, the newest requests.
        self.scheduler = Scheduler(self.counters)
        # The stores open now (before the model too) and the writes to them.
        self.learning = Learning(self.notifier, self.counters, self, self.slot)
        # Inline requests made while the model loads, answered once it is in.
        self.held = HeldRequests(self.counters)
        self.loader = Loader(
            self.scheduler,
            self.notifier,
            self.learning,
            self.slot,
            self,
            self._loaded,
            partial(self.held.end, loaded=False),
        )
        # Requests' model calls, with the session in when they run.
        self.calls = ModelCalls(self.slot, self.scheduler, self.notifier, self.counters)
        self.warmer = Warmer(self.scheduler, self.counters, self.slot)
        self.drafts = DraftsAhead(self.scheduler, self.counters, self.notifier.call_soon)
        # The last edit proposed where it applies next (no model: lsp_server/next_edits).
        self.next_edits = NextEditService(self, self.protocol.notify, self.counters, self.slot)

    @property
    def session(self) -> State:
        """The loaded model's engine, stores and memory (session.py); Loading or Failed
        until one is in."""
        return self.slot.state

    def describe_model(self) -> tuple[str, str | None]:
        """The model for superposed/status: its name, and the decode step once loaded."""
        return describe(self.slot.state, self.settings.model.model)

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
            self.drafts.clear()  # drafts shown under the old settings (k, method) are stale
        self.next_edits.reconfigure()  # turned on or off: in the documents open too
        if self.loader.started and settings.model != old.model:
            await self.loader.start()  # runs after any load in progress (one engine thread)
        if settings.stores != old.stores:
            self.learning.configure(self.scheduler, settings.stores)

    # -- completion ---------------------------------------------------------------------

    async def suggest(
        self,
        uri: str,
        position: types.Position,
        automatic: bool = False,
        selected: types.SelectedCompletionInfo | None = None,
        hold: bool = False,
    ) -> tuple[str, list[Suggestion]]:
        """The cursor line's text before the cursor, and the suggestions at the cursor.

        Empty when the document is not open, the model is not ready, or the request is
        ``automatic`` (the user did not ask) and the trigger rules refuse it (triggers.py).
        ``selected``: the completion item selected in the editor's suggest widget; the
        drafts continue the document as it will be once that item is accepted (its text in
        its range, the cursor after it), and the line returned is that one. ``hold``: while
        the model loads, wait for it (HeldRequests: an inline request, the newest of its
        document) instead of answering nothing.
        """
        self.counters["requests"] += 1
        if (document := self.open_document(uri)) is None:
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
        if not await self._model_or_nothing(doc_key(uri), position, hold):
            return line, []
        return line, await self._suggest(uri, context)

    async def _model_or_nothing(self, key: str, position: types.Position, hold: bool) -> bool:
        """Whether to go on to the model: False where a request ``hold``s while the model
        loads and is let go empty (a newer request, an edit, a move, a failed load). Any
        request lets an older held one of its document go: it answers instead."""
        self.held.release(key)
        if not (hold and self.loader.started and isinstance(self.session, Loading)):
            return True
        if await self.held.wait(key, position):
            return True
        self.counters["held_answered_empty"] += 1
        return False

    def open_document(self, uri: str) -> TextDocument | None:
        """The document the client opened at ``uri``, however it percent-encodes the URI.

        pygls keys open documents by the unquoted URI (``file:///a%20b/x.py`` is ``file:///a
        b/x.py``); its lookup falls back to a document read from disk, which has no version.
        """
        document = self.workspace.get_text_document(uri)
        return document if document.version is not None else None

    def request(self, uri: str, context: CursorContext) -> Request:
        """A request at ``context`` in the document ``uri``, as the server is now."""
        return Request(doc_key(uri), Where.of(uri, self.workspace), context, self.settings)

    async def _suggest(self, uri: str, context: CursorContext) -> list[Suggestion]:
        request = self.request(uri, context)
        if (joined := self.calls.join(request)) is not None:  # one in flight answers it too
            return [] if (answer := await joined) is None else answer.suggestions
        self.scheduler.supersede(request.key)  # it supersedes older ones for the document
        erased = None  # no drafts are shown without a session
        if (session := ready(self.session)) is not None:
            erased = await asyncio.to_thread(_erasures, session, request)  # reads the stores
        if (typed := await self.drafts.without_model(request.key, context, erased)) is not None:
            return typed
        answer = await self.calls.request(request)
        if answer is None:
            return []  # superseded (a newer request answers instead), or no model yet
        self.last_prompt = {
            "tokens": answer.prompt_tokens,
            "reused": answer.reused_tokens,
            "short": answer.short_window,
        }
        self.drafts.remember(request.key, context.before, answer.suggestions)
        if answer.rest is not None:  # cut at answerWithinMs: whole next, then said (DRAFTS_WHOLE)
            whole = partial(self.protocol.notify, DRAFTS_WHOLE, {"textDocument": {"uri": uri}})
            self.drafts.draft_ahead(request.key, context, answer.rest, True, whole)
        if answer.short_window:  # a cold cache: extend it to the full window, in the background
            self.counters["short_window"] += 1
            self.warmer.warm(request)
        return answer.suggestions

    def draft_ahead(self, item: dict[str, Any]) -> None:
        """On accept: decode at the cursor after the accepted text, before the editor asks.

        ``item``: the accept command's argument; its ``position`` is where ``text`` went in.
        Nothing when the setting is off, the model is not ready, or the argument does not say
        where (a client's partial accept may not)."""
        accepted = accepted_at(item)
        if not self.settings.triggers.on_accept or accepted is None:
            return
        uri, text, at = accepted
        if (document := self.open_document(uri)) is None:
            return
        offset = document.offset_at_position(at)
        context = after_accept(document.source, offset, text, _language(document))
        if (session := ready(self.session)) is not None:
            request = self.request(uri, context)
            self.drafts.draft_ahead(request.key, context, self.calls.job(session, request))

    def warm_document(self, uri: str, offset: int | None = None, resting: bool = False) -> None:
        """didOpen/didChange/cursorRest: warm the cache for a request at ``offset`` (None: the
        end). Before the model is ready, the last such place is warmed once it is (an editor
        opens the file it starts with before the model has loaded)."""
        if (document := self.open_document(uri)) is None:
            return
        source = document.source
        at = len(source) if offset is None else max(0, min(offset, len(source)))
        context = CursorContext.at(source, at, _language(document))
        if ready(self.session) is None:
            self.warmer.waiting = (uri, offset, resting)  # warmed once a session is in
            return
        self.warmer.warm(self.request(uri, context), resting)

    def _loaded(self) -> None:
        """The model is ready: answer the requests held while it loaded, warm where the
        editor last opened, edited or rested (after: a request stops a warm-up)."""
        self.held.end(loaded=True)
        self._warm_pending()

    def _warm_pending(self) -> None:
        """Warm where the editor last opened, edited or rested, once."""
        waiting, self.warmer.waiting = self.warmer.waiting, None
        if waiting is not None:
            self.warm_document(*waiting)


def _erasures(session: Session, request: Request) -> object:
    """A stamp that moves when text is erased from the stores that apply to the request
    (MatchIndexes.erasures); off the event loop: it reads them. The stores are looked up here
    and again in ``answer`` on purpose: a typed-along draft needs no answer, and an answer
    looks them up on the engine thread, where a model reload may have reopened them."""
    return session.indexes.stores.erasures(stores_here(session, request, unsaid).present())


def _language(document: TextDocument) -> str:
    """What the syntax rules (lineMode auto) know the document by: the client's language
    id, else its URI (its extension)."""
    return document.language_id or document.uri


SERVER = SuperposedServer()


# -- lifecycle and settings ---------------------------------------------------------------


@SERVER.feature(types.INITIALIZE)
def initialize(ls: SuperposedServer, params: types.InitializeParams) -> None:
    ls.init_options = params.initialization_options


@SERVER.feature(types.INITIALIZED)
async def initialized(ls: SuperposedServer, params: types.InitializedParams) -> None:
    ls.notifier.loop = asyncio.get_running_loop()
    await ls.apply_options(ls.init_options)
    await ls.loader.start()


@SERVER.feature(types.SHUTDOWN)
async def shutdown(ls: SuperposedServer, params: None) -> None:
    await ls.learning.drain()  # queued saves are written before the server exits


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
    if (document := ls.open_document(params.text_document.uri)) is not None:
        ls.next_edits.opened(document)


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
    ls.held.release(doc_key(params.text_document.uri))  # held for text that changed: empty
    ls.warm_document(params.text_document.uri, offset)
    ls.next_edits.changed(document)  # the edits log; a change that ends proposes next edits


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
    ls.held.moved(doc_key(uri), position)  # a request held elsewhere is answered empty
    document = ls.open_document(uri)
    if document is not None:
        ls.warm_document(uri, document.offset_at_position(position), resting=True)


@SERVER.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: SuperposedServer, params: types.DidSaveTextDocumentParams) -> None:
    """Queue the saved document's text for its stores (written off the event loop)."""
    uri = params.text_document.uri
    document, path = ls.open_document(uri), path_of(uri)
    if document is None or path is None or not ls.settings.stores.index_on_save:
        return
    ls.learning.save(uri, path, clean_text(document.source))


@SERVER.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: SuperposedServer, params: types.DidCloseTextDocumentParams) -> None:
    """Cancel the document's request in flight; forget its drafts and what the memory
    indexed of it."""
    key = doc_key(params.text_document.uri)
    ls.scheduler.supersede(key)
    ls.held.release(key)
    ls.drafts.forget(key)
    if (session := ready(ls.session)) is not None:  # what the memory held of it goes
        session.indexes.close(key)
        session.shareable.forget(key)
    ls.next_edits.closed(params.text_document.uri)
    if session is not None and not ls.workspace.text_documents:  # none open: give back
        ls.scheduler.stop_warming()  # a warm-up now would fill the cache for a closed one
        ls.scheduler.submit(session.engine.release)  # the KV cache, the heap's free pages


# -- completion -----------------------------------------------------------------------------


@SERVER.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
async def inline_completion(
    ls: SuperposedServer, params: types.InlineCompletionParams
) -> types.InlineCompletionList:
    uri, pos = params.text_document.uri, params.position
    automatic = params.context.trigger_kind == types.InlineCompletionTriggerKind.Automatic
    # With the suggest widget open, the drafts continue the item the user is about to accept;
    # while the model loads, the newest request of the document waits for it (HeldRequests).
    selected = params.context.selected_completion_info
    line, suggestions = await ls.suggest(uri, pos, automatic, selected, hold=True)
    codec = ls.workspace.position_codec  # the negotiated encoding counts the accept's place
    items = inline_items(uri, pos, line, suggestions, selected, codec)
    return types.InlineCompletionList(items=items)


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
    snippet = snippets_supported(ls.client_capabilities)
    items = completion_items(uri, pos, line, suggestions, snippet)
    # Incomplete: the client asks again as the user types, and typed-along drafts answer.
    return types.CompletionList(is_incomplete=True, items=items)


# -- next edits -----------------------------------------------------------------------------


@SERVER.feature(NEXT_EDITS)
async def next_edits(ls: SuperposedServer, params: Any) -> dict[str, Any]:
    """The next edits for a cursor, the best first (lsp_server/next_edits/service.py)."""
    try:
        uri, row = params.textDocument.uri, int(params.position.line)
    except (AttributeError, TypeError, ValueError):
        log.warning("%s wants textDocument.uri and position: got %r", NEXT_EDITS, params)
        return {"edits": []}
    return await ls.next_edits.request(ls.open_document(uri), row)


@SERVER.command(CMD_NEXT_EDIT_ACCEPTED)
def next_edit_accepted(ls: SuperposedServer, *args: Any) -> dict[str, Any]:  # then a didChange
    return ls.next_edits.accepted(args)


@SERVER.command(CMD_NEXT_EDIT_DISMISSED)
def next_edit_dismissed(ls: SuperposedServer, *args: Any) -> dict[str, Any]:  # not proposed again
    return ls.next_edits.dismissed(args)


# -- commands -------------------------------------------------------------------------------


@SERVER.command(CMD_INDEX)
async def index_workspace(ls: SuperposedServer, *args: Any) -> dict[str, Any]:
    """Index every workspace folder into its store, reporting $/progress."""
    return await ls.learning.index(ls.scheduler, roots_of(ls.workspace), ls.loader.status_now)


@SERVER.command(CMD_STATS)
def stats(ls: SuperposedServer, *args: Any) -> dict[str, Any]:
    return {
        **model_stats(ls.session, ls.settings.model.model),  # ready, model, error, step
        "settings": to_dict(ls.settings),
        "counters": dict(ls.counters),
        **ls.learning.stats(roots_of(ls.workspace)),  # stores, writes
        "lastTimingMs": ls.calls.last_timing_ms,  # the last model call's, by phase
        "lastPrompt": ls.last_prompt,  # its prompt tokens, those reused, short window
        "residentMb": resident_mb(),  # this process's resident set, now and at its peak
        "nextEdits": ls.next_edits.stats(),  # its last time to proposals, patterns, counts
    }


@SERVER.command(CMD_ACCEPT)
async def accept(ls: SuperposedServer, *args: Any) -> dict[str, Any]:
    """The user accepted a draft: the next one is drafted ahead, the user store learns it."""
    item = args[0] if args and isinstance(args[0], dict) else {}
    ls.draft_ahead(item)
    return await ls.learning.accept(item, ls.settings.stores.user_store)


@SERVER.command(CMD_FORGET)
async def forget(ls: SuperposedServer, *args: Any) -> dict[str, Any]:
    """Erase a file or folder from the stores; no argument: clear the user store."""
    return await ls.learning.forget(args[0] if args else None)
