"""A server without a model (lsp_server/session.py's Loading and Failed): every handler
answers what a server without a model should, without raising; a request says "not ready"
in one place (model_calls.ModelCalls)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from lsprotocol import types
from pygls.workspace import Workspace

from lsp_server import server as handlers
from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.request import Request
from lsp_server.server import SuperposedServer
from lsp_server.session import Failed, Loading, NotReady, Session, describe
from lsp_server.workspace import Where

TEXT = "def f():\n    return "
URI = "file:///w/app.py"
FAILED = "no model named x: check superposed.model"


def not_ready_server(state: NotReady) -> SuperposedServer:
    """A server, its workspace as ``initialize`` makes it, one open document, no model."""
    server = SuperposedServer()
    server.protocol._workspace = Workspace(None)  # as initialize makes them
    server.protocol.client_capabilities = types.ClientCapabilities()
    server.workspace.put_text_document(types.TextDocumentItem(URI, "python", 1, TEXT))
    server.slot.state = state
    return server


STATES = [pytest.param(Loading(), id="loading"), pytest.param(Failed(FAILED), id="failed")]
END = types.Position(line=1, character=len("    return "))


@pytest.mark.parametrize("state", STATES)
def test_requests_answer_nothing_at_once(state: NotReady) -> None:
    ls = not_ready_server(state)
    document = types.TextDocumentIdentifier(uri=URI)
    inline = types.InlineCompletionParams(
        text_document=document,
        position=END,
        context=types.InlineCompletionContext(
            trigger_kind=types.InlineCompletionTriggerKind.Invoked
        ),
    )
    plain = types.CompletionParams(text_document=document, position=END)
    assert asyncio.run(handlers.inline_completion(ls, inline)).items == []
    completions = asyncio.run(handlers.completion(ls, plain))
    assert completions.items == [] and completions.is_incomplete
    assert ls.counters["not_ready"] == 2 and ls.counters["model_calls"] == 0


@pytest.mark.parametrize("state", STATES)
def test_an_accept_drafts_nothing_ahead_and_learns_nothing(state: NotReady) -> None:
    ls = not_ready_server(state)
    item = {"uri": URI, "text": "x", "position": {"line": 1, "character": 11}}
    assert asyncio.run(handlers.accept(ls, item)) == {"learned": False}  # no stores open
    assert ls.counters["drafted_ahead"] == 0


@pytest.mark.parametrize("state", STATES)
def test_the_last_place_opened_edited_or_rested_on_waits_for_a_session(state: NotReady) -> None:
    ls = not_ready_server(state)
    opened = types.DidOpenTextDocumentParams(types.TextDocumentItem(URI, "python", 1, TEXT))
    handlers.did_open(ls, opened)
    assert ls.warmer.waiting == (URI, None, False)  # the document's end
    at = SimpleNamespace(line=END.line, character=END.character)  # as pygls passes it
    handlers.cursor_rest(ls, SimpleNamespace(textDocument=SimpleNamespace(uri=URI), position=at))
    assert ls.warmer.waiting == (URI, len(TEXT), True)
    assert ls.scheduler.counters["warmups_done"] == 0


@pytest.mark.parametrize("state", STATES)
def test_stats_say_the_model_is_not_ready_and_why(state: NotReady) -> None:
    stats = handlers.stats(not_ready_server(state))
    assert stats["ready"] is False and stats["error"] == state.error
    assert stats["model"] == "smollm2-135m"  # the settings' model, not yet loaded
    assert stats["stores"] is None and stats["writes"] == {"pending": 0, "retried": 0, "dropped": 0}
    assert (stats["compiledStep"], stats["decodeStep"], stats["compiledCalls"]) == (None, None, 0)


@pytest.mark.parametrize(
    ("state", "index_error", "forget_error"),
    [
        (Loading(), "the model is still loading", "the model is still loading: try again"),
        (Failed(FAILED), FAILED, FAILED),
    ],
)
def test_commands_on_the_stores_say_why_they_cannot_run(
    state: NotReady, index_error: str, forget_error: str
) -> None:
    ls = not_ready_server(state)
    assert asyncio.run(handlers.index_workspace(ls)) == {"indexed": [], "error": index_error}
    assert asyncio.run(handlers.forget(ls)) == {"error": forget_error}
    assert asyncio.run(handlers.forget(ls, {"path": "/w/app.py"})) == {"error": forget_error}


@pytest.mark.parametrize(("state", "kept"), [(Loading(), True), (Failed(FAILED), False)])
def test_a_save_is_kept_for_the_stores_unless_the_load_failed(
    state: NotReady, kept: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    ls = not_ready_server(state)
    monkeypatch.setattr(handlers, "path_of", lambda uri: Path("/w/app.py"))
    handlers.did_save(ls, types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(URI)))
    assert (URI in ls.learning._early) is kept  # learned once the stores open


def test_status_and_describe_follow_the_state() -> None:
    assert Loading().status() == ("loading", None)
    assert Failed(FAILED).status() == ("error", FAILED)
    assert describe(Failed(FAILED), "smollm2-135m") == ("smollm2-135m", None)


def test_a_reload_keeps_a_failed_loads_error_until_it_ends() -> None:
    """As before the slot had states: a reload emptied the session but kept the error, so
    saves are not kept and the status says error until the new load ends."""
    failed, loading = Failed(FAILED), Loading()
    assert failed.reloading() is failed and loading.reloading() is loading


def test_work_queued_before_a_reload_emptied_the_slot_is_cancelled_when_it_runs() -> None:
    ls = not_ready_server(Loading())
    context = CursorContext.at(TEXT, len(TEXT), "python")
    request = Request(URI, Where.of(URI, ls.workspace), context, ls.settings)
    answer = ls.calls._run(request, None, threading.Event())
    assert answer is None
    assert ls.counters["cancelled"] == 1 and ls.counters["model_calls"] == 0
    ls.warmer._warm_up(request, True, threading.Event())
    assert ls.counters["warmups_cancelled"] == 1 and ls.counters["warmups_done"] == 0


def test_a_session_goes_back_to_loading_on_a_reload() -> None:
    parts: Any = SimpleNamespace()
    session = Session(parts, parts, parts)  # what it holds does not matter here
    assert isinstance(session.reloading(), Loading) and session.error is None
