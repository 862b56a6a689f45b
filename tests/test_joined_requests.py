"""Which requests are answered from the one in flight (ModelCalls.join): the same text around
the cursor and the same settings; an automatic request from an asked-for one, not the other
way (an automatic request is answered with nothing where the syntax wants nothing)."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from dataclasses import replace
from typing import cast

from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.request import Request
from lsp_server.runtime.model_calls import ModelCalls, place
from lsp_server.runtime.notifier import Notifier
from lsp_server.runtime.scheduler import Scheduler
from lsp_server.session import SessionSlot
from lsp_server.settings import Settings
from lsp_server.workspace import Where

URI = "file:///w/a.py"
NO_NOTIFIER = cast(Notifier, None)  # says nothing here: no job of ModelCalls runs
TEXT = "def f(x):\n    return "


def request(automatic: bool, text: str = TEXT, settings: Settings | None = None) -> Request:
    context = CursorContext.at(text, len(text), "python", automatic)
    return Request(URI, Where(URI, None, [], {URI: text}), context, settings or Settings())


async def joins(flying: Request, newer: Request) -> bool:
    """Whether ``newer`` is answered from ``flying``'s request in flight."""
    scheduler = Scheduler()
    calls = ModelCalls(SessionSlot(), scheduler, NO_NOTIFIER, Counter())
    release = threading.Event()
    where = place(flying, flying.context.automatic)
    task = asyncio.create_task(scheduler.request(URI, lambda cancel: release.wait(5), 0, where))
    await asyncio.sleep(0.01)
    joined = calls.join(newer)
    release.set()
    assert await task is True
    if joined is not None:
        assert await joined is True
    return joined is not None


async def test_an_automatic_request_joins_an_asked_for_one_and_not_the_reverse() -> None:
    assert await joins(request(automatic=False), request(automatic=True))
    assert await joins(request(automatic=True), request(automatic=True))
    assert await joins(request(automatic=False), request(automatic=False))
    assert not await joins(request(automatic=True), request(automatic=False))


async def test_other_text_or_other_settings_join_nothing() -> None:
    assert not await joins(request(False), request(True, TEXT + "x"))
    other = Settings()
    other = replace(other, decoding=replace(other.decoding, k=other.decoding.k + 1))
    assert not await joins(request(False), request(True, settings=other))
