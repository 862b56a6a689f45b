"""Files older versions left beside a store: forgetting deletes them, unread (issue 51 item 2).

The kNN store (``index-repo --knn``) was retired in issue 53, but a store written before
keeps its ``<store>.knn.npz`` (and maybe a ``.tmp`` sibling of an interrupted write): each
holds the indexed files' tokens and paths. Every way to forget (the library's forget and
clear, ``index-repo --forget`` and ``--clear``, ``--rebuild``, the server's superposed.forget)
deletes them; after it, every file beside the store is decoded and none holds the
forgotten file.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from lsp_server.settings import StoreSettings
from lsp_server.stores.stores import Stores
from ngram_db import cli as index_repo_cli
from ngram_db.paths import user_db_path
from ngram_db.records import pack_ids
from ngram_db.store import NgramStore
from ngram_db.tokenizer import ByteTokenizer

BYTES = ByteTokenizer()
SECRET = "def rotate(key):\n    return vault.unseal(key, passphrase='blue-heron-417')\n"
KEPT = "def render(page):\n    return template.expand(page, columns=3)\n"


def secret_ids() -> np.ndarray:
    return BYTES.encode_batch([SECRET])[0]


def write_old_knn_file(store: Path, secret_path: str) -> list[Path]:
    """``<store>.knn.npz`` as index-repo --knn wrote it (ngram_db/knn_store.py at 9e635f3:
    numpy's format, the files' paths and their positions' next tokens), and the ``.tmp`` of
    a write it did not finish; returns both."""
    arrays = {
        "header": np.array(json.dumps({"model": "smollm2-135m", "format": 1})),
        "tokens": secret_ids().astype(np.int64),
        "owner": np.zeros(len(secret_ids()), dtype=np.int32),
        "paths": np.array([secret_path], dtype=str),
        "shas": np.array(["0" * 64], dtype=str),
    }
    done, half = Path(f"{store}.knn.npz"), Path(f"{store}.knn.npzab12cd.tmp")
    with done.open("wb") as f:
        np.savez(f, allow_pickle=False, **arrays)
    half.write_bytes(done.read_bytes()[:-120])  # all but the end of its zip directory
    return [done, half]


def patterns(secret_path: str) -> list[bytes]:
    """How a side file could hold the secret file: its text, its path, its token ids as the
    store packs them, as int32 (the suffix index) and as int64 (the kNN file)."""
    ids = secret_ids()
    middle = ids[4:-4]
    return [
        SECRET.encode(),
        secret_path.encode(),
        secret_path.encode("utf-32-le"),  # numpy's str arrays
        pack_ids(ids),
        middle.astype("<i4").tobytes(),
        middle.astype("<i8").tobytes(),
    ]


def decoded(path: Path) -> list[bytes]:
    """A file's bytes, and each array's bytes where it is a zip (numpy's .npz)."""
    raw = path.read_bytes()
    out = [raw]
    if zipfile.is_zipfile(io.BytesIO(raw)):
        with np.load(io.BytesIO(raw), allow_pickle=False) as arrays:
            out += [np.ascontiguousarray(arrays[name]).tobytes() for name in arrays.files]
    return out


def holders(store: Path, secret_path: str) -> list[str]:
    """The files beside ``store`` (its name with anything after it) that hold the secret file;
    the store itself also by what it says it holds."""
    found = []
    for path in sorted(store.parent.glob(f"{store.name}*")):
        if any(p in blob for blob in decoded(path) for p in patterns(secret_path)):
            found.append(path.name)
    if store.is_file():
        with NgramStore.open(store, BYTES) as opened:
            if secret_path in opened.paths():
                found.append(f"{store.name} (its files)")
    return found


def filled(store: Path, secret_path: str) -> list[Path]:
    with NgramStore.open(store, BYTES) as opened:
        opened.update_file(secret_path, SECRET)
        opened.update_file("/ws/kept.py", KEPT)
        opened.checkpoint()
    return write_old_knn_file(store, secret_path)


def library_forget(store: Path, secret_path: str) -> None:
    with NgramStore.open(store, BYTES) as opened:
        assert opened.forget(secret_path) == 1


def library_clear(store: Path, secret_path: str) -> None:
    with NgramStore.open(store, BYTES) as opened:
        assert opened.clear() == 2


def cli_forget(store: Path, secret_path: str) -> None:
    assert index_repo_cli.main([secret_path, "--forget", "--db", str(store)]) == 0


def cli_clear(store: Path, secret_path: str) -> None:
    assert index_repo_cli.main(["--clear", "--db", str(store)]) == 0


def rebuild(store: Path, secret_path: str) -> None:
    NgramStore.open(store, BYTES, rebuild=True).close()


@pytest.mark.parametrize(
    "forget",
    [library_forget, library_clear, cli_forget, cli_clear, rebuild],
    ids=lambda f: f.__name__,
)
def test_every_forget_deletes_an_older_versions_knn_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forget: Callable[[Path, str], None]
) -> None:
    monkeypatch.setattr(index_repo_cli, "load_tokenizer", lambda model: BYTES)
    store, secret_path = tmp_path / "codebase.sqlite", str(tmp_path / "ws" / "secret.py")
    leftovers = filled(store, secret_path)
    assert {p.name for p in leftovers} <= set(holders(store, secret_path))  # the check can fail
    forget(store, secret_path)
    assert holders(store, secret_path) == []
    assert not any(p.exists() for p in leftovers)


def test_index_repo_forget_without_a_store_deletes_its_leftover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store deleted by hand, as docs/privacy.md once advised, left the kNN file."""
    monkeypatch.setattr(index_repo_cli, "load_tokenizer", lambda model: BYTES)
    store, secret_path = tmp_path / "codebase.sqlite", str(tmp_path / "ws" / "secret.py")
    leftovers = write_old_knn_file(store, secret_path)
    assert index_repo_cli.main([secret_path, "--forget", "--db", str(store)]) == 0
    assert not any(p.exists() for p in leftovers) and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("with_store", [True, False], ids=["store", "store deleted by hand"])
def test_index_repo_forget_on_the_default_user_store_deletes_its_leftover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_store: bool
) -> None:
    """``--forget --scope user`` without ``--db``: the default store (one per tokenizer since
    issue 56) goes through another path than ``--db``; the leftover goes there too."""
    monkeypatch.setattr(index_repo_cli, "load_tokenizer", lambda model: BYTES)
    monkeypatch.setenv("SUPERPOSED_DATA_DIR", str(tmp_path / "data"))
    store, secret_path = user_db_path(), str(tmp_path / "ws" / "secret.py")
    store.parent.mkdir(parents=True)
    leftovers = filled(store, secret_path) if with_store else write_old_knn_file(store, secret_path)
    assert index_repo_cli.main([secret_path, "--forget", "--scope", "user"]) == 0
    assert holders(store, secret_path) == []
    assert not any(p.exists() for p in leftovers)


def test_the_servers_forget_deletes_the_leftovers_of_both_stores(tmp_path: Path) -> None:
    """superposed.forget (Learning.forget runs Stores.forget): the user store and the file's
    codebase store."""
    ws = tmp_path / "ws"
    ws.mkdir()
    secret = ws / "secret.py"
    cache, data = tmp_path / "cache" / "codebase.sqlite", tmp_path / "data" / "user.sqlite"
    stores = Stores(BYTES, StoreSettings(codebase_db=str(cache), user_db=str(data)))
    try:
        assert stores.update_file(secret, SECRET, [ws]) is None
        assert stores.update_file(ws / "kept.py", KEPT, [ws]) is None
        leftovers = [
            *write_old_knn_file(cache, str(secret)),
            *write_old_knn_file(data, str(secret)),
        ]
        result = stores.forget(secret, [ws])
    finally:
        stores.close()
    assert set(result["removed"].values()) == {1}  # from both stores
    assert not any(p.exists() for p in leftovers)
    assert holders(cache, str(secret)) == [] and holders(data, str(secret)) == []
