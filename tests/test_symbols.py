"""The symbols table: definitions from tree-sitter tags, kept exact on save, forgotten, migrated."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ngram_db import ByteTokenizer, NgramStore, SchemaMismatch, index_repo
from ngram_db.symbols import Symbol, extract

BYTES = ByteTokenizer()

WIDGETS = '''\
"""Widgets."""
from dataclasses import dataclass, field


def frobnicate_widget(widget, *, force=False, retries=3) -> bool:
    return True


@dataclass(frozen=True)
class Widget(Base, metaclass=Meta):
    """A widget."""

    name: str
    size: int = 3
    tags: list[str] = field(default_factory=list)
    KIND = "widget"

    def __init__(self, name: str, size: int = 3) -> None:
        self.name = name

    @property
    def area(self) -> int:
        return self.size**2

    async def spin(self, times,
                   speed=1.0):
        pass
'''


def by_name(rows: list[Symbol]) -> dict[str, Symbol]:
    return {s.name: s for s in rows}


def test_a_function_header_is_its_signature_on_one_line() -> None:
    rows = by_name(extract("/ws/widgets.py", WIDGETS))
    f = rows["frobnicate_widget"]
    assert (f.kind, f.line, f.scope, f.path) == ("function", 4, "", "/ws/widgets.py")
    assert f.header == "def frobnicate_widget(widget, *, force=False, retries=3) -> bool"
    spin = rows["spin"]
    assert (spin.kind, spin.scope) == ("method", "Widget")
    assert spin.header == "async def spin(self, times, speed=1.0)"


def test_a_class_header_has_its_bases_fields_init_and_methods() -> None:
    widget = by_name(extract("/ws/widgets.py", WIDGETS))["Widget"]
    assert widget.kind == "class" and widget.line == 9
    assert widget.header.splitlines() == [
        "@dataclass(frozen=True)",
        "class Widget(Base, metaclass=Meta):",
        "    name: str",
        "    size: int = 3",
        "    tags: list[str] = field(default_factory=list)",
        '    KIND = "widget"',
        "    def __init__(self, name: str, size: int = 3) -> None: ...",
        "    def area(self) -> int: ...",
        "    async def spin(self, times, speed=1.0): ...",
    ]


def test_other_languages_and_broken_text_give_no_rows_and_no_error() -> None:
    assert extract("/ws/notes.md", WIDGETS) == []
    assert extract("/ws/app.js", "function f(a, b) { return a }") == []  # no tags query here
    assert extract("/ws/half.py", "def half(a, b=\n\nclass Whole:\n    x: int = 1\n") == []
    typing = extract("/ws/t.py", "def ok(a):\n    x = (\n\ndef later(b):\n    pass\n")
    assert [s.header for s in typing] == ["def ok(a)", "def later(b)"]  # not the body's text


# ----- the table: deltas on save, forgetting ------------------------------------------------


def test_a_save_replaces_the_files_rows_exactly(tmp_path: Path) -> None:
    with NgramStore.open(tmp_path / "c.sqlite", BYTES) as store:
        store.update_file("/ws/a.py", "def old_name(x):\n    pass\n\ndef kept(y=1):\n    pass\n")
        store.update_file("/ws/b.py", "def other(z):\n    pass\n")
        assert [s.name for s in store.symbols_in("/ws/a.py")] == ["old_name", "kept"]

        store.update_file(
            "/ws/a.py", "def kept(y=2):\n    pass\n\ndef new_name(x, *a):\n    pass\n"
        )
        assert store.symbols_named(["old_name"]) == []
        assert [s.header for s in store.symbols_named(["kept", "new_name"])] == [
            "def kept(y=2)",
            "def new_name(x, *a)",
        ]
        assert [s.line for s in store.symbols_in("/ws/a.py")] == [0, 3]
        assert [s.name for s in store.symbols_in("/ws/b.py")] == ["other"]  # untouched
        assert not store.update_file(
            "/ws/a.py", "def kept(y=2):\n    pass\n\ndef new_name(x, *a):\n    pass\n"
        )
        assert len(store.symbols_in("/ws/a.py")) == 2  # unchanged content: nothing doubled

        store.update_file("/ws/a.py", "# nothing defined any more\n")
        assert store.symbols_in("/ws/a.py") == []
        assert store.is_consistent()


def test_remove_rename_forget_and_clear_take_the_rows_along(tmp_path: Path) -> None:
    path = tmp_path / "u.sqlite"
    with NgramStore.open(path, BYTES) as store:
        store.update_file("/ws/sub/b.py", "def very_private_helper(token):\n    pass\n")
        store.update_file("/ws/sub/c.py", "class C:\n    x: int\n")
        store.update_file("/ws/a.py", "def a():\n    pass\n")
        store.update_file("/ws/d.py", "def d():\n    pass\n")

        assert store.rename_file("/ws/d.py", "/ws/e.py")
        assert [s.path for s in store.symbols_named(["d"])] == ["/ws/e.py"]
        assert store.remove_file("/ws/e.py") and store.symbols_named(["d"]) == []

        store.checkpoint()
        assert b"very_private_helper(token)" in path.read_bytes()
        assert store.forget("/ws/sub") == 2
        assert store.symbols_named(["very_private_helper", "C"]) == []
        assert b"very_private_helper(token)" not in path.read_bytes()  # erased, not unlinked
        assert [s.name for s in store.symbols_named(["a"])] == ["a"]

        store.clear()
        assert store.symbols_named(["a"]) == []


def test_index_repo_fills_the_table_and_drops_the_rows_of_deleted_files(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "widgets.py").write_text(WIDGETS)
    (root / "pkg" / "gone.py").write_text("def going(a):\n    pass\n")
    with NgramStore.open(tmp_path / "c.sqlite", BYTES) as store:
        index_repo(root, store, progress=False)
        found = store.symbols_named(["frobnicate_widget", "going"])
        assert [(s.name, Path(s.path).name) for s in found] == [
            ("going", "gone.py"),
            ("frobnicate_widget", "widgets.py"),
        ]
        assert store.stats()["symbols"] == len(extract("w.py", WIDGETS)) + 1
        (root / "pkg" / "gone.py").unlink()
        summary = index_repo(root, store, progress=False)
        assert f"({summary.stats['files']} files, {len(extract('w.py', WIDGETS))} definitions)" in (
            summary.format()
        )
        assert store.symbols_named(["going"]) == []
        assert len(store.symbols_named(["frobnicate_widget"])) == 1


# ----- schema versions ------------------------------------------------------------------------


def make_schema_1_store(path: Path, files: dict[str, str]) -> None:
    """A store as the code before the symbols table wrote it (schema 1, no table)."""
    with NgramStore.open(path, BYTES) as store:
        for name, text in files.items():
            store.update_file(name, text)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DROP TABLE symbols")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.close()


def test_a_schema_1_store_is_migrated_and_index_repo_fills_its_rows(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "w.py").write_text(WIDGETS)
    db = tmp_path / "old.sqlite"
    make_schema_1_store(db, {str((root / "w.py").resolve()): WIDGETS})

    with NgramStore.open(db, BYTES) as store:
        assert store.paths() == [str((root / "w.py").resolve())]  # the counts kept
        assert store.is_consistent()
        assert store.symbols_missing() and store.symbols_named(["Widget"]) == []
        summary = index_repo(root, store, progress=False)
        assert summary.unchanged == 1 and summary.indexed == 0  # no re-counting
        assert [s.name for s in store.symbols_named(["Widget", "spin"])] == ["Widget", "spin"]
        assert not store.symbols_missing()
    with sqlite3.connect(db) as conn:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version == ("2",)


def test_an_empty_schema_1_store_needs_no_filling(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    make_schema_1_store(db, {})
    with NgramStore.open(db, BYTES) as store:
        assert not store.symbols_missing()
        store.update_file("/ws/a.py", "def a():\n    pass\n")
        assert [s.name for s in store.symbols_named(["a"])] == ["a"]


def test_a_newer_schema_is_refused_and_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "new.sqlite"
    with NgramStore.open(db, BYTES) as store:
        store.update_file("/ws/a.py", "x = 1\n")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    before = db.read_bytes()
    with pytest.raises(SchemaMismatch, match="schema version 3"):
        NgramStore.open(db, BYTES)
    assert db.read_bytes() == before
