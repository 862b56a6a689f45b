"""The server's messages (notifier.py): a problem is shown once per run, every message goes
through the event loop, and progress is a no-op for a client without it."""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types

from lsp_server.notifier import Notifier


class FakeServer:
    """What Notifier reads of a pygls server: messages shown, capabilities, progress."""

    def __init__(self, progress: bool) -> None:
        self.shown: list[types.ShowMessageParams] = []
        window = types.WindowClientCapabilities(work_done_progress=progress)
        self.client_capabilities = types.ClientCapabilities(window=window)
        self.work_done_progress = self
        self.sent: list[tuple[str, Any]] = []

    def window_show_message(self, params: types.ShowMessageParams) -> None:
        self.shown.append(params)

    async def create_async(self, token: str) -> None:
        self.sent.append(("create", token))

    def begin(self, token: str, value: Any) -> None:
        self.sent.append(("begin", value.message))

    def end(self, token: str, value: Any) -> None:
        self.sent.append(("end", value.message))


def test_a_problem_is_shown_once_and_messages_say_whose_they_are() -> None:
    server, queued = FakeServer(progress=False), []
    notifier = Notifier(server, lambda fn, *args: queued.append((fn, args)))  # type: ignore[arg-type]
    notifier.once("store unusable: locked")
    notifier.once("store unusable: locked")
    notifier.error("the model did not load")
    assert server.shown == []  # nothing from the caller's thread: all through the loop
    for fn, args in queued:
        fn(*args)
    assert [(m.type, m.message) for m in server.shown] == [
        (types.MessageType.Warning, "superposed: store unusable: locked"),
        (types.MessageType.Error, "superposed: the model did not load"),
    ]


def test_progress_only_for_a_client_that_has_it() -> None:
    for supported in (False, True):
        server = FakeServer(progress=supported)
        notifier = Notifier(server, lambda fn, *args: fn(*args))  # type: ignore[arg-type]
        progress = asyncio.run(notifier.progress("index"))
        progress.begin("indexing")
        progress.end("done")
        kinds = [kind for kind, _ in server.sent]
        assert kinds == (["create", "begin", "end"] if supported else [])
