"""The packages' layering: lsp_server -> ngram_db -> superposed, never upwards, no circles.

Read from the source with ``ast`` (importing would hide lazy imports inside functions), so a
function-level ``from lsp_server...`` inside the engine fails here too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What each package may import of the others.
ALLOWED: dict[str, set[str]] = {
    "superposed": set(),
    "ngram_db": {"superposed"},
    "lsp_server": {"superposed", "ngram_db"},
}


def imported_packages(path: Path) -> set[str]:
    """The top-level names of every absolute import in ``path``, at any depth."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_the_layers_below(package: str) -> None:
    forbidden = set(ALLOWED) - ALLOWED[package] - {package}
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_packages(path) & forbidden)
        for path in sorted((ROOT / package).rglob("*.py"))
    }
    assert {path: names for path, names in offenders.items() if names} == {}


def test_engine_imports_neither_sqlite_nor_pygls() -> None:
    outside = {"sqlite3", "sqlite_utils", "pygls", "lsprotocol"}
    used = {
        str(path.relative_to(ROOT)): sorted(imported_packages(path) & outside)
        for path in sorted((ROOT / "superposed").rglob("*.py"))
    }
    assert {path: names for path, names in used.items() if names} == {}


def test_the_check_sees_lazy_imports(tmp_path: Path) -> None:
    module = tmp_path / "lazy.py"
    module.write_text(
        "def f():\n    from lsp_server.settings import X\n    import ngram_db.store\n"
    )
    assert imported_packages(module) == {"lsp_server", "ngram_db"}


def test_every_end_to_end_module_is_out_of_the_fast_tier() -> None:
    """``make test-fast`` does not collect tests/e2e (importing its harnesses costs seconds):
    so every test module there must be marked slow, editor or model, as a whole."""
    unmarked = []
    for path in sorted((Path(__file__).parent / "e2e").glob("test_*.py")):
        tree = ast.parse(path.read_text())
        marks = [
            ast.unparse(node.value)
            for node in tree.body
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
        ]
        if not any(tier in mark for mark in marks for tier in ("slow", "editor", "model")):
            unmarked.append(path.name)
    assert unmarked == []
