"""What the server tells people: messages, problems said once per run, and $/progress.

Callable from any thread (the engine and store threads report too): everything reaches the
client through the event loop (``call_soon``, which drops it once the loop is closed), so the
server's threads never touch the connection themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)

PREFIX = "superposed: "
# Notification: the server's state for editors' status lines (docs/architecture.md, "Status").
STATUS = "superposed/status"
# What the status says of the model now: its name, and (ready) which decode step serves.
Describe = Callable[[], tuple[str, str | None]]


class Notifier:
    """window/showMessage, superposed/status and $/progress for one server run."""

    def __init__(self, server: LanguageServer, describe: Describe) -> None:
        self._server = server
        self._describe = describe
        self._said: set[str] = set()  # problems already shown (once per run)
        self.loop: asyncio.AbstractEventLoop | None = None  # set once the server runs

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run ``callback(*args)`` on the event loop (from any thread); nothing once the loop
        is closed (the server is exiting: a model load or a write finished after ``exit``)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # closed between the check and the call
            loop.call_soon_threadsafe(callback, *args)

    def status(self, state: str, message: str | None = None, percent: int | None = None) -> None:
        """Send superposed/status (from any thread): ``state`` is loading, indexing, ready or
        error; the payload adds the model, a message for people, indexing, a percentage, and,
        ready, which decode step serves (``step``: compiled, or eager until it is built)."""
        self.call_soon(self._status, state, message, percent)

    def _status(self, state: str, message: str | None, percent: int | None) -> None:
        model, step = self._describe()  # on the event loop: the model as it is when sent
        status: dict[str, Any] = {"state": state, "model": model}
        if state == "ready" and step is not None:
            status["step"] = step
        if message is not None:
            status["message"] = message
        if percent is not None:
            status["percent"] = percent
        self._server.protocol.notify(STATUS, status)

    def show(self, kind: types.MessageType, message: str) -> None:
        """``message`` (prefixed with "superposed: ") in the editor."""
        self.call_soon(self._send, kind, message)

    def _send(self, kind: types.MessageType, message: str) -> None:
        self._server.window_show_message(
            types.ShowMessageParams(type=kind, message=PREFIX + message)
        )

    def error(self, message: str) -> None:
        self.show(types.MessageType.Error, message)

    def info(self, message: str) -> None:
        self.show(types.MessageType.Info, message)

    def once(self, message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        """A problem the user must fix (an unusable store): logged, and shown the first time
        in this run only; a request that meets it again says nothing more."""
        log.warning("%s", message)
        self.call_soon(self._show_once, kind, message)

    def _show_once(self, kind: types.MessageType, message: str) -> None:
        if message not in self._said:  # on the event loop: no two threads race here
            self._said.add(message)
            self._send(kind, message)

    async def progress(self, title: str) -> Progress:
        """A $/progress token for one piece of work (no-op where the client has none)."""
        window = self._server.client_capabilities.window
        if not (window and window.work_done_progress):
            return Progress(None, self._server, self.call_soon)
        token = f"superposed-{title}-{uuid.uuid4()}"
        await self._server.work_done_progress.create_async(token)
        return Progress(token, self._server, self.call_soon)


class Progress:
    """begin, report, end of one $/progress token, from any thread."""

    def __init__(
        self, token: str | None, server: LanguageServer, call_soon: Callable[..., None]
    ) -> None:
        self._token = token
        self._server = server
        self._call_soon = call_soon

    def begin(self, message: str) -> None:
        self._send("begin", types.WorkDoneProgressBegin(title="superposed", message=message))

    def report(self, message: str, percentage: int | None = None) -> None:
        self._send("report", types.WorkDoneProgressReport(message=message, percentage=percentage))

    def end(self, message: str) -> None:
        self._send("end", types.WorkDoneProgressEnd(message=message))

    def _send(self, kind: str, value: Any) -> None:
        if self._token is not None:
            self._call_soon(getattr(self._server.work_done_progress, kind), self._token, value)
