"""The next draft, computed ahead when a draft is accepted (issue 24, "accept -> next").

After an accept the user usually wants the next piece at once: the continuation of the line,
or the next line once they press Enter. llama.vim and llama.vscode request it speculatively,
copilot.lua has ``trigger_on_accept``. Here the accept command says where the draft went in,
so the server knows the document as it is after the accept (``after_accept``) and decodes a
request there on the engine thread, before the editor asks. The KV cache already holds the
prompt up to the accepted text, so this costs a few prefill tokens and the decode steps.

``Ahead`` keeps at most one such job per document:

- a request whose text before the cursor continues the job's (the same place, or the user
  typed on along a draft, e.g. Enter and the indentation) waits for the job and answers from
  its drafts through the typing-along cache, without a model call of its own;
- a request anywhere else cancels it, in its document or in another: it decodes for a place
  the user left, and would hold the engine thread from the request until it ended;
- a newer accept replaces it;
- a job that finishes untaken leaves its drafts in the typing-along cache only if nothing
  used that cache since the accept (``shown``): the user may have typed along older drafts,
  or undone the accept, meanwhile.

No pygls and no model here: the server says what to run (server.py), this keeps which job
still matters. ``DraftsAhead`` puts the typing-along cache and these jobs together: the drafts a
request gets before, or instead of, a model call of its own.
``TypingCache`` (the typing-along cache) keeps the last suggestions per document.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from lsp_server.completion.cleanup import Suggestion
from lsp_server.completion.cursor import CursorContext
from lsp_server.runtime.scheduler import Scheduler


def after_accept(source: str, offset: int, text: str, language: str = "") -> CursorContext:
    """The cursor after ``text`` was accepted at ``offset`` of the document ``source``.

    The editor may or may not have sent the insertion yet when the accept command arrives
    (VS Code flushes its changes before a command, other clients need not): if ``source``
    already holds ``text`` at ``offset`` it is the document after the accept, else the
    text is inserted there. ``language``: the document's (CursorContext.language).
    """
    offset = max(0, min(offset, len(source)))
    if not source.startswith(text, offset):
        source = source[:offset] + text + source[offset:]
    return CursorContext.at(source, offset + len(text), language, automatic=True)


@dataclass
class _Job:
    context: CursorContext
    cancel: threading.Event
    future: Future[Any]
    shown: object  # the typing-along cache's entry when the job started (TypingCache.entry)
    completes: bool  # the whole drafts of those shown (cut at a deadline): they replace them


class Ahead:
    """The speculative request per document: started on accept, taken by the next request."""

    def __init__(self) -> None:
        self._jobs: dict[str, _Job] = {}

    def start(
        self,
        key: str,
        context: CursorContext,
        cancel: threading.Event,
        future: Future[Any],
        shown: object = None,
        completes: bool = False,
    ) -> None:
        """``future`` decodes at ``context`` (its ``cancel`` stops it); it replaces the
        document's earlier job. ``shown``: the typing-along cache's entry now; ``completes``:
        the job decodes whole the drafts shown there, cut at their deadline."""
        self.cancel(key)
        self._jobs[key] = _Job(context, cancel, future, shown, completes)

    def take(self, key: str, context: CursorContext) -> tuple[CursorContext, Future[Any]] | None:
        """The document's job if a request at ``context`` can answer from it (its text
        before the cursor continues the job's, and the rest of the line is the same); the job
        is the request's now. Otherwise the job is cancelled, and None."""
        job = self._jobs.pop(key, None)
        if job is None:
            return None
        if _continues(context, job.context):
            return job.context, job.future
        job.cancel.set()
        return None

    def leave_others(self, key: str) -> int:
        """A request came in document ``key``: every other document's job decodes for a place
        the user left (a cut answer's rest there ran ~700 ms while the next file's first
        request waited for the engine thread), so it is cancelled; how many were."""
        others = [other for other in self._jobs if other != key]
        for other in others:
            self.cancel(other)
        return len(others)

    def leave(self, key: str, context: CursorContext) -> None:
        """A request at ``context`` was answered without the job (typed along older
        drafts): the job is cancelled unless ``context`` continues its place."""
        job = self._jobs.get(key)
        if job is not None and not _continues(context, job.context):
            self.cancel(key)

    def finished(self, key: str, future: Future[Any], shown: object) -> CursorContext | None:
        """``future`` is done: where it decoded, if it is still the document's job (not
        taken, cancelled or replaced, which it no longer is) and the typing-along cache's
        entry is still ``shown``, the one it started with, or the job completes the drafts
        shown there (typing along them kept the job: what it decoded continues them); else
        None."""
        job = self._jobs.get(key)
        if job is None or job.future is not future:
            return None
        del self._jobs[key]
        return job.context if job.shown is shown or job.completes else None

    def cancel(self, key: str) -> None:
        job = self._jobs.pop(key, None)
        if job is not None:
            job.cancel.set()

    def clear(self) -> None:
        for key in list(self._jobs):
            self.cancel(key)


def _continues(context: CursorContext, place: CursorContext) -> bool:
    """A request at ``context`` continues the place ``place``: the text before its cursor
    extends ``place``'s and the rest of the line is the same."""
    return context.before.startswith(place.before) and context.after == place.after


