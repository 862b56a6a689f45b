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


# --- lsp_server's rooms: one sub-package per job (docs/architecture.md's map) -----------------

# Each room and the rooms it may import (a room imports the ground floor, ngram_db and the
# engine freely). A completion needs the stores it decodes with; the runtime runs completions
# and learns into the stores; next edits read the syntax and the shareable documents.
ROOMS: dict[str, set[str]] = {
    "stores": set(),
    "pages": set(),
    "completion": {"stores"},
    "runtime": {"completion", "stores"},
    "next_edits": {"completion", "stores"},
}
# The ground floor (lsp_server's top-level modules) and the rooms each may import: the plain
# data imports none, the session is built from the stores, the doors (handlers, command line,
# demo) put the rooms together. A ground module missing here fails the test below.
GROUND: dict[str, set[str]] = {
    "settings": set(),
    "setting_values": set(),  # the settings' parsers
    "device_model": set(),
    "models": set(),
    "triggers": set(),
    "workspace": set(),
    "protocol": set(),
    "session": {"stores"},
    "demo": {"completion", "stores"},
    "cli": {"completion", "stores", "runtime", "next_edits"},
    "server": {"completion", "stores", "runtime", "next_edits"},
}
# A room's faces: the modules its siblings and the session may import. The rest are its
# insides (the doors may still reach them: server.py turns drafts into items).
FACES: dict[str, set[str]] = {
    "stores": {
        "stores",
        "failures",
        "match_sources",
        "match_indexes",
        "shareable_documents",
        "write_queue",
    },
    "completion": {
        "request",
        "cursor",
        "answer",
        "decode",
        "cleanup",
        "plain",
        "prompt_plan",
        "syntax",
    },
    "runtime": set(),
    "next_edits": set(),
    "pages": set(),
}
DOORS = {"server", "cli", "demo"}
MAX_TOP_MODULES = 12  # __init__.py included
MAX_MODULE_LINES = 500


def place(module: str) -> tuple[str, str]:
    """``lsp_server.stores.failures`` -> ("stores", "failures"); a top module -> ("", name)."""
    parts = module.split(".")[1:] or ["__init__"]
    return (parts[0], ".".join(parts[1:]) or "__init__") if len(parts) > 1 else ("", parts[0])


