"""The next-edits protocol over the server's documents: what server.py's handlers call.

- request ``superposed/nextEdits`` ``{textDocument: {uri}, position}`` -> ``{edits: [EDIT]}``,
  the best first; ``{edits: []}`` when the setting is off or the document is not open;
- notification ``superposed/nextEditsReady`` ``{textDocument: {uri, version}, edits}``, sent
  when a change ends (PAUSE_S after its last didChange, or at a change at another place) and
  there are proposals, or there were and they went (then ``edits: []``);
- commands ``superposed.nextEditAccepted`` / ``superposed.nextEditDismissed`` ``[{id}]``.

EDIT: ``{id, textDocument: {uri, version}, range, newText, oldText, origin, label}``
(proposals.Proposal.to_json). Proposals are computed on a thread (the privacy verdicts may
run git), then checked against the documents as they are by then: a stale one is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pygls.workspace import TextDocument, Workspace

from lsp_server.next_edits.log import Change
from lsp_server.next_edits.proposals import PAUSE_S, Doc, NextEdits, Proposal
from lsp_server.next_edits.workspace import finder_for
from lsp_server.settings import NextEditSettings
from lsp_server.shareable import Shareable
from lsp_server.workspace import path_of

log = logging.getLogger(__name__)

NEXT_EDITS = "superposed/nextEdits"
NEXT_EDITS_READY = "superposed/nextEditsReady"
CMD_NEXT_EDIT_ACCEPTED = "superposed.nextEditAccepted"
CMD_NEXT_EDIT_DISMISSED = "superposed.nextEditDismissed"


def _row(change: Change) -> int:
    return change.after.count("\n", 0, change.start)


class NextEditService:
    """Feeds the log from the documents' events and answers the protocol (see the module)."""

    def __init__(
        self,
        workspace: Callable[[], Workspace],
        settings: Callable[[], NextEditSettings],
        max_bytes: Callable[[], int],
        roots: Callable[[], list[Path]],
        notify: Callable[[str, dict[str, Any]], None],
        counters: Counter[str],
        session: Callable[[], Any] = lambda: None,
    ) -> None:
        self.edits = NextEdits()
        self.shareable = Shareable()
        self._workspace, self._settings, self._notify = workspace, settings, notify
        self._max_bytes, self._roots, self._counters = max_bytes, roots, counters
        self._session = session  # the loaded model's stores and memory (scope workspace)
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._shown: dict[str, bool] = {}  # uri -> the last notification had edits
        self._sequence: dict[str, int] = {}  # uri -> the last ended change's number
        self._tasks: set[asyncio.Task[None]] = set()
        # One thread, so that ended changes derive their patterns in the order they ended.
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="next-edits")
        self.last_ms: float | None = None  # the last ended change's time to its proposals

    # -- the documents' events (on the event loop) -------------------------------------

    def opened(self, document: TextDocument) -> None:
        self.edits.log.open(document.uri, document.source)

    def changed(self, document: TextDocument) -> None:
        """didChange: the log takes the text; the change ends at a pause or a jump."""
        if not self._settings().on:
            return
        uri = document.uri
        ended = self.edits.log.changed(uri, document.source, document.version or 0)
        if ended is not None:
            self._ended(ended)
        loop = asyncio.get_running_loop()
        if (timer := self._timers.pop(uri, None)) is not None:
            timer.cancel()
        self._timers[uri] = loop.call_later(PAUSE_S, self._paused, uri)

    def closed(self, uri: str) -> None:
        if (timer := self._timers.pop(uri, None)) is not None:
            timer.cancel()
        self.edits.closed(uri)
        self.shareable.forget(uri)
        self._shown.pop(uri, None)
        self._sequence.pop(uri, None)

    def _paused(self, uri: str) -> None:
        self._timers.pop(uri, None)
        if (ended := self.edits.log.end(uri)) is not None:
            self._ended(ended)

    def _ended(self, change: Change) -> None:
        number = self._sequence.get(change.uri, 0) + 1
        self._sequence[change.uri] = number
        task = asyncio.get_running_loop().create_task(self._propose_after(change, number))
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        """A task's end: a bug in it is logged (nothing awaits it), the server goes on."""
        self._tasks.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("next edits failed after a change", exc_info=error)

    async def _propose_after(self, change: Change, number: int) -> None:
        """A change ended: its pattern, the proposals, and the notification."""
        began = time.perf_counter()
        documents = self._documents()
        language = documents[change.uri].language if change.uri in documents else change.uri
        loop = asyncio.get_running_loop()
        derived = await loop.run_in_executor(self._thread, self.edits.ended, change, language)
        self._counters[f"next edits: {derived.reason}"] += 1
        row = _row(change)
        proposals = await loop.run_in_executor(
            self._thread, self._propose, change.uri, row, documents
        )
        if self._sequence.get(change.uri) != number:
            return  # a later change ended meanwhile: its notification says more
        proposals = self.edits.fresh(proposals, self._documents())
        self.last_ms = (time.perf_counter() - began) * 1000
        if not proposals and not self._shown.get(change.uri):
            return
        self._shown[change.uri] = bool(proposals)
        self._notify(
            NEXT_EDITS_READY,
            {
                "textDocument": {"uri": change.uri, "version": change.version},
                "edits": self._json(proposals),
            },
        )

    # -- the protocol -----------------------------------------------------------------------

    async def request(self, document: TextDocument | None, row: int) -> dict[str, Any]:
        """superposed/nextEdits at ``row`` of ``document`` (None: not open)."""
        if document is None or not self._settings().on:
            return {"edits": []}
        documents = self._documents()
        loop = asyncio.get_running_loop()
        proposals = await loop.run_in_executor(
            self._thread, self._propose, document.uri, row, documents
        )
        return {"edits": self._json(self.edits.fresh(proposals, self._documents()))}

    def accepted(self, args: tuple[Any, ...]) -> dict[str, Any]:
        edit_id = _edit_id(args)
        return {"accepted": edit_id is not None and self.edits.accepted(edit_id)}

    def dismissed(self, args: tuple[Any, ...]) -> dict[str, Any]:
        edit_id = _edit_id(args)
        return {"dismissed": edit_id is not None and self.edits.dismissed(edit_id)}

    def stats(self) -> dict[str, Any]:
        return {
            "lastMs": self.last_ms,
            "patterns": [p.label for p in self.edits.patterns()],
            "accepts": dict(self.edits.accepts),
            "dismissals": dict(self.edits.dismissals),
        }

    # -- helpers ------------------------------------------------------------------------------

    def _documents(self) -> dict[str, Doc]:
        """The open documents now (pygls keeps them current), by the client's URI."""
        return {
            d.uri: Doc(d.source, d.version, d.language_id or d.uri)
            for d in self._workspace().text_documents.values()
            if d.version is not None
        }

    def _propose(self, uri: str, row: int, documents: dict[str, Doc]) -> list[Proposal]:
        """On a thread: the proposals, with the privacy verdicts they need."""
        roots, max_bytes = self._roots(), self._max_bytes()

        def shareable(other: str, text: str) -> bool:
            return self.shareable.reason(other, text, roots, max_bytes) is None

        scope, files = self._settings().scope, None
        if scope == "workspace":
            files = finder_for(self._session(), path_of(uri), roots, max_bytes)
        return self.edits.propose(uri, row, documents, scope, shareable, files)

    def _json(self, proposals: list[Proposal]) -> list[dict[str, Any]]:
        units = self._workspace().position_codec.client_num_units
        return [p.to_json(units) for p in proposals]


def _edit_id(args: tuple[Any, ...]) -> str | None:
    """The ``id`` of a command's ``[{"id": ID}]``; None (logged) for anything else."""
    first = args[0] if args else None
    edit_id = first.get("id") if isinstance(first, dict) else None
    if not isinstance(edit_id, str):
        log.warning('a next-edit command wants [{"id": ID}], got %r', args)
        return None
    return edit_id
