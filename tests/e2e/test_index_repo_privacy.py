"""index-repo as a real process: secrets by content, damaged, empty and locked stores, and
forgetting (issue 12, items 5, 6, 9, 11)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.e2e.index_harness import run

pytestmark = pytest.mark.slow  # every test runs index-repo as a process

PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"
Setup = tuple[Path, Path, dict[str, str]]


def test_files_holding_secrets_are_skipped_and_counted(setup: Setup) -> None:
    project, model, env = setup
    (project / "src" / "settings.py").write_text('AWS_ACCESS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"\n')
    (project / "deploy.txt").write_text(PEM)
    result = run(project, "--model", model, env=env)
    assert result.returncode == 0, result.stderr
    assert "2 secret content" in result.stdout and "1 secret" in result.stdout  # and .env
    assert "2 indexed" in result.stdout


def test_a_damaged_store_gives_a_message_not_a_traceback(setup: Setup) -> None:
    project, model, env = setup
    db = project.parent / "store.sqlite"
    (project / "src" / "big.py").write_text("def f(x):\n    return x + 1\n" * 3000)
    assert run(project, "--model", model, "--db", db, env=env).returncode == 0
    with db.open("r+b") as f:  # the header and schema intact, the tables' pages garbage
        size = f.seek(0, 2)
        f.seek(3 * 4096)
        f.write(b"\xa5" * (size - 3 * 4096))
    damaged = db.read_bytes()
    (project / "src" / "app.py").write_text("def app():\n    return 43\n")
    for extra in (["--stats"], []):  # statistics, and an incremental run
        result = run(project, "--model", model, "--db", db, *extra, env=env)
        assert result.returncode == 1
        assert "Traceback" not in result.stderr
        assert "damaged" in result.stderr and "--rebuild" in result.stderr
    assert db.read_bytes() == damaged


def test_an_empty_store_file_is_said(setup: Setup) -> None:
    project, model, env = setup
    db = project.parent / "empty.sqlite"
    db.touch()
    result = run(project, "--model", model, "--db", db, env=env)
    assert result.returncode == 0
    assert "0 bytes" in result.stderr and str(db) in result.stderr


def test_a_writer_holding_the_lock_gives_a_message(setup: Setup) -> None:
    project, model, env = setup
    db = project.parent / "store.sqlite"
    assert run(project, "--model", model, "--db", db, env=env).returncode == 0
    (project / "src" / "app.py").write_text("def app():\n    return 43\n")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        result = run(
            project, "--model", model, "--db", db, env={**env, "SUPERPOSED_BUSY_TIMEOUT_MS": "300"}
        )
    finally:
        holder.rollback()
        holder.close()
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "locked" in result.stderr and "try again" in result.stderr
    assert run(project, "--model", model, "--db", db, env=env).returncode == 0  # then it works


def test_forget_a_path_and_clear_a_store(setup: Setup, tmp_path: Path) -> None:
    project, model, env = setup
    env = {**env, "SUPERPOSED_DATA_DIR": str(tmp_path / "data")}
    assert run(project, "--model", model, "--scope", "user", env=env).returncode == 0
    user_db = tmp_path / "data" / "ngrams" / "user.sqlite"
    assert (user_db.stat().st_mode & 0o777) == 0o600

    forgot = run(project / "src", "--forget", "--scope", "user", "--model", model, env=env)
    assert forgot.returncode == 0, forgot.stderr
    assert "forgot 1 file(s)" in forgot.stdout
    cleared = run("--clear", "--scope", "user", "--model", model, env=env)
    assert cleared.returncode == 0, cleared.stderr
    assert "1 file(s) forgotten" in cleared.stdout  # README.md was left
    stats = run(project, "--stats", "--scope", "user", "--model", model, env=env)
    assert '"files": 0' in stats.stdout
