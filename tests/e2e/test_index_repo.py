"""The index-repo command end to end, as a real process with a tiny byte-level tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ngram_db.paths import codebase_db_path
from tests.e2e.index_harness import make_tokenizer, run

pytestmark = pytest.mark.slow  # every test runs index-repo as a process


def test_index_then_reindex_then_stats(setup: tuple[Path, Path, dict[str, str]]) -> None:
    project, model, env = setup
    first = run(project, "--model", model, env=env)
    assert first.returncode == 0, first.stderr
    assert "2 indexed" in first.stdout and "1 secret" in first.stdout
    assert "bytes/token" in first.stdout and "distinct n-grams per order: 2:" in first.stdout
    assert first.stderr == ""  # no progress bar when stderr is not a terminal
    assert codebase_db_path(project).is_file()

    (project / "src" / "app.py").write_text("def app():\n    return 43\n")
    second = run(project, "--model", model, "--json", env=env)
    summary = json.loads(second.stdout)
    assert (summary["indexed"], summary["unchanged"]) == (1, 1)

    stats = json.loads(run(project, "--model", model, "--stats", env=env).stdout)
    assert stats["files"] == 2 and stats["orders"] == [2, 3, 4, 5, 6]
    assert stats["tokens"] == len("def app():\n    return 43\n") + len("# project\n")


def test_orders_scope_and_rebuild(setup: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    project, model, env = setup
    db = tmp_path / "custom.sqlite"
    assert run(project, "--model", model, "--db", db, "--orders", "2-3", env=env).returncode == 0
    clash = run(project, "--model", model, "--db", db, "--orders", "2-4", env=env)
    assert clash.returncode == 1 and "--rebuild" in clash.stderr
    rebuilt = run(project, "--model", model, "--db", db, "--orders", "2-4", "--rebuild", env=env)
    assert rebuilt.returncode == 0 and "4:" in rebuilt.stdout
    user_env = {**env, "SUPERPOSED_DATA_DIR": str(tmp_path / "data")}
    user = run(project, "--model", model, "--scope", "user", env=user_env)
    assert user.returncode == 0 and (tmp_path / "data" / "ngrams" / "user.sqlite").is_file()


def test_corrupt_store_is_reported_and_kept(setup: tuple[Path, Path, dict[str, str]]) -> None:
    project, model, env = setup
    db = project.parent / "broken.sqlite"
    db.write_bytes(b"definitely not sqlite\n" * 50)
    result = run(project, "--model", model, "--db", db, env=env)
    assert result.returncode == 1
    assert str(db) in result.stderr and "--rebuild" in result.stderr
    assert "Traceback" not in result.stderr
    assert db.read_bytes() == b"definitely not sqlite\n" * 50


def test_another_tokenizer_gets_its_own_store_or_is_refused_a_named_one(
    setup: tuple[Path, Path, dict[str, str]],
) -> None:
    """The default store is kept per tokenizer (issue 56): another model's tokenizer indexes
    into its own file beside the first; a store named with --db serves the tokenizer that
    built it alone."""
    project, model, env = setup
    assert run(project, "--model", model, env=env).returncode == 0
    (first,) = (project.parent / "cache" / "ngrams").glob("*.sqlite")
    other = make_tokenizer(project.parent / "tok2", extra="def")
    assert run(project, "--model", other, env=env).returncode == 0
    stores = sorted((project.parent / "cache" / "ngrams").glob("*.sqlite"))
    assert len(stores) == 2 and first in stores
    result = run(project, "--model", other, "--db", first, env=env)
    assert result.returncode == 1
    assert "tokenizer" in result.stderr and "--rebuild" in result.stderr


@pytest.mark.model
def test_default_model_tokenizer(setup: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    project, _, env = setup
    env = {k: v for k, v in env.items() if k != "SUPERPOSED_CACHE_DIR"}  # the converted model
    result = run(project, "--db", tmp_path / "default.sqlite", env=env)
    assert result.returncode == 0, result.stderr
    assert "2 indexed" in result.stdout
