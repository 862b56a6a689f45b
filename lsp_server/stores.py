"""The server's view of the n-gram stores: one codebase store per workspace root, one user store.

A thin layer over ``ngram_db``: it decides which store a file belongs to (the workspace
folder that contains it, else the git repository around it), opens stores lazily, and
combines the codebase and user stores into the n-gram source the engine re-scores with.
Every method here may block (SQLite): the server calls them off the event loop, except
``source_for``, which only opens a store the first time.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lsp_server.engine.ngram import NgramSource
from lsp_server.settings import StoreSettings
from ngram_db import CombinedSource, NgramStore, codebase_db_path, index_repo, user_db_path

log = logging.getLogger(__name__)

ACCEPTED_PREFIX = "accepted:"  # the user store's pseudo-files, one per accepted draft

Progress = Callable[[int, int, str], None]


def repo_root(path: Path) -> Path | None:
    """The nearest folder at or above ``path`` that holds a ``.git``."""
    for folder in [path, *path.parents]:
        if (folder / ".git").exists():
            return folder
    return None


def root_for(path: Path, roots: Sequence[Path]) -> Path | None:
    """The innermost workspace root that contains ``path``, else its git repository."""
    path = path.resolve()
    inside = [r.resolve() for r in roots]
    inside = [r for r in inside if path == r or r in path.parents]
    if inside:
        return max(inside, key=lambda r: len(r.parts))
    return repo_root(path.parent)


class Stores:
    """Opened stores, keyed by codebase root, plus the user store."""

    def __init__(self, tokenizer: Any, settings: StoreSettings) -> None:
        self._tokenizer = tokenizer
        self._settings = settings
        self._codebase: dict[Path, Any] = {}
        self._user: Any = None
        self._lock = threading.Lock()  # opening and swapping stores; SQLite does the rest

    def configure(self, settings: StoreSettings) -> None:
        """New settings: stores reopen on next use."""
        with self._lock:
            self._settings = settings
            self._close_all()

    def _close_all(self) -> None:
        for store in [*self._codebase.values(), self._user]:
            if store is not None and hasattr(store, "close"):
                store.close()
        self._codebase, self._user = {}, None

    def _open(self, path: Path) -> Any:
        path.parent.mkdir(parents=True, exist_ok=True)
        return NgramStore.open(path, self._tokenizer, orders=self._settings.orders)

    def codebase(self, root: Path, create: bool = True) -> Any:
        """The codebase store of ``root`` (None if it does not exist and ``create`` is false)."""
        with self._lock:
            if root not in self._codebase:
                configured = self._settings.codebase_db
                path = Path(configured) if configured else codebase_db_path(root)
                if not create and not path.exists():
                    return None
                self._codebase[root] = self._open(path)
            return self._codebase[root]

    def user(self) -> Any:
        """The user store, or None when disabled."""
        if not self._settings.user_store:
            return None
        with self._lock:
            if self._user is None:
                configured = self._settings.user_db
                path = Path(configured) if configured else user_db_path()
                self._user = self._open(path)
            return self._user

    def source_for(
        self, path: Path | None, roots: Sequence[Path], lambdas: Mapping[int, float]
    ) -> NgramSource | None:
        """The n-gram source for completing in ``path``: its codebase store and the user store.

        Raises NgramStoreError when a store cannot be opened (the message says what to do).
        """
        root = root_for(path, roots) if path is not None else (roots[0] if roots else None)
        store = self.codebase(root) if root is not None else None
        user_store = self.user()
        codebase = store.source(lambdas) if store is not None else None
        user = user_store.source(lambdas) if user_store is not None else None
        if codebase is None:
            return user
        if user is None:
            return codebase
        return CombinedSource(codebase, user, user_weight=self._settings.user_weight)

    def update_file(self, path: Path, text: str, roots: Sequence[Path]) -> None:
        """A saved file's new text replaces its old contribution (codebase and user stores)."""
        root = root_for(path, roots)
        key = str(path.resolve())  # index_repo's keys: absolute, resolved
        if root is not None:
            self.codebase(root).update_file(key, text)
        user = self.user()
        if user is not None:
            user.update_file(key, text)

    def learn_text(self, text: str) -> bool:
        """Add accepted text to the user store; False when the user store is disabled."""
        user = self.user()
        if user is None:
            return False
        # The store counts files exactly: each accepted draft is a pseudo-file of its own.
        user.update_file(f"{ACCEPTED_PREFIX}{uuid.uuid4()}", text)
        return True

    def index_root(self, root: Path, progress: Progress | None = None) -> dict[str, Any]:
        """Index (incrementally) every file of ``root`` into its codebase store."""
        summary = index_repo(root, self.codebase(root), progress=progress or False)
        return summary.as_dict()

    def stats(self, roots: Sequence[Path]) -> dict[str, Any]:
        out: dict[str, Any] = {"codebase": {}, "user": None}
        for root in roots:
            store = self.codebase(root, create=False)
            if store is not None:
                out["codebase"][str(root)] = store.stats()
        user = self.user()
        if user is not None:
            out["user"] = user.stats()
        return out
