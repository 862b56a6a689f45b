"""The statements the store runs over lists of values, and how it runs them: in chunks below
SQLite's limit on bound parameters (``in_chunks``), each text built once per length."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Sequence
from typing import Any

_MAX_PARAMS = 30_000  # below SQLite's default limit of 32766 bound parameters
UPSERT = (
    "INSERT INTO grams (key, g, c) VALUES (?, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET g = g + excluded.g, c = c + excluded.c"
)
ROWS_PER_INSERT = 256
UPSERT_MANY = (
    f"INSERT INTO grams (key, g, c) VALUES {','.join(['(?, ?, ?)'] * ROWS_PER_INSERT)} "
    "ON CONFLICT (key) DO UPDATE SET g = g + excluded.g, c = c + excluded.c"
)

# Statements over a list of values: {marks} becomes one "?" per value of a chunk.
SELECT_KEYS = "SELECT key, g, c FROM grams WHERE key IN ({marks})"
DELETE_EMPTY = "DELETE FROM grams WHERE key IN ({marks}) AND g <= 0 AND c <= 0"
SELECT_FILES = "SELECT path, sha256, ids FROM files WHERE path IN ({marks})"
SELECT_HASHES = "SELECT path, sha256 FROM files WHERE path IN ({marks})"


def in_chunks(conn: sqlite3.Connection, template: str, values: Sequence[Any]) -> list[Any]:
    """The rows of ``template`` run over ``values``, in chunks below SQLite's parameter limit."""
    rows: list[Any] = []
    for start in range(0, len(values), _MAX_PARAMS):
        chunk = list(values[start : start + _MAX_PARAMS])
        rows.extend(conn.execute(_statement(template, len(chunk)), chunk))
    return rows


@functools.cache
def _statement(template: str, n: int) -> str:
    """``template`` for n values (cached: each text is built once, and SQLite's statement
    cache then finds it)."""
    return template.format(marks=",".join("?" * n))
