"""A request's answer from a session: the one path from a ``Request`` to its drafts.

``answer(session, request, cancel)`` is what the server runs on its engine thread
(model_calls.py), and what ``superposed-lsp complete`` (cli.py) and the demo call directly, so
the three answer alike. In order: the stores that apply to the file (looked up once), the
n-gram source over them, the memory's matches (setting ``memory``), then ``completion.decode``;
all on the request made plain (lsp_server/completion/plain.py: LF line breaks, the usual
indentation),
the drafts then put back in the document's. It raises what decode raises (Cancelled,
EngineError): the caller says what they mean to its user.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from time import perf_counter as now

from lsprotocol import types

from lsp_server.completion.decode import Answer, Sources, decode
from lsp_server.completion.plain import plain_request
from lsp_server.completion.request import Request
from lsp_server.session import Session
from lsp_server.stores.failures import explain
from lsp_server.stores.match_sources import PendingSource
from lsp_server.stores.stores import StoresHere
from ngram_db.errors import NgramStoreError, StoreBusy
from superposed.ngram import MatchSource
from superposed.types import CancelCheck

log = logging.getLogger(__name__)

# A problem the user must fix, said (once, by the server: Notifier.once): (message, kind).
Report = Callable[..., None]
NONE_HERE = StoresHere(None, None)


def unsaid(message: str, *kind: object) -> None:
    """A Report for work done ahead of a request (a warm-up, the typing cache's check): the
    request at the same place says what is wrong."""


def logged(message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
    """A Report outside the server: the log (stderr for the command line)."""
    log.warning("%s", message)


def answer(
    session: Session,
    request: Request,
    cancel: CancelCheck | None = None,
    *,
    report: Report = logged,
    pending: PendingSource | None = None,
) -> Answer:
    """The drafts for ``request`` from ``session`` (see the module).

    ``report``: where a store that cannot be used is said. ``pending``: the
    memory's indexing of the open documents, started when the request came (``start_memory``);
    started here when the setting is on and none is given.
    """
    request, plain = plain_request(request)  # LF and the usual indentation (plain.py)
    decoding = request.settings.decoding
    if not request.due:  # no one waits for it (the command line, work done ahead): whole
        decoding = replace(decoding, answer_within_ms=0)
    here = stores_here(session, request, report)
    ngram = session.stores.source_of(here, decoding.lambdas)
    matches = None
    if decoding.memory:
        matches = memory_matches(session, request, here, pending or start_memory(session, request))
    if decoding.answer_within_ms:  # out that long after it came: the steps end before
        left = request.arrived + decoding.answer_within_ms / 1e3 - session.finishing.seconds
        decoding = replace(decoding, answer_within_ms=max(1, round((left - now()) * 1e3)))
    found = decode(session.engine, request.context, decoding, Sources(ngram, matches), cancel)
    if decoding.answer_within_ms:
        session.finishing.seconds = found.timing_ms.get("finish", 0.0) / 1e3
    back = [replace(s, text=plain.back(s.text)) for s in found.suggestions]
    return replace(found, suggestions=back)  # in the document's line ending and indentation


def stores_here(session: Session, request: Request, report: Report = logged) -> StoresHere:
    """The stores that apply to the request's file (Stores.for_path); none where they cannot
    be used now: a store being created waits for a writer (served without it this time), a
    store that cannot be used is said through ``report``. On the engine thread, where a
    model reload reopens the stores, so that none closes under a decode waiting to run."""
    where = request.where
    try:
        return session.stores.for_path(where.path, where.roots)
    except StoreBusy:
        return NONE_HERE
    except NgramStoreError as err:  # the user must fix it: say so, serve without
        report(f"n-gram store unusable: {explain(err)}", types.MessageType.Error)
        return NONE_HERE


def start_memory(session: Session, request: Request) -> PendingSource:
    """Start indexing the open documents for the request's memory matches, on the memory's
    own thread (while the request waits its turn and the engine prefills); the documents
    as ``answer`` reads them (plain.py)."""
    request = plain_request(request)[0]
    where = request.where
    shared = partial(
        session.shareable.others, roots=where.roots, max_bytes=session.stores.max_file_bytes
    )
    before = len(request.context.before)
    return session.indexes.source_later(where.uri, before, where.documents, shared)


def memory_matches(
    session: Session, request: Request, here: StoresHere, pending: PendingSource
) -> MatchSource | None:
    """The memory's matches: the open documents (``pending``), the stores' indexes and the
    shared indexes (sharedIndexes)."""
    return pending.with_stores(here.present(), session.stores.shared())
