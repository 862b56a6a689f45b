"""The server's kNN stores (index-repo --knn's, one beside each codebase store), loaded once.

``index-repo --knn`` writes ``<store>.knn.npz`` (ngram_db/knn_store.py). A request with
``knnWeight`` > 0 reads the one beside its codebase store: loaded at the first such request
and again when the file or the store changed (a save, a forget), restricted to the files
the SQLite store still holds with the same content, so that what a forget erased is never
proposed. A store made by another model or tokenizer is refused with one message.

Not done: a save does not run the model over the saved file (index-repo --knn again does);
until then the saved file's old positions are left out (its content changed), the others
serve.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from ngram_db.errors import NgramStoreError
from ngram_db.knn_store import KnnIndex, KnnStore, KnnStoreError, knn_path
from ngram_db.store import NgramStore

log = logging.getLogger(__name__)

Key = tuple[int, int, object]  # the file's mtime_ns and size, the store's change counter


class KnnIndexes:
    """Loaded hidden-state indexes by store file, each with what it was loaded from."""

    def __init__(self) -> None:
        self._loaded: dict[Path, tuple[Key, KnnIndex | None]] = {}
        self._lock = threading.Lock()

    def for_store(
        self, store: NgramStore | None, model: str, tokenizer: str, failed: Callable[[str], None]
    ) -> KnnIndex | None:
        """The index beside ``store`` (None: there is none, or it cannot serve ``model``;
        ``failed`` gets the reason once per file state)."""
        if store is None or store.path is None:
            return None
        path = knn_path(store.path)
        try:
            st = path.stat()
        except OSError:
            return None  # no --knn run for this store
        try:
            key: Key = (st.st_mtime_ns, st.st_size, store.change_counter())
        except NgramStoreError:
            return None
        with self._lock:
            held = self._loaded.get(path)
            if held is not None and held[0] == key:
                return held[1]
            index = self._load(path, store, model, tokenizer, failed)
            self._loaded[path] = (key, index)
            return index

    @staticmethod
    def _load(
        path: Path, store: NgramStore, model: str, tokenizer: str, failed: Callable[[str], None]
    ) -> KnnIndex | None:
        try:
            loaded = KnnStore.load(path)
        except (KnnStoreError, OSError) as err:
            failed(f"kNN store unusable: {err}")
            return None
        header = loaded.header
        if header.get("model") != model or header.get("tokenizer") != tokenizer:
            failed(
                f"kNN store {path} was made by model {header.get('model')!r}, not "
                f"{model!r}: run index-repo --knn --model {model} to rebuild it"
            )
            return None
        alive = {p: sha for p, (sha, _tokens) in store.file_table().items()}
        return KnnIndex(loaded.restricted_to(alive))
