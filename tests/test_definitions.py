"""Definition proposals: the call or attribute at the cursor, what its name resolves to, and
the text proposed (lsp_server/definitions.py)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from lsp_server.definitions import Resolver, imports, proposals, site_at
from ngram_db.symbols import Symbol, class_info, constructor, extract, parameters

WIDGETS = """\
from dataclasses import dataclass


def frobnicate_widget(widget, *, force=False, retries=3) -> bool:
    return True


class Widget(Base):
    name: str
    size: int = 3

    def __init__(self, name: str, size: int = 3) -> None:
        self.name = name

    def spin(self, times, speed=1.0):
        pass

    def _secret(self):
        pass


@dataclass
class Point:
    x: float
    y: float = 0.0
    LIMIT: ClassVar[int] = 9
"""
OTHER = "def frobnicate_widget(gadget, colour='red'):\n    pass\n"
STORED = extract("/ws/pkg/widgets.py", WIDGETS) + extract("/ws/legacy/widgets.py", OTHER)


def lookup(names: Sequence[str]) -> list[Symbol]:
    return [s for s in STORED if s.name in names]


HEAD = "from pkg.widgets import frobnicate_widget, Widget, Point\n\nw = Widget('a')\n"


def propose(typed: str, head: str = HEAD, path: str = "/ws/app.py") -> list[str]:
    return proposals(head + typed, Resolver(head + typed, path, lookup))


# ----- the site ---------------------------------------------------------------------------------


def test_the_site_counts_the_arguments_given() -> None:
    site = site_at("x = f(a, (1, 2), 'x,y', key=3, ")
    assert site is not None
    assert (site.kind, site.chain, site.positional, site.keywords) == ("call", ["f"], 3, {"key"})
    assert site.fresh and site.typed == ""
    method = site_at("obj.method(a, fo")
    assert method is not None and method.chain == ["obj", "method"] and method.typed == "fo"
    keyword = site_at("obj.method(a, key=Tr")
    assert keyword is not None and keyword.typed == "key=Tr" and not keyword.fresh
    assert site_at("obj.method(a, key='v") is None  # in a string
    escaped = site_at('x = "a\\"(" + g(1, ')  # an escaped quote, a "(" in a string
    assert escaped is not None and escaped.chain == ["g"] and escaped.positional == 1
    closed = site_at('d = """(\n"""\nh(')  # a closed triple-quoted string
    assert closed is not None and closed.chain == ["h"]
    attribute = site_at("    total = self.wid")
    assert attribute is not None and (attribute.kind, attribute.chain) == ("attribute", ["self"])
    assert attribute.typed == "wid"


@pytest.mark.parametrize(
    "before",
    [
        "# f(",  # a comment
        "s = 'f(",  # a string
        's = """\nf(',  # a triple-quoted string
        "f(a)\n",  # a closed call
        "def f(a, ",  # a definition's parameters
        "if (",  # a keyword's parenthesis
        "x = 1.",  # a number
    ],
)
def test_no_site_where_no_call_or_attribute_is_open(before: str) -> None:
    assert site_at(before) is None


# ----- headers ------------------------------------------------------------------------------------


def test_parameters_read_a_header() -> None:
    params = parameters("def f(a, b: int = 2, /, c=3, *args, d, e: str = 'x', **kw) -> None")
    assert [(p.name, p.default, p.keyword_only, p.positional_only) for p in params] == [
        ("a", None, False, True),
        ("b", "2", False, True),
        ("c", "3", False, False),
        ("d", None, True, False),
        ("e", "'x'", True, False),
    ]


def test_a_class_is_constructed_by_its_init_or_its_dataclass_fields() -> None:
    by_name = {s.name: s for s in STORED if s.kind == "class"}
    widget = class_info(by_name["Widget"].header)
    point = class_info(by_name["Point"].header)
    assert widget is not None and point is not None
    assert [p.name for p in constructor(widget)] == ["name", "size"]  # self left out
    assert [(p.name, p.default) for p in constructor(point)] == [("x", None), ("y", "0.0")]
    assert list(widget.methods) == ["__init__", "spin", "_secret"]


def test_imports_name_their_modules() -> None:
    found = imports("import os.path\nimport numpy as np\nfrom a.b import (c, d as e)\n")
    assert found == {"os": ("os", ""), "np": ("numpy", ""), "c": ("a.b", "c"), "e": ("a.b", "d")}


# ----- proposals ----------------------------------------------------------------------------------


def test_a_call_proposes_its_argument_list_and_keywords() -> None:
    assert propose("frobnicate_widget(") == [
        "widget)",
        "force=",
        "retries=",
        "widget, force=False, retries=3)",
    ]
    assert propose("frobnicate_widget(w, ") == ["force=", "retries=", "force=False, retries=3)"]
    assert propose("frobnicate_widget(w,") == [" force=", " retries=", " force=False, retries=3)"]
    assert propose("frobnicate_widget(w, retries=5, ") == ["force=", "force=False)"]
    assert propose("frobnicate_widget(w, fo") == ["rce=", "rce=False, retries=3)"]
    assert propose("frobnicate_widget(w, force=") == ["False, retries=3)"]  # the default
    assert propose("frobnicate_widget(wid") == ["get)", "get, force=False, retries=3)"]
    assert propose("frobnicate_widget(gadget") == []  # typed what nothing proposes
    assert propose("frobnicate_widget(w, f(x") == []  # inside another call


def test_a_class_call_and_a_method_call_leave_self_out() -> None:
    assert propose("Point(") == ["x)", "y=", "x, y=0.0)"]
    assert propose("Widget(") == ["name)", "size=", "name, size=3)"]
    assert propose("w.spin(3, ") == ["speed=", "speed=1.0)"]


def test_after_a_dot_the_class_members_are_proposed() -> None:
    assert propose("w.") == []  # which member: bench/results/replay_definitions.json
    assert propose("w.s") == ["ize", "pin("]  # private ones only when "_" is typed
    assert propose("w.sp") == ["in("]
    assert propose("w._") == ["secret("]
    inside = "class Widget:\n    size = 1\n\n    def grow(self):\n        self.g"
    assert propose("", head=inside) == ["row("]  # the document's own class


def test_imports_decide_between_two_definitions_and_the_document_comes_first() -> None:
    legacy = "from legacy.widgets import frobnicate_widget\n"
    assert propose("frobnicate_widget(", head=legacy) == [
        "gadget)",
        "colour=",
        "gadget, colour='red')",
    ]
    own = HEAD + "def frobnicate_widget(mine, *, loud=True):\n    pass\n\n"
    assert propose("frobnicate_widget(", head=own.replace("frobnicate_widget, ", "")) == [
        "mine)",
        "loud=",
        "mine, loud=True)",
    ]


def test_nothing_is_proposed_for_an_unknown_name() -> None:
    assert propose("unknown_function(") == []
    assert propose("mystery.") == []
    assert proposals("frobnicate_widget(", Resolver("frobnicate_widget(", "/ws/a.py")) == []
