"""A default store per tokenizer (issue 56 item 5): switching models strands nothing. Each
tokenizer finds its own store at a default location, index-repo writes its model's, and
forgetting reaches every tokenizer's store."""

from __future__ import annotations

from pathlib import Path

import pytest

from ngram_db import ByteTokenizer, NgramStore
from ngram_db.cli import main as index_repo
from ngram_db.paths import codebase_db_path
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
