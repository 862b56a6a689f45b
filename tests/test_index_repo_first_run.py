"""The first ``index-repo`` on a machine converts the embedded model for its tokenizer (tens
of seconds, 1.5 GB resident): it says so before, and its summary counts that time, where it
once sat silent for 26 s and then reported "time: 0.6 s" (issue 52 item 10)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ngram_db import cli as index_repo_cli
from ngram_db.tokenizer import ByteTokenizer
from superposed import tokenizer as model_tokenizer
from superposed.embedded import DEFAULT_MODEL, EMBEDDED


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.py").write_text("def f():\n    return 1\n")
    return root


def test_an_embedded_model_converts_first_until_its_tokenizer_is_in_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUPERPOSED_CACHE_DIR", str(tmp_path))
    assert model_tokenizer.converts_first(DEFAULT_MODEL)
    folder = tmp_path / "models" / EMBEDDED[DEFAULT_MODEL].folder
    folder.mkdir(parents=True)
    (folder / "tokenizer.json").write_text("{}")
    assert not model_tokenizer.converts_first(DEFAULT_MODEL)
    assert not model_tokenizer.converts_first(str(tmp_path / "some-folder"))  # not embedded


def _clock(*readings: float) -> Iterator[float]:
    yield from readings
    while True:
        yield readings[-1]


@pytest.mark.parametrize("pending", [True, False])
def test_index_repo_says_it_converts_and_counts_the_tokenizers_time(
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    pending: bool,
) -> None:
    monkeypatch.setattr(index_repo_cli, "converts_first", lambda model: pending)
    monkeypatch.setattr(index_repo_cli, "load_tokenizer", lambda model: ByteTokenizer())
    clock = _clock(100.0, 126.0 if pending else 100.01)  # before and after the load
    monkeypatch.setattr(index_repo_cli, "perf_counter", lambda: next(clock))
    db = tmp_path / "store.db"
    assert index_repo_cli.main([str(repo), "--db", str(db)]) == 0
    out, err = capsys.readouterr()
    assert ("converting" in err) is pending
    assert ("after 26.0 s loading the model's tokenizer" in out) is pending
    assert "files: 1 indexed" in out