def room_of(module: str) -> str:
    """The room a module of lsp_server lives in, its package's own ``__init__`` included."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ROOMS else ""


def test_every_room_and_ground_module_is_declared() -> None:
    packages = {p.name for p in (ROOT / "lsp_server").iterdir() if (p / "__init__.py").exists()}
    assert packages == set(ROOMS) == set(FACES)
    top = {p.stem for p in (ROOT / "lsp_server").glob("*.py")} - {"__init__"}
    assert top == set(GROUND)
    assert len(top) + 1 <= MAX_TOP_MODULES


def room_faults(graph: Mapping[str, set[str]]) -> list[str]:
    """Each import of ``graph`` (lsp_server's modules) against ROOMS, GROUND and FACES."""
    wrong: list[str] = []
    for module, targets in sorted(graph.items()):
        here = room_of(module)
        ground = "" if here else place(module)[1]
        for target in sorted(targets):
            there = room_of(target)
            if not there or there == here:
                continue
            allowed = ROOMS[here] if here else GROUND.get(ground, set())
            if there not in allowed:
                wrong.append(f"{module} -> {target} (room {there} not allowed)")
            elif ground not in DOORS and place(target)[1] not in FACES[there]:
                wrong.append(f"{module} -> {target} (not a face of {there})")
    return wrong


def test_rooms_import_along_the_declared_directions_and_only_faces() -> None:
    """A room imports the ground floor and the engine; a sibling room only where ROOMS says
    and only through its faces. A ground module imports only the rooms GROUND gives it."""
    assert room_faults(module_imports(ROOT, "lsp_server")) == []


def test_the_room_check_names_a_made_up_wrong_import() -> None:
    """Into a sibling's insides, against the direction, from the plain floor: each named; the
    same imports from a door, or of a face, pass."""
    graph = {
        "lsp_server.runtime.x": {"lsp_server.completion.layout", "lsp_server.completion.answer"},
        "lsp_server.stores.y": {"lsp_server.completion.request", "lsp_server.settings"},
        "lsp_server.settings": {"lsp_server.stores.stores"},
        "lsp_server.server": {"lsp_server.completion.layout", "lsp_server.runtime.loader"},
    }
    assert room_faults(graph) == [
        "lsp_server.runtime.x -> lsp_server.completion.layout (not a face of completion)",
        "lsp_server.settings -> lsp_server.stores.stores (room stores not allowed)",
        "lsp_server.stores.y -> lsp_server.completion.request (room completion not allowed)",
    ]


def test_no_circle_between_rooms() -> None:
    """The rooms, each taken as one node (the ground floor's modules as themselves), form no
    circle: runtime -> completion -> stores, never back, not even through the session."""
    graph: dict[str, set[str]] = {}
    for module, targets in module_imports(ROOT, "lsp_server").items():
        node = room_of(module) or module
        graph.setdefault(node, set()).update(room_of(t) or t for t in targets)
    for node in graph:
        graph[node].discard(node)
    assert circles(graph) == set()


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_module_over_the_line_limit(package: str) -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in sorted((ROOT / package).rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


NAME_COLUMN = 28  # the map's descriptions start here


def named_in_map(text: str, column_only: bool = False) -> set[str]:
    """The modules docs/architecture.md's map (its first code block) names: a line that starts
    with a folder (``lsp_server/stores/``) opens it, and each ``name.py`` after it, up to the
    next folder, is that folder's module. ``column_only``: only those in the name column (the
    descriptions may name a module of another folder, as ``shared with settings.py``)."""
    block = text.split("```")[1]
    folder, named = "", set()
    for line in block.splitlines():
        first = line.split(" ", 1)[0]
        if first.endswith("/") and not line.startswith(" "):
            folder = first
        words = line[:NAME_COLUMN] if column_only else line
        for word in (w.strip(":;()`") for w in words.replace(",", " ").split()):
            if word.endswith(".py") and word[:-3].replace("_", "").replace("/", "").isalnum():
                named.add(word if "/" in word else folder + word)
    return named


def test_the_architecture_map_names_every_product_module() -> None:
    """Each module of the three packages is named under its folder; each module in the
    map's name column exists (a moved or retired one is not left behind)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    modules = {
        str(path.relative_to(ROOT))
        for package in ALLOWED
        for path in (ROOT / package).rglob("*.py")
        if path.name != "__init__.py"
    }
    assert sorted(modules - named_in_map(text)) == []
    assert sorted(named_in_map(text, column_only=True) - modules) == []


def test_the_map_reader_opens_folders() -> None:
    rows = [("pkg/", "a"), ("   a.py, b.py", "c"), ("", "says d.py: (f.py)"), ("pkg/sub/", "")]
    block = [name.ljust(NAME_COLUMN) + words for name, words in rows] + ["   e.py"]
    text = "x\n```\n" + "\n".join(block) + "\n```\n"
    assert named_in_map(text) == {"pkg/a.py", "pkg/b.py", "pkg/d.py", "pkg/f.py", "pkg/sub/e.py"}
    assert named_in_map(text, column_only=True) == {"pkg/a.py", "pkg/b.py", "pkg/sub/e.py"}


# The request's path below the handlers: answer() plans the request once and hands the plan
# down (issue 53 item 3); a function here that needs more wants the plan, not its parts.
REQUEST_PATH = [
    "lsp_server/completion/answer.py",
    "lsp_server/completion/decode.py",
    "lsp_server/completion/plain.py",
    "lsp_server/completion/prompt_plan.py",
    "lsp_server/completion/cleanup.py",
    "superposed/request.py",
]
MAX_PARAMETERS = 5


def wide_functions(source: str) -> list[str]:
    """The functions of ``source`` that take more than MAX_PARAMETERS (self, cls not counted)."""
    wide = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
            if len([n for n in names if n not in ("self", "cls")]) > MAX_PARAMETERS:
                wide.append(node.name)
    return wide


def test_the_request_path_takes_few_parameters() -> None:
    wide = {path: wide_functions((ROOT / path).read_text()) for path in REQUEST_PATH}
    run = next(
        node
        for node in ast.walk(ast.parse((ROOT / "superposed" / "api.py").read_text()))
        if isinstance(node, ast.FunctionDef) and node.name == "run"
    )
    assert {path: names for path, names in wide.items() if names} == {}
    assert [p.arg for p in run.args.args] == ["self", "plan"]  # the engine takes it whole
    assert wide_functions("def f(a, b, c, d, e, *, g=1):\n    pass\n") == ["f"]
