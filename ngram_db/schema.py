"""The store's SQLite schema, and what opening checks in it: creating the tables in an empty
database, reading and checking ``meta`` (schema version, orders, tokenizer), migrating schema 1.

Tables:

- ``meta``: schema version, n-gram orders, tokenizer fingerprint.
- ``grams``: one row per token tuple key (see ``keys``): ``g`` = count as an n-gram,
  ``c`` = count as a context. WITHOUT ROWID, so a lookup is one B-tree descent.
- ``files``: per file its path, content sha256, token count and its token ids
  (zlib-compressed uint32). Removing or changing a file re-counts its stored ids and
  subtracts them, so updates are exact without re-reading the old text.
- ``symbols`` (schema 2): per definition of a file its name, kind, line, enclosing class and
  header (ngram_db/symbols.py). A changed file's rows are replaced in the transaction that
  replaces its counts, and removed with them, so they follow the same privacy rules, saves
  and forgetting as the n-grams.

Schema versions: a store of schema 1 (before ``symbols``) is migrated in place when opened
(the table is added, nothing else changes) and marked ``symbols_missing``: its files' rows
are filled by the next index-repo run, which then clears the mark. A newer schema than this
code's raises SchemaMismatch and leaves the file untouched.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import sqlite_utils

from ngram_db.errors import NotAStore, OrdersMismatch, SchemaMismatch, TokenizerMismatch
from ngram_db.records import parse_orders
from ngram_db.tokenizer import Tokenizer

SCHEMA_VERSION = 2
DEFAULT_ORDERS: tuple[int, ...] = (2, 3, 4, 5, 6)

# SQL, not sqlite-utils' create_table, which cannot declare a table WITHOUT ROWID.
SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE grams (
    key INTEGER PRIMARY KEY,  -- packed token tuple, see ngram_db.keys
    g INTEGER NOT NULL,       -- count as an n-gram
    c INTEGER NOT NULL        -- count as a context (followed by a token)
) WITHOUT ROWID;
CREATE TABLE files (
    path TEXT PRIMARY KEY,
    sha256 TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    ids BLOB NOT NULL         -- zlib(uint32 little-endian token ids)
);
CREATE TABLE symbols (
    path TEXT NOT NULL,       -- a key of files
    name TEXT NOT NULL,
    kind TEXT NOT NULL,       -- function, method, class
    line INTEGER NOT NULL,    -- 0-based
    scope TEXT NOT NULL,      -- the enclosing class of a method, '' at the top level
    header TEXT NOT NULL      -- Python text stating the definition (ngram_db/symbols.py)
);
CREATE INDEX symbols_name ON symbols (name);
CREATE INDEX symbols_path ON symbols (path);
"""
_SYMBOLS_SCHEMA = SCHEMA[SCHEMA.index("CREATE TABLE symbols") :]  # what schema 1 -> 2 adds


def init_or_read_meta(
    conn: sqlite3.Connection, file: Path | None, tok: Tokenizer, wanted: tuple[int, ...] | None
) -> tuple[int, ...]:
    """Create the schema in an empty database, or check an existing one; returns the orders."""
    name = ":memory:" if file is None else str(file)
    db = sqlite_utils.Database(conn)
    tables = set(db.table_names())
    if not tables:
        with conn:
            conn.execute("BEGIN IMMEDIATE")
            # another process may have created it while we waited for the lock
            tables = set(db.table_names())
            if not tables:
                orders = wanted or DEFAULT_ORDERS
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                meta = {
                    "schema_version": str(SCHEMA_VERSION),
                    "orders": _fmt(orders),
                    "tokenizer": tok.fingerprint,
                }
                db.table("meta").insert_all({"key": k, "value": v} for k, v in meta.items())
                return orders
    if "meta" not in tables or "grams" not in tables:
        raise NotAStore(
            f"{name} is an SQLite database but not an n-gram store; it was left untouched"
        )
    meta = {row["key"]: row["value"] for row in db["meta"].rows}
    if meta.get("schema_version") == "1":
        meta = _migrate_1_to_2(conn, db)
    if meta.get("schema_version") != str(SCHEMA_VERSION):
        raise SchemaMismatch(
            f"{name} has schema version {meta.get('schema_version')}, this ngram_db writes "
            f"{SCHEMA_VERSION}"
        )
    if meta.get("tokenizer") != tok.fingerprint:
        raise TokenizerMismatch(
            f"{name} was built with tokenizer {meta.get('tokenizer')}, but the tokenizer in use "
            f"is {tok.fingerprint}"
        )
    stored = parse_orders(meta.get("orders", ""))
    if wanted is not None and wanted != stored:
        raise OrdersMismatch(f"{name} holds orders {_fmt(stored)}, not {_fmt(wanted)}")
    return stored


def stored_tokenizer(file: Path) -> str | None:
    """The fingerprint of the tokenizer the store at ``file`` was built with; None where no
    readable store is there (opening it then says why)."""
    if not file.is_file() or file.stat().st_size == 0:
        return None
    try:
        conn = sqlite3.connect(str(file), timeout=5.0)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'tokenizer'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return None if row is None else str(row[0])


def _migrate_1_to_2(conn: sqlite3.Connection, db: sqlite_utils.Database) -> dict[str, str]:
    """Add the ``symbols`` table to a schema 1 store, in one transaction (another process may
    have migrated it while this one waited for the lock); returns the meta rows after it.

    Nothing else changes: the counts and files stay valid. The store is marked
    ``symbols_missing`` until index-repo has extracted its files' rows.
    """
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        meta = {row["key"]: row["value"] for row in db["meta"].rows}
        if meta.get("schema_version") != "1":
            return meta
        for statement in _SYMBOLS_SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        filled = conn.execute("SELECT count(*) FROM files").fetchone()[0]
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
        if filled:
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('symbols_missing', '1')")
    return {row["key"]: row["value"] for row in db["meta"].rows}


def _fmt(orders: tuple[int, ...]) -> str:
    return ",".join(map(str, orders))
