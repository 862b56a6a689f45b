"""Stores of older schemas are migrated in place when opened, losing nothing but what was
retired (ngram_db/schema.py); a newer schema is refused and left untouched.

Schema 2's ``symbols`` table fed the definitions' proposals and the codebase in the prompt,
retired in issue 53. ``tests/data/store_schema2.sql`` is a store written by the code of
commit 9e635f3 (its header says how), so the migration is tested on what users' disks hold.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ngram_db import ByteTokenizer, NgramStore, SchemaMismatch
from ngram_db.schema import SCHEMA_VERSION

BYTES = ByteTokenizer()
DUMP = Path(__file__).parent / "data" / "store_schema2.sql"
HEADER = b"def helper(x)"  # a symbols row's header: plain text of the indexed file


def written_at_9e635f3(path: Path, *statements: str) -> None:
    """The schema 2 store of DUMP at ``path``, with ``statements`` run on it after."""
    with sqlite3.connect(path) as conn:
        conn.executescript(DUMP.read_text())
        for statement in statements:
            conn.execute(statement)
    conn.close()


def rows(path: Path) -> dict[str, Any]:
    """Every table's rows, and the schema's tables and indexes by name."""
    with sqlite3.connect(path) as conn:
        names = [n for (n,) in conn.execute("SELECT name FROM sqlite_master ORDER BY name")]
        tables = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        out: dict[str, Any] = {"schema": names}
        for table in tables:
            out[table] = sorted(conn.execute(f"SELECT * FROM {table}"))  # noqa: S608
    conn.close()
    return out


def test_a_schema_2_store_loses_its_symbols_table_and_nothing_else(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    written_at_9e635f3(db)
    before = rows(db)
    assert before["symbols"] and HEADER in db.read_bytes()
    with NgramStore.open(db, BYTES) as store:
        assert store.orders == (2, 3) and store.paths() == ["/ws/app.py", "/ws/util.py"]
        assert store.is_consistent()  # the counts are those of the files' ids
        store.checkpoint()
    after = rows(db)
    assert after["schema"] == ["files", "grams", "meta", "sqlite_autoindex_files_1",
                               "sqlite_autoindex_meta_1"]  # fmt: skip
    assert after["files"] == before["files"] and after["grams"] == before["grams"]
    version = ("schema_version", str(SCHEMA_VERSION))
    assert after["meta"] == sorted([version, *(r for r in before["meta"] if r[0] != version[0])])
    assert HEADER not in db.read_bytes()  # the dropped rows' pages were overwritten

    with NgramStore.open(db, BYTES) as store:  # a store like any other from now on
        assert store.update_file("/ws/new.py", "def new():\n    return 1\n")
        assert store.forget("/ws/app.py") == 1 and store.is_consistent()


def test_a_store_still_waiting_for_its_symbols_loses_the_mark_too(tmp_path: Path) -> None:
    """A schema 1 store migrated to 2 before index-repo filled its rows was marked."""
    db = tmp_path / "old.sqlite"
    written_at_9e635f3(db, "INSERT INTO meta VALUES ('symbols_missing', '1')")
    NgramStore.open(db, BYTES).close()
    assert [key for key, _ in rows(db)["meta"]] == ["orders", "schema_version", "tokenizer"]


def test_a_schema_1_store_is_migrated_too(tmp_path: Path) -> None:
    db = tmp_path / "older.sqlite"
    written_at_9e635f3(
        db, "DROP TABLE symbols", "UPDATE meta SET value = '1' WHERE key = 'schema_version'"
    )
    before = rows(db)
    with NgramStore.open(db, BYTES) as store:
        assert store.is_consistent()
    after = rows(db)
    assert ("schema_version", str(SCHEMA_VERSION)) in after["meta"]
    assert after["files"] == before["files"] and after["grams"] == before["grams"]


def test_a_new_store_has_no_symbols_table(tmp_path: Path) -> None:
    db = tmp_path / "new.sqlite"
    NgramStore.open(db, BYTES).close()
    assert "symbols" not in rows(db)["schema"]


def test_a_newer_schema_is_refused_and_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "new.sqlite"
    with NgramStore.open(db, BYTES) as store:
        store.update_file("/ws/a.py", "x = 1\n")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                     [str(SCHEMA_VERSION + 1)])  # fmt: skip
    conn.close()
    before = db.read_bytes()
    with pytest.raises(SchemaMismatch, match=f"schema version {SCHEMA_VERSION + 1}"):
        NgramStore.open(db, BYTES)
    assert db.read_bytes() == before
