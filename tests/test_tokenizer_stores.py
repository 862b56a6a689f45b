"""A default store per tokenizer (issue 56 item 5): switching models strands nothing. The
model in use opens its own tokenizer's user and codebase stores, finds the first model's
again when it switches back, and forgetting reaches every tokenizer's store."""

from __future__ import annotations

from pathlib import Path

import pytest

from lsp_server.settings import StoreSettings
from lsp_server.stores.stores import Stores
from ngram_db import ByteTokenizer, NgramStore
from ngram_db.cli import main as index_repo
from ngram_db.paths import codebase_db_path, user_db_path
from ngram_db.tokenizer_stores import erase, for_tokenizer, tokenizer_stores

A, B = ByteTokenizer(0), ByteTokenizer(1)  # two models' tokenizers: other ids, other fingerprints


@pytest.fixture()
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default store locations under tmp_path (SUPERPOSED_CACHE_DIR, _DATA_DIR)."""
    monkeypatch.setenv("SUPERPOSED_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SUPERPOSED_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def learned(path: Path, tokenizer: ByteTokenizer) -> list[str]:
    with NgramStore.open(path, tokenizer) as store:
        return store.paths()


def test_each_tokenizer_finds_its_own_store_at_a_default_location(tmp_path: Path) -> None:
    base = tmp_path / "user.sqlite"
    assert for_tokenizer(base, A.fingerprint) == base  # nothing there yet: the default file
    with NgramStore.open(base, A) as store:
        store.update_file("/ws/a.py", "def a():\n    return 1\n")
    assert for_tokenizer(base, A.fingerprint) == base
    own = for_tokenizer(base, B.fingerprint)
    assert own == tmp_path / f"user.{B.fingerprint}.sqlite"  # base is A's: B's own beside it
    with NgramStore.open(own, B) as store:
        store.update_file("/ws/b.py", "def b():\n    return 2\n")
    assert tokenizer_stores(base) == [base, own]
    base.unlink()  # A's store deleted: B keeps its own file, A starts the default one again
    assert for_tokenizer(base, B.fingerprint) == own
    assert for_tokenizer(base, A.fingerprint) == base
    (tmp_path / "user.notes.sqlite").write_text("not a tokenizer's store")
    assert tokenizer_stores(base) == [own]


def test_switching_models_keeps_what_each_learned(dirs: Path, ws: Path) -> None:
    """Before: the second model's tokenizer found the first one's user.sqlite and used no
    store at all ("n-gram store not used: ... run index-repo with --rebuild")."""
    app = ws / "app.py"
    app.write_text("def app():\n    return 1\n")
    reported: list[str] = []
    first = Stores(A, StoreSettings(), report=reported.append)
    assert first.update_file(app, app.read_text(), [ws]) is None
    first.close()
    second = Stores(B, StoreSettings(), report=reported.append)
    util = ws / "util.py"
    util.write_text("def util():\n    return 2\n")
    assert second.update_file(util, util.read_text(), [ws]) is None
    user, codebase = second.user(), second.codebase(ws)
    assert user is not None and codebase is not None
    assert user.paths() == [str(util.resolve())] and codebase.paths() == [str(util.resolve())]
    second.close()
    again = Stores(A, StoreSettings(), report=reported.append)  # back to the first model
    user = again.user()
    assert user is not None and user.path == user_db_path()
    assert user.paths() == [str(app.resolve())]
    again.close()
    assert reported == []


def test_forgetting_reaches_every_models_store(dirs: Path, ws: Path) -> None:
    app = ws / "app.py"
    app.write_text("def app():\n    return 1\n")
    for tokenizer in (A, B):
        stores = Stores(tokenizer, StoreSettings())
        stores.update_file(app, app.read_text(), [ws])
        stores.close()
    running = Stores(B, StoreSettings())
    removed = running.forget(app, [ws])["removed"]
    assert len(removed) == 4 and set(removed.values()) == {1}  # user and codebase, A's and B's
    for base in (user_db_path(), codebase_db_path(ws)):
        assert [learned(p, t) for p, t in zip(tokenizer_stores(base), (A, B), strict=True)] == [
            [],
            [],
        ]
    running.update_file(app, app.read_text(), [ws])
    assert running.forget(None, [ws])["removed"] == {
        str(p): 1 if p.name.endswith(f"{B.fingerprint}.sqlite") else 0
        for p in tokenizer_stores(user_db_path())
    }
    running.close()


def test_index_repo_writes_its_models_store_and_forgets_in_all(
    dirs: Path, ws: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ngram_db import cli

    (ws / "app.py").write_text("def app():\n    return 1\n")
    for tokenizer in (A, B):
        monkeypatch.setattr(cli, "load_tokenizer", lambda model, t=tokenizer: t)
        assert index_repo([str(ws)]) == 0
    base = codebase_db_path(ws)
    own = for_tokenizer(base, B.fingerprint)
    assert tokenizer_stores(base) == [base, own] and own != base
    assert learned(base, A) == learned(own, B) == [str((ws / "app.py").resolve())]
    capsys.readouterr()
    assert index_repo([str(ws), "--forget"]) == 0
    out = capsys.readouterr().out
    assert f"in {base}" in out and f"in {own}" in out
    assert learned(base, A) == learned(own, B) == []
    assert erase(base, None) == {str(base): 0, str(own): 0}
