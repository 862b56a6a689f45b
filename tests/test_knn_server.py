"""The server's kNN stores (lsp_server/knn.py): found beside the codebase store,
kept to what the SQLite store still holds, refused when another model made them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from lsp_server.knn import KnnIndexes
from ngram_db.knn_store import KnnStore, Projection, knn_path
from ngram_db.store import FileTokens, NgramStore

HIDDEN = 8


@pytest.fixture()
def store(tmp_path: Path, tokenizer: object) -> Iterator[NgramStore]:
    opened = NgramStore.open(tmp_path / "s.db", tokenizer)
    opened.write(
        [FileTokens("/r/a.py", "sa", np.arange(1, 6)), FileTokens("/r/b.py", "sb", np.arange(1, 4))]
    )
    yield opened
    opened.close()


def write_memory(store: NgramStore, model: str = "m") -> None:
    rng = np.random.default_rng(0)
    states = rng.normal(size=(7, HIDDEN)).astype(np.float32)
    projection = Projection.fit(states, 4)
    header = {"model": model, "tokenizer": store.tokenizer.fingerprint, "keep": "all"}
    memory = KnnStore.empty({**header, "hidden": HIDDEN}, projection)
    memory = memory.with_file(
        "/r/a.py", "sa", projection.reduce(states[:4]), np.array([2, 3, 4, 5]), np.zeros(4, bool)
    )
    memory = memory.with_file(
        "/r/b.py", "sb", projection.reduce(states[4:6]), np.array([2, 3]), np.zeros(2, bool)
    )
    assert store.path is not None
    memory.save(knn_path(store.path))


def test_no_file_beside_the_store_is_no_memory(store: NgramStore) -> None:
    said: list[str] = []
    assert KnnIndexes().for_store(store, "m", store.tokenizer.fingerprint, said.append) is None
    assert said == []


def test_the_memory_is_loaded_once_and_again_after_a_forget(store: NgramStore) -> None:
    write_memory(store)
    memories, said = KnnIndexes(), list[str]()
    fingerprint = store.tokenizer.fingerprint
    first = memories.for_store(store, "m", fingerprint, said.append)
    assert first is not None and len(first) == 6 and said == []
    assert memories.for_store(store, "m", fingerprint, said.append) is first  # cached
    store.forget("/r/a.py")
    after = memories.for_store(store, "m", fingerprint, said.append)
    assert after is not None and after is not first
    assert after.store.shas() == {"/r/b.py": "sb"} and sorted(after.store.tokens.tolist()) == [2, 3]


def test_a_memory_another_model_made_is_refused_with_what_to_do(store: NgramStore) -> None:
    write_memory(store, model="other")
    said: list[str] = []
    assert KnnIndexes().for_store(store, "m", store.tokenizer.fingerprint, said.append) is None
    assert len(said) == 1 and "index-repo --knn --model m" in said[0]


def test_a_damaged_memory_is_refused_and_the_server_goes_on(store: NgramStore) -> None:
    write_memory(store)
    assert store.path is not None
    knn_path(store.path).write_bytes(b"not a zip")
    said: list[str] = []
    assert KnnIndexes().for_store(store, "m", store.tokenizer.fingerprint, said.append) is None
    assert len(said) == 1 and "index-repo --knn" in said[0]


def test_a_saved_files_old_positions_leave_until_index_repo_knn_runs_again(
    store: NgramStore,
) -> None:
    """A save changes the file's content in the SQLite store: the memory's positions of its
    old text no longer serve (the save does not run the model over it; the others serve)."""
    write_memory(store)
    memories = KnnIndexes()
    fingerprint = store.tokenizer.fingerprint
    before = memories.for_store(store, "m", fingerprint, print)
    assert before is not None and len(before) == 6
    store.write([FileTokens("/r/b.py", "sb2", np.arange(1, 9))])
    after = memories.for_store(store, "m", fingerprint, print)
    assert after is not None and after.store.shas() == {"/r/a.py": "sa"} and len(after) == 4
