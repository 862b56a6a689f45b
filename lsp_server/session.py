"""The server's state: the loaded model's ``Session``, or why there is none yet.

A ``Session`` is the engine, the stores that count with its tokenizer and the memory's
indexes (suffix indexes over those stores and the open documents): plain data. ``load``
builds it in one piece on the engine thread and the loader (loader.py) swaps it in with one
assignment, so work that took ``server.session`` reads an engine, stores and indexes that
belong together.
Until a session is in, the slot holds ``Loading`` (the model loads) or ``Failed`` (it did
not, and why). What does the work takes the session and the request: ``answer.answer``
(through model_calls.ModelCalls, which alone says "not ready"), warmup.Warmer, ahead.DraftsAhead.

The stores open before the model, with its tokenizer alone, and outlive a session: they
are ``server.learning``'s (learning.py), which the session's stores are when it is built.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from lsp_server.models import load_engine
from lsp_server.settings import ModelSettings, Settings
from lsp_server.stores.match_indexes import MatchIndexes
from lsp_server.stores.shareable_documents import Shareable
from lsp_server.stores.stores import Stores
from ngram_db.tokenizer import as_tokenizer
from superposed.api import Engine
from superposed.gguf_convert import Progress

if TYPE_CHECKING:
    from pygls.workspace import Workspace


@dataclass
class Finishing:
    """How long the work after a due answer's last decode step took the last time (the
    clean-up, the parse check, the ranking: decode.run's "finish"): the next due answer's
    steps end that much before it is due (answer.answer)."""

    seconds: float = 0.0


@dataclass(frozen=True)
class Session:
    """The loaded engine, its stores and its match indexes, swapped in whole (see the module)."""

    engine: Engine
    stores: Stores
    indexes: MatchIndexes  # the memory's suffix indexes: the stores' files, the open documents
    # the open documents that other documents' drafts may copy from (a save's rules)
    shareable: Shareable = field(default_factory=Shareable)
    finishing: Finishing = field(default_factory=Finishing)  # a due answer's last work
    error = None  # the load did not fail

    def status(self) -> tuple[str, str | None]:
        """superposed/status's state and message."""
        return "ready", None

    def reloading(self) -> State:
        """The slot while a new load runs: it is loading."""
        return Loading()


class NotReady:
    """The session slot without a model (Loading, Failed)."""

    error: str | None = None  # why the load failed (Failed)

    def status(self) -> tuple[str, str | None]:
        return "loading", None

    def reloading(self) -> State:
        """A new load keeps a failed load's error until it ends (the stores stay shut to
        early saves, and the status says error)."""
        return self


class Loading(NotReady):
    """No session yet: the model loads (or the server waits for ``initialized`` to load it).
    Saves are kept for the stores, which open before the model."""


class Failed(NotReady):
    """The load failed: ``error`` says why and what to do. Saves are not kept: no stores
    will open until the settings name a model that loads."""

    def __init__(self, error: str) -> None:
        self.error = error

    def status(self) -> tuple[str, str | None]:
        return "error", self.error


State = Session | NotReady  # what the session slot holds: a Session, Loading or Failed


class SessionSlot:
    """The server's one session slot, the object every service that uses a session holds.

    ``state`` is Loading until a model is loaded, then its Session, or Failed. The loader
    alone puts a new one in (``swap``: one assignment, on the engine thread), so a reload
    changes it here once for every service; a service reads ``state`` when its work runs
    and keeps no session of its own."""

    def __init__(self) -> None:
        self.state: State = Loading()

    def swap(self, state: State) -> None:
        self.state = state


class ServerNow(Protocol):
    """What a service reads of the server as it is when its work runs: the settings
    (replaced whole when the client sends new ones) and the editor's workspace (the open
    documents, the folders; pygls makes it at ``initialize``). The server is one."""

    settings: Settings

    @property
    def workspace(self) -> Workspace: ...


# Where to warm once a session is in: (uri, offset or None for the document's end, resting).
Place = tuple[str, int | None, bool]


def ready(state: State) -> Session | None:
    """The session in the slot; None while there is none (Loading, Failed)."""
    return state if isinstance(state, Session) else None


def describe(state: State, model: str) -> tuple[str, str | None]:
    """The model for superposed/status: its name and decode step once loaded, else the
    settings' ``model`` name."""
    if (session := ready(state)) is None:
        return model, None
    return session.engine.name, session.engine.decode_step()


def model_stats(state: State, model: str) -> dict[str, Any]:
    """superposed.stats' model fields (``model``: the settings' name, until one is loaded)."""
    if (session := ready(state)) is None:
        return {
            "ready": False,
            "model": model,
            "error": state.error,
            "compiledStep": None,
            "decodeStep": None,
            "compiledCalls": 0,
        }
    engine = session.engine
    return {
        "ready": True,
        "model": engine.name,
        "error": None,
        "compiledStep": engine.compile_status(),
        # What decodes the drafts now: the compiled step once built, else the eager one.
        "decodeStep": engine.decode_step(),
        "compiledCalls": engine.compiled_calls,
    }


def load(
    model: ModelSettings,
    stores: Stores | None,
    open_stores: Callable[[Callable[[], Any]], Stores | None],
    progress: Progress | None = None,
) -> Session:
    """On the engine thread: the model's session (EngineError: the model cannot load).

    ``stores``: those open now; they are kept when they count with the model's tokenizer,
    else ``open_stores`` opens them with it. ``progress`` hears how the load goes.
    """
    engine = load_engine(model, progress)
    if stores is None or stores.fingerprint != as_tokenizer(engine.tokenizer).fingerprint:
        stores = open_stores(lambda: engine.tokenizer)
    assert stores is not None  # the loaded model's tokenizer always opens them
    return Session(engine, stores, MatchIndexes(engine.tokenizer))


def resident_mb() -> dict[str, float | None]:
    """This process's resident set now and at its peak, in MiB (None where unknown)."""
    peak: float | None = None
    now: float | None = None
    try:
        import resource

        scale = 2**20 if sys.platform == "darwin" else 2**10  # ru_maxrss: bytes or KiB
        peak = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale, 1)
        with open("/proc/self/statm") as statm:  # Linux: pages
            now = round(int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)
    except (ImportError, OSError, ValueError):
        pass
    if peak is not None and now is not None:
        peak = max(peak, now)  # the kernel's high-water mark can lag the current size
    return {"rss": now, "peak": peak}
