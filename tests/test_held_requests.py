"""Inline requests made while the model loads (scheduler.HeldRequests, issue 52): the newest
of each document waits for the load and is answered once a model is in, so ghost text comes
without another keystroke; older ones, and those whose document changed, closed or whose
cursor moved, are answered empty at once, as is every one when the load fails."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from types import SimpleNamespace
from typing import Any

from lsprotocol import types

from lsp_server import server as handlers
from lsp_server.completion.cleanup import Suggestion
from lsp_server.runtime.scheduler import HeldRequests
from lsp_server.server import SuperposedServer
from lsp_server.session import Failed, Loading
from lsp_server.workspace import doc_key
from tests.test_not_ready import END, TEXT, URI, not_ready_server

KEY = doc_key(URI)
DRAFT = Suggestion("x + 1", -1.0)


def loading_server() -> tuple[SuperposedServer, list[Any]]:
    """A server whose model loads (initialized), its model calls recorded and answered
    with DRAFT."""
    ls = not_ready_server(Loading())
    ls.loader.started = True
    calls: list[Any] = []

    async def answer(uri: str, context: Any) -> list[Suggestion]:
        calls.append(context.before)
        return [DRAFT]

    ls._suggest = answer  # type: ignore[method-assign]
    return ls, calls


def inline(position: types.Position = END) -> types.InlineCompletionParams:
    kind = types.InlineCompletionTriggerKind.Automatic
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=URI),
        position=position,
        context=types.InlineCompletionContext(trigger_kind=kind),
    )


async def held(ls: SuperposedServer, params: types.InlineCompletionParams) -> asyncio.Task[Any]:
    """The inline request as a task, once it is held (the loop runs until it is)."""
    task = asyncio.create_task(handlers.inline_completion(ls, params))
    for _ in range(1000):  # turns of the event loop, not time
        if KEY in ls.held and not task.done():
            return task
        await asyncio.sleep(0)
    raise AssertionError("the request was not held")


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


def texts(result: types.InlineCompletionList) -> list[str]:
    return [str(item.insert_text) for item in result.items]


def test_a_request_made_while_loading_is_answered_once_the_model_is_in() -> None:
    ls, calls = loading_server()

    async def scenario() -> None:
        task = await held(ls, inline())
        assert calls == []  # nothing is answered while the model loads
        ls.slot.state = SimpleNamespace()  # type: ignore[assignment]  # a model is in
        ls._loaded()  # the loader's "ready", on the event loop
        result = await task
        assert texts(result) == ["x + 1"] and calls == [TEXT]

    run(scenario)
    assert ls.counters["held_while_loading"] == 1 and ls.counters["not_ready"] == 0


def test_only_the_newest_request_of_a_document_waits() -> None:
    ls, calls = loading_server()

    async def scenario() -> None:
        older = await held(ls, inline())
        newer = asyncio.create_task(handlers.inline_completion(ls, inline()))
        assert (await older).items == []  # answered empty at once: the newer one waits
        assert not newer.done() and KEY in ls.held
        ls.slot.state = SimpleNamespace()  # type: ignore[assignment]
        ls._loaded()
        assert texts(await newer) == ["x + 1"] and calls == [TEXT]

    run(scenario)


def test_a_change_a_close_or_a_move_answers_the_held_request_empty() -> None:
    ls, calls = loading_server()
    change = types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=TEXT + "x")],
    )
    closing = types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri=URI))
    document = SimpleNamespace(uri=URI)

    def rest(line: int, character: int) -> None:
        at = SimpleNamespace(line=line, character=character)
        handlers.cursor_rest(ls, SimpleNamespace(textDocument=document, position=at))

    async def scenario() -> None:
        task = await held(ls, inline())
        rest(END.line, END.character)  # the cursor rests where it asked: still held
        assert not task.done()
        rest(0, 0)  # it moved
        assert (await task).items == []
        task = await held(ls, inline())
        handlers.did_change(ls, change)
        assert (await task).items == []
        task = await held(ls, inline(types.Position(line=1, character=5)))
        handlers.did_close(ls, closing)
        assert (await task).items == []

    run(scenario)
    assert calls == [] and ls.counters["held_answered_empty"] == 3


def test_a_failed_load_answers_every_held_request_empty() -> None:
    ls, calls = loading_server()

    async def scenario() -> None:
        task = await held(ls, inline())
        ls.slot.state = Failed("no model named x: check superposed.model")
        ls.loader._failed()  # the loader's "failed", on the event loop
        assert (await task).items == []

    run(scenario)
    assert calls == []


def test_a_plain_completion_and_a_failed_load_do_not_wait() -> None:
    """A completion popup is asked again as the user types (isIncomplete); a failed load
    will not end: both go on at once (to answer nothing without a model)."""
    ls, calls = loading_server()
    document = types.TextDocumentIdentifier(uri=URI)
    plain = types.CompletionParams(text_document=document, position=END)

    async def at_once(request: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(request)
        for _ in range(1000):  # turns of the event loop, not time
            if task.done():
                return
            assert KEY not in ls.held
            await asyncio.sleep(0)
        raise AssertionError("the request did not end")

    async def scenario() -> None:
        await at_once(handlers.completion(ls, plain))
        ls.slot.state = Failed("no model named x: check superposed.model")
        await at_once(handlers.inline_completion(ls, inline()))

    run(scenario)
    assert calls == [TEXT, TEXT] and ls.counters["held_while_loading"] == 0


def test_a_cancelled_held_request_lets_go_of_its_place() -> None:
    """$/cancelRequest cancels the handler's task: the document holds nothing after."""
    held_requests = HeldRequests()

    async def scenario() -> None:
        task = asyncio.create_task(held_requests.wait(KEY))
        await asyncio.sleep(0)
        assert KEY in held_requests
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert KEY not in held_requests

    run(scenario)
