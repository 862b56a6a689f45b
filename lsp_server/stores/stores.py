"""The server's view of the n-gram stores: one codebase store per workspace root, one user store.

A thin layer over ``ngram_db``: it decides which store a file belongs to (the workspace
folder that contains it), opens stores lazily, and combines the codebase and user stores
into the n-gram source the engine re-scores with. Every method here may block (SQLite): the
server calls them off the event loop, except ``source_for``, which only opens a store the
first time.

What is learned: a saved file is counted only when its resolved path lies inside a workspace
folder (not through ``..`` or a symbolic link that leads elsewhere, not a file of another
repository) and index-repo would index it (no secrets, no ignored or generated files,
nothing over ``maxFileBytes``). ``never_learned`` is that rule, for saves, accepted drafts
and the open documents that drafts elsewhere copy from. A store that cannot be used
is reported once (through ``report``) and left out; the other store keeps serving.

A store file replaced under the server (``index-repo --rebuild``, which the store-damaged
message advises, deletes it and writes a new one) is noticed at each use: an open store whose
path now holds another file (or none) is closed and the path opened again before the next read
or write, and a write that committed while the file was being replaced runs again on the new
file, so a save counted as indexed is in the store on disk. A store left out as broken is tried
again once its path holds another file.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from lsp_server.settings import StoreSettings
from lsp_server.stores.failures import FailSafeSource, explain
from lsp_server.stores.shared_indexes import SharedIndexes
from lsp_server.stores.write_queue import TRANSIENT
from lsp_server.workspace import (
    UnresolvablePath,
    never_learned,
    placed,
    resolved,
    root_for,
    workspace_root,
)
from ngram_db import CombinedSource, NgramStore, codebase_db_path, index_repo, user_db_path
from ngram_db.errors import NgramStoreError, StoreBusy, StoreClosed, StoreFull
from ngram_db.suffix_store import FileId, file_id
from ngram_db.tokenizer import as_tokenizer
from ngram_db.tokenizer_stores import erase, for_tokenizer
from superposed.ngram import MatchSource, NgramSource

log = logging.getLogger(__name__)

ACCEPTED_PREFIX = "accepted:"  # the user store's pseudo-files, one per accepted draft
# Accepted drafts kept in the user store, newest first. A draft with its line is about 20-40
# tokens, so 1,000 of them weigh about as much as one mid-sized source file: enough to learn
# the user's recent habits, small enough that old drafts (and anything typed by mistake) fade.
ACCEPTED_KEEP = 1_000
INDEX_RESUMES = 3  # an index run resumes this often after its store was reopened under it

Progress = Callable[[int, int, str], None]
Report = Callable[[str], None]  # a problem the user must fix, said once per problem
T = TypeVar("T")


class StoresHere(NamedTuple):
    """The stores that apply in one file (Stores.for_path); None: none, or not usable."""

    codebase: NgramStore | None
    user: NgramStore | None

    def present(self) -> list[NgramStore]:
        return [s for s in self if s is not None]


class Stores:
    """Opened stores, keyed by codebase root, plus the user store."""

    def __init__(self, tokenizer: Any, settings: StoreSettings, report: Report | None = None):
        self._tokenizer = tokenizer
        self._settings = settings
        self._report = report or (lambda message: log.error("%s", message))
        self._codebase: dict[Path, NgramStore] = {}
        self._user: NgramStore | None = None
        self._broken: dict[Path, NgramStoreError] = {}  # store file -> why it is not used
        self._broken_ids: dict[Path, FileId | None] = {}  # the broken file then (file_id)
        self._lock = threading.RLock()  # opening and swapping stores; SQLite does the rest
        self._closed = False  # close() was called: the server opened new Stores instead
        self._shared = SharedIndexes(self._report)  # the sharedIndexes setting's indexes

    @property
    def max_file_bytes(self) -> int:
        """The size limit of what is learned (maxFileBytes), for ``never_learned``'s callers."""
        return self._settings.max_file_bytes

    @functools.cached_property
    def fingerprint(self) -> str:
        """The fingerprint of the tokenizer the stores count with."""
        return str(as_tokenizer(self._tokenizer).fingerprint)

    def shared(self) -> list[MatchSource]:
        """The sharedIndexes setting's usable indexes as one new request sees them: within
        its sharedBudgetMs, their matches weighted by sharedWeight
        (lsp_server/stores/shared_indexes.py);
        call once a request."""
        settings = self._settings
        return self._shared.for_request(
            settings.shared_indexes,
            self.fingerprint,
            settings.shared_budget_ms,
            weight=settings.shared_weight,
        )

    def configure(self, settings: StoreSettings) -> None:
        """New settings. A store closes (and reopens on next use) only when its file or its
        orders changed: a weight is not a path, and closing a store under a write made the
        write fail. Stores that failed are tried again."""
        with self._lock:
            old, self._settings = self._settings, settings
            reopen_codebase = (old.codebase_db, old.orders) != (
                settings.codebase_db,
                settings.orders,
            )
            reopen_user = (old.user_db, old.orders, old.user_store) != (
                settings.user_db,
                settings.orders,
                settings.user_store,
            )
            closing = [*self._codebase.values()] if reopen_codebase else []
            if reopen_codebase:
                self._codebase = {}
            if reopen_user and self._user is not None:
                closing.append(self._user)
                self._user = None
            self._broken.clear()
        for store in closing:  # waits for a transaction in progress; later calls reopen
            store.close()

    def close(self) -> None:
        """Close every store (the model, and so the tokenizer, is being replaced); later calls
        that open a store raise StoreClosed."""
        with self._lock:
            self._closed = True
            closing = [*self._codebase.values(), *([self._user] if self._user else [])]
            self._codebase, self._user = {}, None
        for store in closing:
            store.close()
        self._shared.close()  # the shared indexes' engine processes

    # -- opening, and leaving out what fails ----------------------------------------------

    def _open(self, path: Path) -> NgramStore | None:
        """The store at ``path``, or None (reported once) when it cannot be used.

        StoreBusy passes through: a lock is not a broken store, the caller retries; and so
        does StoreClosed once these Stores are closed.
        """
        if self._closed:
            raise StoreClosed(f"the stores were closed before {path} could be opened")
        if path in self._broken:
            if file_id(path) == self._broken_ids.get(path):
                return None
            del self._broken[path]  # another file now (index-repo --rebuild): try it
        try:
            store = NgramStore.open(path, self._tokenizer, orders=self._settings.orders)
        except StoreBusy:
            raise
        except NgramStoreError as err:
            self._broken[path] = err
            self._broken_ids[path] = file_id(path)
            self._report(f"n-gram store not used: {explain(err)}")
            return None
        for notice in store.notices:
            self._report(notice)
        return store

    def _failed(self, store: NgramStore, err: NgramStoreError) -> None:
        """A store failed while in use: close it and leave it out until settings change."""
        if isinstance(err, TRANSIENT):
            return  # another writer, a full disk, a store reopened: the file is fine
        with self._lock:
            if store.path is None or store.path in self._broken:
                return
            self._broken[store.path] = err
            self._broken_ids[store.path] = file_id(store.path)
        self._drop(store)
        store.close()
        self._report(f"n-gram store not used: {explain(err)}")

    def _use(self, store: NgramStore, action: Callable[[], T], write: bool = True) -> T | None:
        """Run ``action`` on ``store``; None if the store failed.

        The TRANSIENT errors pass through, for the write queue to retry the write; a full
        disk is also said (once per store and run of failures). A write that committed to a
        file replaced meanwhile (index-repo --rebuild) raises StoreClosed too: the queue runs
        it again, on the new file.
        """
        try:
            result = action()
            if write and store.replaced():
                self._retire(store)
                raise StoreClosed(f"{store.name} was replaced during this write: written again")
        except TRANSIENT as err:
            if isinstance(err, StoreFull):
                self._report(f"n-gram store cannot be written now: {explain(err)}")
            if isinstance(err, StoreClosed):
                self._drop(store)  # the next call opens the file the settings name now
            raise
        except NgramStoreError as err:
            self._failed(store, err)
            return None
        return result

    def _read(self, store: NgramStore, action: Callable[[], T]) -> T | None:
        """``_use`` for reads: None, the store left as it is, when it was just closed."""
        try:
            return self._use(store, action, write=False)
        except StoreClosed:
            return None

    def _drop(self, store: NgramStore) -> None:
        """Forget an open store object (it stays usable by whoever holds it)."""
        with self._lock:
            self._codebase = {r: s for r, s in self._codebase.items() if s is not store}
            if self._user is store:
                self._user = None

    def _retire(self, store: NgramStore) -> None:
        """A store whose file was replaced on disk: forget it and close it (a call still on
        it raises StoreClosed: a write runs again, a read answers without it). Not under
        ``_lock``: closing waits for a transaction in progress."""
        log.info("n-gram store %s was replaced on disk: opened again", store.name)
        self._drop(store)
        store.close()

    @contextlib.contextmanager
    def _replaced_closed(self) -> Iterator[list[NgramStore]]:
        """A list for the stores found replaced while ``_lock`` is held; retired after."""
        stale: list[NgramStore] = []
        try:
            yield stale
        finally:
            for store in stale:
                self._retire(store)

    @staticmethod
    def _unless_replaced(store: NgramStore | None, stale: list[NgramStore]) -> bool:
        """Whether ``store`` is open and its file the one at its path (else it goes to
        ``stale``, to be retired once the lock is released)."""
        if store is None:
            return False
        if store.replaced():
            stale.append(store)
            return False
        return True

    def _codebase_path(self, root: Path) -> Path:
        """The setting's file, else the default one of this tokenizer (tokenizer_stores.py)."""
        configured = self._settings.codebase_db
        return (
            Path(configured)
            if configured
            else for_tokenizer(codebase_db_path(root), self.fingerprint)
        )

    def _user_path(self) -> Path:
        configured = self._settings.user_db
        return Path(configured) if configured else for_tokenizer(user_db_path(), self.fingerprint)

    def codebase(self, root: Path, create: bool = True) -> NgramStore | None:
        """The codebase store of ``root``; None if it cannot be used, or if it does not exist
        and ``create`` is false."""
        with self._replaced_closed() as stale, self._lock:
            if not self._unless_replaced(self._codebase.get(root), stale):
                self._codebase.pop(root, None)
                path = self._codebase_path(root)
                if not create and not path.exists():
                    return None
                store = self._open(path)
                if store is None:
                    return None
                self._codebase[root] = store
            return self._codebase[root]

    def user(self) -> NgramStore | None:
        """The user store, or None when disabled or unusable."""
        if not self._settings.user_store:
            return None
        with self._replaced_closed() as stale, self._lock:
            if not self._unless_replaced(self._user, stale):
                self._user = self._open(self._user_path())
            return self._user

    # -- reading ----------------------------------------------------------------------------

    def for_path(self, path: Path | None, roots: Sequence[Path]) -> StoresHere:
        """The stores that apply to a request or a match in ``path``: the one answer to "which
        stores apply here" (the n-gram source and the memory both ask it).

        The codebase store is the innermost workspace folder's (created on first use); a file
        outside the workspace reads its repository's store only if one exists; no path: the
        first folder's. The user store unless it is off. None where a store is not usable
        (reported once). StoreBusy passes through: creating a store waits for a writer.
        """
        if path is None:
            root, create = (roots[0] if roots else None), True
        else:
            inside = workspace_root(path, roots)
            root, create = (inside, True) if inside else (root_for(path, roots), False)
        codebase = self.codebase(root, create) if root is not None else None
        return StoresHere(codebase, self.user())

    def source_for(
        self, path: Path | None, roots: Sequence[Path], lambdas: Mapping[int, float]
    ) -> NgramSource | None:
        """The n-gram source for completing in ``path``: its stores (``for_path``) combined."""
        try:
            here = self.for_path(path, roots)
        except StoreBusy:  # creating a store waits for a writer: serve without it this time
            return None
        return self.source_of(here, lambdas)

    def source_of(self, here: StoresHere, lambdas: Mapping[int, float]) -> NgramSource | None:
        """The n-gram source over the stores ``here`` (``for_path``'s): codebase and user
        combined, a store that fails while in use answering "no support"."""
        codebase = self._guarded(here.codebase, lambdas) if here.codebase is not None else None
        user = self._guarded(here.user, lambdas) if here.user is not None else None
        if codebase is None:
            return user
        if user is None:
            return codebase
        return CombinedSource(codebase, user, user_weight=self._settings.user_weight)

    def _guarded(self, store: NgramStore, lambdas: Mapping[int, float]) -> NgramSource:
        return FailSafeSource(store.source(lambdas), lambda err: self._failed(store, err))

    # -- writing (StoreBusy passes through: the caller queues and retries) -----------------

    def update_file(self, path: Path, text: str, roots: Sequence[Path]) -> str | None:
        """A saved file's new text replaces its old contribution (codebase and user stores).

        Returns why it was not learned (its old contribution is then removed), or None.
        A write that may succeed later (TRANSIENT) raises: the write queue retries it.
        """
        place = placed(path, roots)
        if place.path is None or place.root is None:
            if place.reason == "symlink loop":
                self._report(f"not learned: {path} goes through a loop of symbolic links")
            return place.reason
        real, root = place.path, place.root
        key = str(real)  # index_repo's keys: absolute, resolved
        reason = never_learned(path, text, roots, self._settings.max_file_bytes, place)
        written = True
        for store in (self.codebase(root), self.user()):
            if store is None:
                continue
            write = store.update_file if reason is None else store.remove_file
            args = (key, text) if reason is None else (key,)
            written &= self._use(store, partial(write, *args)) is not None
        if reason is None and not written:
            return "store not usable"  # said once by _failed
        return reason

    def learn_text(
        self, text: str, path: Path | None, roots: Sequence[Path], name: str | None = None
    ) -> str | None:
        """Add a draft accepted in the file ``path`` (``text``: the draft with its line) to
        the user store; returns why it was not learned, or None.

        A draft obeys a save's rules (``never_learned``): those of the file it went into,
        and the content scan and the size limit (maxFileBytes) on ``text`` itself.
        ``name`` identifies the draft (a retry with the same name writes nothing twice).
        Only the newest ACCEPTED_KEEP drafts are kept.
        """
        user = self.user()
        if user is None:
            return "the user store is off or not usable"
        reason = never_learned(path, text, roots, self._settings.max_file_bytes)
        if reason is not None:
            return reason
        name = name or accepted_name()
        # The store counts files exactly: each accepted draft is a pseudo-file of its own.
        if self._use(user, lambda: user.update_file(name, text)) is None:
            return "store not usable"  # said once by _failed
        self._use(user, lambda: user.prune(ACCEPTED_PREFIX, ACCEPTED_KEEP))
        return None

    def forget(self, path: Path | None, roots: Sequence[Path]) -> dict[str, Any]:
        """Erase ``path`` (a file or folder) from the user store and its codebase store;
        None: clear the whole user store. Returns what was removed, per store."""
        removed: dict[str, int] = {}
        user = self.user()
        if path is None:
            if user is not None:
                removed[str(user.path)] = self._use(user, user.clear) or 0
                removed |= self._erase_elsewhere(None, None)
            return {"removed": removed}
        try:
            target = resolved(path)
        except UnresolvablePath:  # a key can still be erased by the path as given
            target = path.absolute()
        root = workspace_root(target, roots)
        stores = [user, self.codebase(root, create=False) if root is not None else None]
        for store in stores:
            if store is not None:
                removed[str(store.path)] = self._use(store, partial(store.forget, target)) or 0
        return {"removed": removed | self._erase_elsewhere(target, root)}

    def _erase_elsewhere(self, target: Path | None, root: Path | None) -> dict[str, int]:
        """Forget ``target`` (None: everything) in the default stores other models'
        tokenizers built too (tokenizer_stores.py): erased whichever model learned it."""
        settings, removed = self._settings, dict[str, int]()
        bases = [user_db_path()] if settings.user_store and not settings.user_db else []
        if target is not None and root is not None and not settings.codebase_db:
            bases.append(codebase_db_path(root))
        for base in bases:
            try:
                removed |= erase(base, target, skip=for_tokenizer(base, self.fingerprint))
            except NgramStoreError as err:
                self._report(f"n-gram store not erased: {explain(err)}")
        return removed

    def index_root(self, root: Path, progress: Progress | None = None) -> dict[str, Any]:
        """Index (incrementally) every file of ``root`` into its codebase store.

        A store closed under the run (the settings named another store file) is reopened and
        the run resumes: files already indexed are skipped by their content hash.
        """
        for _ in range(INDEX_RESUMES + 1):
            try:
                store = self.codebase(root)
            except StoreBusy as err:
                return {"error": explain(err)}
            if store is None:
                return {"error": self.problem(self._codebase_path(root))}
            try:
                summary = index_repo(root, store, progress=progress or False).as_dict()
                if not store.replaced():
                    return summary
                log.info("index of %s: its store file was replaced, indexing again", root)
            except StoreClosed:
                log.info("index of %s: its store was reopened, resuming", root)
            except NgramStoreError as err:
                self._failed(store, err)
                return {"error": explain(err)}
        return {"error": f"the store of {root} kept changing during the index run: run it again"}

    def problem(self, path: Path) -> str:
        """Why the store at ``path`` is not used."""
        err = self._broken.get(path)
        return (
            f"n-gram store not used: {explain(err)}"
            if err
            else f"n-gram store {path} not available"
        )

    def stats(self, roots: Sequence[Path]) -> dict[str, Any]:
        """Each store's statistics, or ``{"path", "error"}`` for a store that is not used."""
        codebase: dict[str, Any] = {}
        for root in roots:
            entry = self._stats(self._codebase_path(root), partial(self.codebase, root, False))
            if entry is not None:
                codebase[str(root)] = entry
        user = self._stats(self._user_path(), self.user) if self._settings.user_store else None
        return {"codebase": codebase, "user": user}

    def _stats(self, path: Path, get: Callable[[], NgramStore | None]) -> dict[str, Any] | None:
        try:
            store = get()
        except StoreBusy as err:
            return {"path": str(path), "error": explain(err)}
        except StoreClosed:  # these stores were just replaced (a model reload)
            return {"path": str(path), "error": "the stores are being reopened: ask again"}
        if store is None:
            return (
                {"path": str(path), "error": self.problem(path)} if path in self._broken else None
            )
        stats = self._read(store, store.stats)
        return stats if stats is not None else {"path": str(path), "error": self.problem(path)}


def accepted_name() -> str:
    """A new accepted draft's pseudo-file name; names sort by time (oldest first)."""
    return f"{ACCEPTED_PREFIX}{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
