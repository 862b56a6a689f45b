"""Next edits: the benchmark's misfires, one case each (issue 55 item 2).

Each source is cut down from a task of bench/data/next_edits.json.gz whose proposals the
commit did not make (bench/results/next_edits.json at 0a338fb; the task ids are named). Each
asserts what the rule that produced the misfire now does.
"""

from __future__ import annotations

from lsp_server.next_edits.log import EditLog
from lsp_server.next_edits.patterns import derive
from lsp_server.next_edits.sites import find


def _derived(before: str, after: str):
    log = EditLog()
    log.open("a.py", before)
    assert log.changed("a.py", after, 2) is None
    change = log.end("a.py")
    assert change is not None
    return derive(change, "python")


def _proposed(before: str, after: str) -> list[tuple[int, str, str]]:
    derived = _derived(before, after)
    assert derived.pattern is not None, derived.reason
    sites = find(derived.pattern, "a.py", after, "python", "file")
    return [(s.row, s.old_text, s.new_text) for s in sites]


def _refusal(before: str, after: str) -> str:
    derived = _derived(before, after)
    assert derived.pattern is None, derived.pattern
    return derived.reason


# -- string literals changed once ------------------------------------------------------------


def test_a_keyword_arguments_string_is_not_another_keywords() -> None:
    """pallets/flask#o27: SERVER_NAME's "example.com" changed, static_host's kept."""
    source = (
        'app.config.update(SERVER_NAME="example.com")\n'
        'app = flask.Flask(__name__, host_matching=True, static_host="example.com")\n'
        'app.config.update(SERVER_NAME="example.com")\n'
    )
    after = source.replace('SERVER_NAME="example.com"', 'SERVER_NAME="/foo"', 1)
    assert _proposed(source, after) == [(2, '"example.com"', '"/foo"')]


def test_a_calls_string_is_not_another_callees() -> None:
    """pallets/flask#r36: the redirect's path changed, the client's requests of it kept."""
    source = (
        'return flask.redirect("/getsession")\n'
        'rv = client.get("/getsession")\n'
        'return flask.redirect("/getsession")\n'
    )
    after = source.replace('"/getsession"', '"/target"', 1)
    assert _proposed(source, after) == [(2, '"/getsession"', '"/target"')]


def test_a_sets_second_string_is_not_its_first() -> None:
    """psf/black#r25: {"cust1", "cust1"} -> {"cust1", "cust2"}: the first element stays."""
    source = 'm = {"cust1", "cust1"}\nn = {"cust1", "cust1"}\n'
    after = source.replace('{"cust1", "cust1"}', '{"cust1", "cust2"}', 1)
    assert _proposed(source, after) == [(1, '"cust1"', '"cust2"')]


# -- fragments of a changed condition ------------------------------------------------------


def test_a_deleted_not_is_that_conditions() -> None:
    """psf/black#o14: ``if not current_line.depth`` lost its ``not``; the other tests of
    current_line kept theirs."""
    source = "if not current_line.depth:\n    pass\nif not current_line.is_decorator:\n    pass\n"
    after = source.replace("if not current_line.depth", "if current_line.depth")
    assert _refusal(source, after) == "changes a condition"


def test_a_clause_added_to_a_condition_is_that_conditions() -> None:
    """psf/black#o36: ``and not leaf_is_ignored`` added to one ``if is_fmt_skip:``."""
    source = "if is_fmt_skip:\n    a()\nif is_fmt_skip:\n    b()\n"
    after = source.replace("if is_fmt_skip:", "if is_fmt_skip and not leaf_is_ignored:", 1)
    assert _refusal(source, after) == "changes a condition"


def test_a_bracket_closed_before_its_opener_is_half_a_change() -> None:
    """psf/black#o38: ``)`` typed at a line's end before the ``(`` it closes."""
    source = "for ch in self.parent.children:\n    pass\nfor child in self.children:\n    pass\n"
    after = source.replace("self.parent.children:", "self.parent.children):")
    assert _refusal(source, after) == "leaves the line broken"


def test_a_line_left_broken_mid_rewrite_proposes_nothing() -> None:
    """psf/black#o9: ``and _is_ipython_magic(...)`` -> ``and = _get_str_args(...)``."""
    source = (
        "if (\n    isinstance(node.value, ast.Call)\n    and _is_ipython_magic(node.value.func)\n"
        "):\n    pass\nok = x and _is_ipython_magic(node.value.func)\n"
    )
    after = source.replace("and _is_ipython_magic", "and = _get_str_args", 1)
    assert _refusal(source, after) == "leaves the line broken"


