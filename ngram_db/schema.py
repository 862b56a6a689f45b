"""The store's SQLite schema, and what opening checks in it: creating the tables in an empty
database, reading and checking ``meta`` (schema version, orders, tokenizer), migrating older
schemas.

Tables:

- ``meta``: schema version, n-gram orders, tokenizer fingerprint.
- ``grams``: one row per token tuple key (see ``keys``): ``g`` = count as an n-gram,
  ``c`` = count as a context. WITHOUT ROWID, so a lookup is one B-tree descent.
- ``files``: per file its path, content sha256, token count and its token ids
  (zlib-compressed uint32). Removing or changing a file re-counts its stored ids and
  subtracts them, so updates are exact without re-reading the old text.

Schema versions: 1 had these three tables; 2 added ``symbols`` (the definitions of each file,
read by the definitions' proposals and the codebase in the prompt, both retired in issue 53:
they measured no gain, docs/architecture.md "Retired"); 3 is 1 again. A store of schema 1 or
2 is migrated in place when opened: the ``symbols`` table and its mark ``symbols_missing``
are dropped, their freed pages overwritten, and nothing else changes (the counts and files
stay valid). A newer schema than this code's raises SchemaMismatch and leaves the file
untouched.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import sqlite_utils

from ngram_db.errors import NotAStore, OrdersMismatch, SchemaMismatch, TokenizerMismatch
from ngram_db.records import parse_orders
from ngram_db.tokenizer import Tokenizer

SCHEMA_VERSION = 3
OLDER = ("1", "2")  # the schema versions opening migrates (_migrate)
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
"""


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
    if meta.get("schema_version") in OLDER:
        meta = _migrate(conn, db)
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


def _migrate(conn: sqlite3.Connection, db: sqlite_utils.Database) -> dict[str, str]:
    """Bring a schema 1 or 2 store to this code's, in one transaction (another process may
    have migrated it while this one waited for the lock); returns the meta rows after it.

    The ``symbols`` table (its indexes go with it) and the ``symbols_missing`` mark are
    dropped, their pages overwritten as they are freed (the definitions' headers were plain
    text of the indexed files); ``grams``, ``files`` and the other meta rows stay as they are.
    """
    conn.execute("PRAGMA secure_delete = ON")
    try:
        with conn:
            conn.execute("BEGIN IMMEDIATE")
            meta = {row["key"]: row["value"] for row in db["meta"].rows}
            if meta.get("schema_version") in OLDER:
                conn.execute("DROP TABLE IF EXISTS symbols")
                conn.execute("DELETE FROM meta WHERE key = 'symbols_missing'")
                conn.execute(
                    "UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)]
                )
    finally:
        conn.execute("PRAGMA secure_delete = OFF")
    return {row["key"]: row["value"] for row in db["meta"].rows}


def _fmt(orders: tuple[int, ...]) -> str:
    return ",".join(map(str, orders))
