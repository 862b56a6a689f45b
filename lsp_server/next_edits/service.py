"""The next-edits protocol over the server's documents: what server.py's handlers call.

- request ``superposed/nextEdits`` ``{textDocument: {uri}, position}`` -> ``{edits: [EDIT]}``,
  the best first; ``{edits: []}`` when the setting is off or the document is not open;
- notification ``superposed/nextEditsReady`` ``{textDocument: {uri, version}, edits}``, sent
  when a change ends (PAUSE_S after its last didChange, NAME_PAUSE_S when that left the caret
  right after a name's character, or at a change at another place) and there are
  proposals, or there were and they went (then ``edits: []``);
- commands ``superposed.nextEditAccepted`` / ``superposed.nextEditDismissed`` ``[{id}]``.

EDIT: ``{id, textDocument: {uri, version}, range, newText, oldText, origin, label}``
(proposals.Proposal.to_json). Proposals are computed on a thread (the privacy verdicts may
run git), then checked against the documents as they are by then: a stale one is dropped.

Ended changes are computed one at a time, the newest only: one that ends replaces any older
one still waiting. A change that ends alone is computed at once; one that ends less than
SETTLE_S after the one before belongs to a burst, computed once SETTLE_S passed without
another. A burst (127 changes in 3 s) costs its first computation and its newest, not one
each; its last proposals come at most SETTLE_S and two computations after it, and it keeps
no thread busy for its length. A request never waits behind that work (a thread of its
own). Documents over ``maxFileBytes`` are not followed, searched or parsed (a parse holds
the GIL: 0.1 s for 400 KB); a closed one's state goes; a setting change applies to the
documents open (``reconfigure``).
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
from lsp_server.next_edits.proposals import NAME_PAUSE_S, PAUSE_S, Doc, NextEdits, Proposal
from lsp_server.next_edits.workspace import finder_for
from lsp_server.session import ServerNow, SessionSlot
from lsp_server.settings import NextEditSettings
from lsp_server.stores.shareable_documents import Shareable
from lsp_server.workspace import path_of, roots_of

log = logging.getLogger(__name__)

NEXT_EDITS = "superposed/nextEdits"
NEXT_EDITS_READY = "superposed/nextEditsReady"
CMD_NEXT_EDIT_ACCEPTED = "superposed.nextEditAccepted"
CMD_NEXT_EDIT_DISMISSED = "superposed.nextEditDismissed"
# Changes that end closer together than this are a burst: only its newest is computed, this
# long after it (typing at two places in turn ends a change at each keystroke, 30 ms apart).
SETTLE_S = 0.15


def _row(change: Change) -> int:
    return change.after.count("\n", 0, change.start)


def over(text: str, max_bytes: int) -> bool:
    """Whether ``text`` is over ``max_bytes`` of UTF-8 (a character is 1 to 4 bytes: the
    bytes are counted only when the bounds do not decide), as the stores measure a file."""
    if len(text) > max_bytes:
        return True
    return 4 * len(text) > max_bytes and len(text.encode("utf-8", "surrogatepass")) > max_bytes


class NextEditService:
    """Feeds the log from the documents' events and answers the protocol (see the module)."""

    def __init__(
        self,
        server: ServerNow,
        notify: Callable[[str, dict[str, Any]], None],
        counters: Counter[str],
        slot: SessionSlot | None = None,
    ) -> None:
        self.edits = NextEdits()
        self.shareable = Shareable()
        self._server, self._notify, self._counters = server, notify, counters
        self._slot = slot or SessionSlot()  # the loaded model's stores and memory (scope workspace)
        self._on = self._settings().on  # the setting as last applied (reconfigure)
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._shown: dict[str, bool] = {}  # uri -> the last notification had edits
        self._newest: Change | None = None  # the newest ended change not computed yet
        self._last_end = float("-inf")  # the event loop's time when a change last ended
        self._burst = False  # it ended less than SETTLE_S after the one before
        self._worker: asyncio.Task[None] | None = None  # computes the ended changes
        # Two threads: the worker uses one at a time (patterns derived in the order their
        # changes ended), a request the other.
        self._thread = ThreadPoolExecutor(max_workers=2, thread_name_prefix="next-edits")
        self.last_ms: float | None = None  # the last ended change's time to its proposals

    def _settings(self) -> NextEditSettings:
        return self._server.settings.next_edits

    def _workspace(self) -> Workspace:
        return self._server.workspace

    def _max_bytes(self) -> int:
        return self._server.settings.stores.max_file_bytes

    def _roots(self) -> list[Path]:
        return roots_of(self._server.workspace)

    # -- the documents' events (on the event loop) -------------------------------------

    def opened(self, document: TextDocument) -> None:
        if self._settings().on:
            self._follow(document)

    def changed(self, document: TextDocument) -> None:
        """didChange: the log takes the text; the change ends at a pause or a jump."""
        if not self._settings().on or not self._follow(document, changed=True):
            return
        uri = document.uri
        if (timer := self._timers.pop(uri, None)) is not None:
            timer.cancel()
        ended = self.edits.log.changed(uri, document.source, document.version or 0)
        if ended is not None:
            self._ended(ended)
        pause = NAME_PAUSE_S if self.edits.log.in_name(uri) else PAUSE_S
        self._timers[uri] = asyncio.get_running_loop().call_later(pause, self._paused, uri)

    def closed(self, uri: str) -> None:
        """didClose (or a document that grew over ``maxFileBytes``): its state goes."""
        if (timer := self._timers.pop(uri, None)) is not None:
            timer.cancel()
        if self._newest is not None and self._newest.uri == uri:
            self._newest = None
        self.edits.closed(uri)
        self.shareable.forget(uri)
        self._shown.pop(uri, None)

    def reconfigure(self) -> None:
        """The settings changed: next edits turned on follow the open documents from their
        text now (a document edited while they were off kept its text from its opening, and
        its first change spanned every edit since: "spans lines", never a proposal); turned
        off, every document's state goes."""
        on = self._settings().on
        if on == self._on:
            return
        self._on = on
        if on:
            for document in list(self._workspace().text_documents.values()):
                self._follow(document)
            return
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._shown.clear()
        self._newest = None
        self.edits.clear()

    def _follow(self, document: TextDocument, changed: bool = False) -> bool:
        """Whether ``document`` is followed (not over ``maxFileBytes``); at its opening (not
        ``changed``) the log takes its text. One that is over it is forgotten."""
        if over(document.source, self._max_bytes()):
            self.closed(document.uri)
            return False
        if not changed:
            self.edits.log.open(document.uri, document.source)
        return True

    def _paused(self, uri: str) -> None:
        self._timers.pop(uri, None)
        if (ended := self.edits.log.end(uri)) is not None:
            self._ended(ended)

    def _ended(self, change: Change) -> None:
        """A change ended: it waits for the worker, in place of any older one still waiting."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        self._newest, self._burst = change, now - self._last_end < SETTLE_S
        self._last_end = now
        if self._worker is None:
            self._worker = loop.create_task(self._work())

    async def _work(self) -> None:
        """Computes the newest ended change until none waits: at once when it ended alone,
        else (a burst) once SETTLE_S passed without another (see the module)."""
        loop = asyncio.get_running_loop()
        try:
            while self._newest is not None:
                while self._burst and (wait := self._last_end + SETTLE_S - loop.time()) > 0:
                    await asyncio.sleep(wait)
                change, self._newest = self._newest, None
                if change is None:
                    continue  # its document closed meanwhile
                try:
                    await self._propose_after(change)
                except Exception:  # a bug: logged (nothing awaits the worker), the next goes on
                    log.exception("next edits failed after a change")
        finally:
            self._worker = None

    def _superseded(self, change: Change) -> bool:
        """Whether a later change of the same document ended meanwhile (its proposals say
        more), or the document or next edits went."""
        newer = self._newest is not None and self._newest.uri == change.uri
        documents = self._workspace().text_documents.values()
        return newer or not self._on or all(d.uri != change.uri for d in documents)

    async def _propose_after(self, change: Change) -> None:
        """A change ended: its pattern, the proposals, and the notification."""
        began = time.perf_counter()
        documents = self._documents()
        language = documents[change.uri].language if change.uri in documents else change.uri
        loop = asyncio.get_running_loop()
        derived = await loop.run_in_executor(self._thread, self.edits.ended, change, language)
        self._counters[f"next edits: {derived.reason}"] += 1
        if self._superseded(change):
            return
        row = _row(change)
        proposals = await loop.run_in_executor(
            self._thread, self._propose, change.uri, row, documents
        )
        if self._superseded(change):
            return
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
        """The editor applied a proposal (its didChange came first): that change is a whole
        edit, never a name half typed, so it ends now and the next proposals follow."""
        edit_id = _edit_id(args)
        proposal = self.edits.accepted(edit_id) if edit_id is not None else None
        if proposal is not None and (timer := self._timers.get(proposal.site.uri)) is not None:
            timer.cancel()
            self._paused(proposal.site.uri)
        return {"accepted": proposal is not None}

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
        """The open documents now (pygls keeps them current), by the client's URI, but those
        over ``maxFileBytes``: they are neither searched nor parsed."""
        max_bytes = self._max_bytes()
        return {
            d.uri: Doc(d.source, d.version, d.language_id or d.uri)
            for d in self._workspace().text_documents.values()
            if d.version is not None and not over(d.source, max_bytes)
        }

    def _propose(self, uri: str, row: int, documents: dict[str, Doc]) -> list[Proposal]:
        """On a thread: the proposals, with the privacy verdicts they need."""
        roots, max_bytes = self._roots(), self._max_bytes()

        def shareable(other: str, text: str) -> bool:
            return self.shareable.reason(other, text, roots, max_bytes) is None

        scope, files = self._settings().scope, None
        if scope == "workspace":
            files = finder_for(self._slot.state, path_of(uri), roots, max_bytes)
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
