"""The packages' layering: lsp_server -> ngram_db -> superposed, never upwards, no circles
between the packages nor between the modules of one package.

Read from the source with ``ast`` (importing would hide lazy imports inside functions), so a
function-level ``from lsp_server...`` inside the engine fails here too. A circle counts every
import, lazy and ``if TYPE_CHECKING:`` ones too: a reader following the names goes round it
the same (the session -> learning -> warmup circle was one such).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
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


def module_name(path: Path, root: Path) -> str:
    """``root/lsp_server/next_edits/log.py`` -> ``lsp_server.next_edits.log``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports(root: Path, package: str) -> dict[str, set[str]]:
    """Each module of ``package`` (under ``root``) -> the modules of it that it imports, at
    any depth: ``from p import m`` names the module ``p.m`` where there is one, else ``p``."""
    paths = {module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}

    def owner(name: str) -> str | None:  # the module that defines ``name``
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(owner(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's package, up level - 1
                    up = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in paths else owner(base))
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def circles(graph: Mapping[str, set[str]]) -> set[frozenset[str]]:
    """The import circles: each set of modules that all reach one another (Tarjan's
    strongly connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph.get(module, ())):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = {stack.pop()}
            while module not in component:
                component.add(stack.pop())
            if len(component) > 1:
                found.add(frozenset(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


@pytest.mark.parametrize("package", [*sorted(ALLOWED), "bench"])
def test_no_circle_of_imports_between_a_packages_modules(package: str) -> None:
    """bench/ too: its report and replay modules once went round (report <-> report_*)."""
    found = circles(module_imports(ROOT, package))
    assert not found, sorted(map(sorted, found))


def test_the_circle_check_finds_a_made_up_circle(tmp_path: Path) -> None:
    """Three modules in a ring (one import lazy, one for annotations, one relative) and one
    outside it: the ring is found, the module that only imports into it is not in it."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from pkg.sub import b\n")
    annotations_only = "import typing\nif typing.TYPE_CHECKING:\n    from pkg.c import C\n"
    (package / "sub" / "b.py").write_text(annotations_only)
    (package / "c.py").write_text("from . import a\n")
    (package / "d.py").write_text("import pkg.a\n")
    graph = module_imports(tmp_path, "pkg")
    assert circles(graph) == {frozenset({"pkg.a", "pkg.sub.b", "pkg.c"})}
    (package / "c.py").write_text("X = 1\n")  # the ring broken
    assert circles(module_imports(tmp_path, "pkg")) == set()


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


def test_settings_import_no_feature_package() -> None:
    """lsp_server/settings.py is the plain table every room reads: it imports the ground floor
    (plain modules at lsp_server's top) and the engine's data, never a feature's sub-package
    (it imported next_edits.proposals for the scopes' names; they live in settings now)."""
    graph = module_imports(ROOT, "lsp_server")
    features = {m for m in graph["lsp_server.settings"] if m.count(".") > 1}
    assert not features, features
