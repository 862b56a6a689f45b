"""The server's messages (notifier.py): a problem is shown once per run, every message goes
through the event loop (never from a closed one), progress is a no-op for a client without
it, and the status says the model as it is when sent."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from lsprotocol import types

from lsp_server.runtime.notifier import Notifier


class FakeServer:
    """What Notifier reads of a pygls server: messages shown, capabilities, progress."""

    def __init__(self, progress: bool) -> None:
        self.shown: list[types.ShowMessageParams] = []
        window = types.WindowClientCapabilities(work_done_progress=progress)
        self.client_capabilities = types.ClientCapabilities(window=window)
        self.work_done_progress = self
        self.sent: list[tuple[str, Any]] = []
        self.protocol = self  # notify: superposed/status

    def notify(self, method: str, params: Any) -> None:
        self.sent.append((method, params))

    def window_show_message(self, params: types.ShowMessageParams) -> None:
        self.shown.append(params)

    async def create_async(self, token: str) -> None:
        self.sent.append(("create", token))

    def begin(self, token: str, value: Any) -> None:
        self.sent.append(("begin", value.message))

    def end(self, token: str, value: Any) -> None:
        self.sent.append(("end", value.message))


def notifier_on(server: FakeServer, loop: asyncio.AbstractEventLoop) -> Notifier:
    notifier = Notifier(server, lambda: ("tiny", "eager"))  # type: ignore[arg-type]
    notifier.loop = loop
    return notifier


def test_a_problem_is_shown_once_and_messages_say_whose_they_are() -> None:
    server, loop = FakeServer(progress=False), asyncio.new_event_loop()
    notifier = notifier_on(server, loop)
    notifier.once("store unusable: locked")
    notifier.once("store unusable: locked")
    notifier.error("the model did not load")
    assert server.shown == []  # nothing from the caller's thread: all through the loop
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()
    assert [(m.type, m.message) for m in server.shown] == [
        (types.MessageType.Warning, "superposed: store unusable: locked"),
        (types.MessageType.Error, "superposed: the model did not load"),
    ]


def test_progress_only_for_a_client_that_has_it() -> None:
    async def run(server: FakeServer) -> None:
        notifier = notifier_on(server, asyncio.get_running_loop())
        progress = await notifier.progress("index")
        progress.begin("indexing")
        progress.end("done")
        await asyncio.sleep(0)

    for supported in (False, True):
        server = FakeServer(progress=supported)
        asyncio.run(run(server))
        kinds = [kind for kind, _ in server.sent]
        assert kinds == (["create", "begin", "end"] if supported else [])


def test_the_status_names_the_model_and_the_step_only_when_ready() -> None:
    server, loop = FakeServer(progress=False), asyncio.new_event_loop()
    notifier = notifier_on(server, loop)
    notifier.status("loading", "loading tiny")
    notifier.status("indexing", "1/2 a.py", 50)
    notifier.status("ready")
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()
    assert [params for _, params in server.sent] == [
        {"state": "loading", "model": "tiny", "message": "loading tiny"},
        {"state": "indexing", "model": "tiny", "message": "1/2 a.py", "percent": 50},
        {"state": "ready", "model": "tiny", "step": "eager"},
    ]


def test_a_thread_never_blocks_on_a_closed_event_loop() -> None:
    loop = asyncio.new_event_loop()
    notifier = notifier_on(FakeServer(progress=False), loop)
    loop.close()
    ran: list[int] = []
    thread = threading.Thread(target=notifier.call_soon, args=(ran.append, 1))
    thread.start()
    thread.join(5)
    assert not thread.is_alive() and ran == []  # no "Event loop is closed" from the thread