def test_a_line_moved_into_a_block_is_no_rename() -> None:
    """psf/black#o13: ``CACHE_DIR = ...`` indented into a function as ``default_cache_dir``:
    the token diff read it as a rename of CACHE_DIR at every use."""
    source = "CACHE_DIR = Path(user_cache_dir())\n\nprint(CACHE_DIR)\nCACHE_DIR.mkdir()\n"
    after = source.replace("CACHE_DIR = Path", "    default_cache_dir = Path")
    assert _refusal(source, after) == "moves the line"


# -- a name renamed at one call ----------------------------------------------------------------


def test_a_call_of_a_function_defined_here_switched_once_is_no_rename() -> None:
    """psf/black#o19: one call of list_comments became another function's."""
    source = (
        "def list_comments(prefix):\n    return []\n\n\n"
        "def f(leaf):\n    comments = list_comments(leaf.prefix)\n"
        "    for c in list_comments(leaf.prefix):\n        pass\n"
    )
    after = source.replace("comments = list_comments", "comments = _generate_ignored", 1)
    assert _refusal(source, after) == "a use of a definition"


def test_an_imported_name_switched_at_one_use_is_no_rename() -> None:
    """pallets/flask#o33 and psf/black#r24: an imported type or function replaced at one
    annotation or call; the import and the other uses stay (a multi-line import too)."""
    source = (
        "from jinja2 import FileSystemLoader\n\n\n"
        "def jinja_loader(self) -> FileSystemLoader | None:\n"
        "    return FileSystemLoader(self.root_path)\n"
    )
    after = source.replace("-> FileSystemLoader", "-> BaseLoader")
    assert _refusal(source, after) == "a use of a definition"
    items = (
        "from black.nodes import (\n    is_docstring,\n    is_type_comment,\n)\n\n"
        'ok = not is_type_comment(comment, " ignore")\nif is_type_comment(comment):\n    pass\n'
    )
    after = items.replace("not is_type_comment", "not is_type_ignore_comment")
    assert _refusal(items, after) == "a use of a definition"


def test_a_module_named_in_an_import_is_not_the_name() -> None:
    """``from .style import Style`` imports Style, not the local ``style`` renamed here."""
    source = "from .style import Style\n\n\ndef f(style):\n    x = style\n    return style\n"
    after = source.replace("x = style", "x = border_style")
    assert _proposed(source, after) == [(5, "style", "border_style")]


# -- a rename reaching another binding ---------------------------------------------------------


def test_a_rename_does_not_reach_a_tuple_target_or_a_rebinding() -> None:
    """Textualize/rich#r0: ``start_line = 0`` renamed; ``start_line, end_line = ...`` and
    ``start_line = start_line - 1`` bind it again, and the commit kept them."""
    source = (
        "def f(self):\n    if x:\n        start_line = 0\n        y = start_line\n"
        "    else:\n        start_line, end_line = self.line_range\n"
        "        start_line = start_line - 1\n    return start_line\n"
    )
    after = source.replace("start_line = 0", "line_offset = 0")
    assert _proposed(source, after) == [
        (3, "start_line", "line_offset"),
        (7, "start_line", "line_offset"),
    ]


def test_a_loop_targets_rename_leaves_the_parameter_and_the_iterable() -> None:
    """psf/black#r17: ``for line in split_func(line, ...)`` -> ``for split_line in``: the
    parameter ``line`` and the ``line`` the loop reads are the old variable."""
    source = (
        "def split_wrapper(line: Line, features=()) -> Iterator[Line]:\n"
        "    for line in split_func(line, features):\n"
        "        if str(line).strip():\n            yield line\n"
    )
    after = source.replace("for line in", "for split_line in")
    assert _proposed(source, after) == [
        (2, "line", "split_line"),
        (3, "line", "split_line"),
    ]


def test_a_use_renamed_does_not_reach_the_binding() -> None:
    """psf/black#r4: ``len(project_names)`` -> ``len(projects_to_run)``: the assignment of
    project_names stays (a new variable is made from it)."""
    source = (
        "def f(config):\n    project_names = sorted(config)\n"
        "    queue = Queue(maxsize=len(project_names))\n    for p in project_names:\n"
        "        pass\n"
    )
    after = source.replace("len(project_names)", "len(projects_to_run)")
    assert _proposed(source, after) == [(3, "project_names", "projects_to_run")]


def test_an_attributes_assignment_does_not_bind_the_name() -> None:
    """Textualize/rich#r41: the parameter cache_size renamed; ``self.cache_size = cache_size``
    binds an attribute, so its ``cache_size`` value is a use."""
    source = "class C:\n    def __init__(self, cache_size: int) -> None:\n"
    source += "        self.cache_size = cache_size\n"
    after = source.replace("self, cache_size: int", "self, maxsize: int")
    assert _proposed(source, after) == [(2, "cache_size", "maxsize")]