class DraftsAhead:
    """Per document: the drafts shown (typing-along cache) and the accept's job (Ahead)."""

    def __init__(
        self, scheduler: Scheduler, counters: Counter[str], call_soon: Callable[..., None]
    ) -> None:
        self.cache = TypingCache()
        self.ahead = Ahead()
        self._scheduler = scheduler
        self._counters = counters
        self._call_soon = call_soon  # onto the event loop, from any thread
        self._erased: dict[str, object] = {}  # key -> erasure stamp at its last request

    async def without_model(
        self, key: str, context: CursorContext, erased: object = None
    ) -> list[Suggestion] | None:
        """The drafts for a request at ``context`` that need no model call of its own: the
        shown ones typed along, or the accept's job's; None: the request decodes.

        ``erased``: the stores' erasure stamp now (MatchIndexes.erasures). When it moved since the
        document's last request, text was forgotten (by the editor or ``index-repo
        --forget``) and the drafts shown or drafted ahead may hold it: they go.
        """
        if self._erased.get(key, erased) != erased:
            self.cache.forget(key)
            self.ahead.cancel(key)
            self._counters["dropped_after_forget"] += 1
        self._erased[key] = erased
        self._counters["ahead_left"] += self.ahead.leave_others(key)
        along = self.cache.along(key, context)
        if along is not None:
            self._counters["typed_along"] += 1
            self.ahead.leave(key, context)  # an accept's job for another place is stale
            return along
        if (taken := self.ahead.take(key, context)) is None:
            return None
        where, job = taken
        answer = await self._scheduler.adopt(key, job)
        if answer is None:  # a newer request came meanwhile
            return None
        self.cache.remember(key, where.before, answer.suggestions)
        along = self.cache.along(key, context)  # None: none fit, the request decodes its own
        if along is not None:
            self._counters["answered_ahead"] += 1
        return along

    def remember(self, key: str, before: str, suggestions: list[Suggestion]) -> None:
        self.cache.remember(key, before, suggestions)

    def draft_ahead(
        self,
        key: str,
        context: CursorContext,
        job: Callable[[threading.Event], Any],
        completes: bool = False,
        ready: Callable[[], None] | None = None,
    ) -> None:
        """On accept (or after an answer cut at its deadline, ``completes``: the drafts shown
        at ``context`` decoded whole): run ``job(cancel)`` (a decode at ``context``) on the
        engine thread next; the next request there takes its drafts, or they wait in the
        typing-along cache (then ``ready()`` is called: the editor may ask again)."""
        cancel = threading.Event()
        self._scheduler.stop_warming()  # the engine thread is this job's next
        future = self._scheduler.submit(job, cancel)
        self.ahead.start(key, context, cancel, future, self.cache.entry(key), completes)
        self._counters["decoded_whole" if completes else "drafted_ahead"] += 1
        future.add_done_callback(lambda _: self._call_soon(self._done, key, future, ready))

    def _done(self, key: str, job: Future[Any], ready: Callable[[], None] | None = None) -> None:
        """On the event loop: an accept's job finished; if no request took it, its drafts
        answer the next request there through the typing-along cache."""
        where = self.ahead.finished(key, job, self.cache.entry(key))
        if where is None or job.cancelled() or job.exception() is not None:
            return
        if (answer := job.result()) is not None:
            self.cache.remember(key, where.before, answer.suggestions)
            self._counters["ahead_ready"] += 1
            if ready is not None:
                ready()

    def forget(self, key: str) -> None:
        """The document closed: its drafts and its job go."""
        self.cache.forget(key)
        self.ahead.cancel(key)
        self._erased.pop(key, None)

    def clear(self) -> None:
        """The settings changed: drafts shown under the old ones (k, method) are stale."""
        self.cache.clear()
        self.ahead.clear()


@dataclass
class _Shown:
    before: str
    suggestions: list[Suggestion]


class TypingCache:
    """The last suggestions per document, to answer while the user types along a draft."""

    def __init__(self) -> None:
        self._shown: dict[str, _Shown] = {}

    def remember(self, uri: str, before: str, suggestions: list[Suggestion]) -> None:
        if suggestions:
            self._shown[uri] = _Shown(before, suggestions)
        else:
            self._shown.pop(uri, None)

    def forget(self, uri: str) -> None:
        self._shown.pop(uri, None)

    def entry(self, uri: str) -> object:
        """What the cache holds for ``uri`` now, as a token: every remember or typed-along
        answer replaces it, so an unchanged token means the cache was not used since."""
        return self._shown.get(uri)

    def clear(self) -> None:
        self._shown.clear()

    def along(self, uri: str, context: CursorContext) -> list[Suggestion] | None:
        """What is left of the shown drafts after the characters typed since; None: no match."""
        shown = self._shown.get(uri)
        if shown is None or not context.before.startswith(shown.before):
            return None
        typed = context.before[len(shown.before) :]
        rest = [
            Suggestion(s.text[len(typed) :], s.score, s.source)
            for s in shown.suggestions
            if s.text.startswith(typed) and s.text[len(typed) :].strip()
        ]
        if not rest:
            return None
        self._shown[uri] = _Shown(context.before, rest)
        return rest
