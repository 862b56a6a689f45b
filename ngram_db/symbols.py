"""A file's definitions from tree-sitter tags: name, kind, line and a header that states them.

The store keeps these rows in its ``symbols`` table (ngram_db/schema.py) so that, inside a call
``frobnicate_widget(`` or after ``obj.``, the completion side can propose the parameters and
attributes of the definition the line calls (lsp_server/definitions.py, issue 22). The small
models do not use another file's signature when it is put in their prompt (issue 22); the
decoder can, once it has the signature as text.

Which definitions: the standard tags query of the language's grammar package (for Python,
tree-sitter-python's ``queries/tags.scm``), run with tree-sitter's Query/QueryCursor. The
``@definition.*`` captures name the definitions; what this module adds is the header:

- a function: its signature with parameters, defaults and annotations, on one line
  (``def frobnicate_widget(widget, *, force=False, retries=3) -> bool``);
- a class: its decorators and ``class Name(bases):``, then its fields (annotated class
  attributes, dataclass fields, plain class assignments) and the signatures of its methods
  (``__init__`` among them) as ``def ...: ...`` lines, so that the header is Python again
  and lsp_server/definitions.py reads it with the same parser.

The header's format is written and read here: ``parameters``, ``class_info`` and
``constructor`` read one back (for the proposals of lsp_server/definitions.py).

Other languages: only Python for now. tree-sitter-language-pack 0.13 bundles grammars but no
queries, and tree-sitter-python is the only grammar package installed with a ``tags.scm``;
for another language ``extract`` returns no rows (``SUPPORTED`` says which languages give
some). Python first because the product's replay is Python.

Rows are cheap to make (a parse of a 1,000-line file takes a few milliseconds), so a save
re-extracts the whole file and replaces its rows: the store's delta is exact by construction.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ngram_db.languages import language_of

log = logging.getLogger(__name__)

SUPPORTED = ("python",)  # languages whose tags query is installed (see the module docstring)
MAX_HEADER_CHARS = 4_000  # a class with hundreds of fields keeps its first ones
MAX_MEMBER_CHARS = 160  # a field line longer than this keeps its name and type only
MAX_PARSE_BYTES = 2_000_000  # above index-repo's default size limit: never parsed in practice


@dataclass(frozen=True)
class Symbol:
    """One definition of a file: what the ``symbols`` table holds per row."""

    name: str
    kind: str  # "function", "method", "class"
    path: str  # the store's file key
    line: int  # 0-based line of the definition (its decorators excluded)
    header: str  # Python text stating it (see the module docstring)
    scope: str = ""  # the enclosing class of a method, "" at the top level


@functools.cache
def _query(language: str) -> Any:
    """The tags query of ``language`` (compiled once)."""
    import tree_sitter
    import tree_sitter_language_pack

    if language != "python":
        raise ValueError(f"no tags query for {language}")
    import tree_sitter_python

    source = (Path(tree_sitter_python.__file__).parent / "queries" / "tags.scm").read_text()
    return tree_sitter.Query(tree_sitter_language_pack.get_language("python"), source)


@functools.cache
def _parser(language: str) -> Any:
    import tree_sitter_language_pack

    return tree_sitter_language_pack.get_parser(language)  # type: ignore[arg-type]


def parse(text: str, language: str = "python") -> Any:
    """The tree-sitter tree of ``text`` (errors in the text give ERROR nodes, never raise)."""
    return _parser(language).parse(text.encode("utf-8", "surrogatepass"))


def extract(path: str, text: str, language: str | None = None) -> list[Symbol]:
    """The definitions of ``text`` (the content of ``path``); [] for an unsupported language.

    ``language`` None: from the path's name (ngram_db.languages).
    """
    language = language or language_of(path)
    if language not in SUPPORTED or len(text) > MAX_PARSE_BYTES:
        return []
    import tree_sitter

    tree = parse(text, language)
    cursor = tree_sitter.QueryCursor(_query(language))
    rows: list[Symbol] = []
    for _, captures in cursor.matches(tree.root_node):
        kinds = [k for k in captures if k.startswith("definition.")]
        names = captures.get("name") or []
        if not kinds or not names:
            continue
        node = captures[kinds[0]][0]
        name = _text(names[0])
        if _broken_head(node):  # half typed: its header would state nothing true
            continue
        if node.type == "class_definition":
            rows.append(Symbol(name, "class", path, node.start_point[0], class_header(node)))
        elif node.type == "function_definition":
            scope = _enclosing_class(node)
            kind = "method" if scope else "function"
            rows.append(Symbol(name, kind, path, node.start_point[0], function_header(node), scope))
    return rows


def extract_safely(path: str, text: str, language: str | None = None) -> list[Symbol]:
    """``extract``, with a failure logged and no rows: a save's counts never wait on it."""
    try:
        return extract(path, text, language)
    except Exception:  # a grammar or query problem: the n-grams are still learned
        log.exception("symbols: could not extract the definitions of %s", path)
        return []


def function_header(node: Any) -> str:
    """``[async ]def name(params) -> returns`` of a function_definition, on one line."""
    return _head(node, ("return_type", "parameters", "name"))


def _head(node: Any, ends: tuple[str, ...]) -> str:
    """A definition's text up to the end of the first of the ``ends`` fields it has, its
    whitespace collapsed (not up to the body: a half-typed body can start early)."""
    end = next((p.end_byte for p in map(node.child_by_field_name, ends) if p is not None), None)
    data = bytes(node.text or b"")
    if end is not None:
        data = data[: end - node.start_byte]
    return " ".join(data.decode("utf-8", "replace").split())


def class_header(node: Any) -> str:
    """A class's decorators, ``class`` line, fields and method signatures, as Python text."""
    parent = node.parent
    lines = []
    if parent is not None and parent.type == "decorated_definition":
        lines += [" ".join(_text(d).split()) for d in parent.children if d.type == "decorator"]
    body = node.child_by_field_name("body")
    lines.append(_head(node, ("superclasses", "name")) + ":")
    members = [_member(s) for s in (body.named_children if body is not None else [])]
    lines += ["    " + m for m in members if m] or ["    ..."]
    header = "\n".join(lines)
    if len(header) > MAX_HEADER_CHARS:  # keep whole lines
        header = header[:MAX_HEADER_CHARS].rsplit("\n", 1)[0]
    return header


def _member(statement: Any) -> str | None:
    """A class body statement as a header line: a field, or a method's signature; else None."""
    if statement.type == "decorated_definition":
        inner = statement.child_by_field_name("definition")
        if inner is not None and inner.type == "function_definition":
            return function_header(inner) + ": ..."
        return None
    if statement.type == "function_definition":
        return function_header(statement) + ": ..."
    assignment = statement
    if statement.type == "expression_statement" and statement.named_children:
        assignment = statement.named_children[0]  # older grammars wrap it
    left = assignment.child_by_field_name("left") if assignment.type == "assignment" else None
    if left is None or left.type != "identifier":
        return None
    line = " ".join(_text(assignment).split())
    if len(line) > MAX_MEMBER_CHARS:  # a long literal: its name (and type) say enough
        value = assignment.child_by_field_name("right")
        cut = value.start_byte - assignment.start_byte if value is not None else len(line)
        line = " ".join(_text(assignment)[:cut].split()).rstrip("=").rstrip() + " = ..."
    return line
    return None


def _broken_head(node: Any) -> bool:
    """Whether a definition's part before its body has a syntax error."""
    fields = ("name", "parameters", "return_type", "superclasses")
    return (
        any(
            part is not None and (part.has_error or part.is_missing)
            for part in map(node.child_by_field_name, fields)
        )
        or node.child_by_field_name("body") is None
    )


def _enclosing_class(node: Any) -> str:
    """The name of the class whose body holds ``node`` directly, or ""."""
    parent = node.parent
    if parent is not None and parent.type == "decorated_definition":
        parent = parent.parent
    if parent is None or parent.type != "block":
        return ""
    owner = parent.parent
    if owner is None or owner.type != "class_definition":
        return ""
    name = owner.child_by_field_name("name")
    return _text(name) if name is not None else ""


def _text(node: Any) -> str:
    return "" if node is None else bytes(node.text or b"").decode("utf-8", "replace")


_FIELD_BASES = ("NamedTuple", "BaseModel", "TypedDict")  # classes constructed from fields


@dataclass(frozen=True)
class Param:
    """One parameter of a signature."""

    name: str
    default: str | None = None  # its default's text; None: required
    keyword_only: bool = False  # after ``*`` or ``*args``
    positional_only: bool = False  # before ``/``


# ----- reading a header back (lsp_server/definitions.py) -------------------------------------


@functools.lru_cache(maxsize=1024)  # a header is read at each step of each draft in its call
def parameters(header: str) -> list[Param]:
    """The parameters of a function header (``def f(a, *, b=1) -> T``), ``*args`` and
    ``**kwargs`` left out."""
    tree = parse(header.strip() + ": ...\n")
    for node in _walk(tree.root_node):
        if node.type == "function_definition":
            found = node.child_by_field_name("parameters")
            return _params(found) if found is not None else []
    return []


def _params(node: Any) -> list[Param]:
    out: list[Param] = []
    keyword_only = False
    for child in node.named_children:
        kind = child.type
        if kind == "keyword_separator":
            keyword_only = True
        elif kind == "positional_separator":
            out = [Param(p.name, p.default, p.keyword_only, True) for p in out]
        elif kind == "list_splat_pattern":
            keyword_only = True
        elif kind in ("identifier", "typed_parameter"):
            name = _first_identifier(child)
            if name:
                out.append(Param(name, None, keyword_only))
        elif kind in ("default_parameter", "typed_default_parameter"):
            name_node = child.child_by_field_name("name")
            value = child.child_by_field_name("value")
            if name_node is not None and value is not None:
                out.append(Param(_text(name_node), _text(value), keyword_only))
    return out


@dataclass
class ClassInfo:
    """What a class header (ngram_db.symbols.class_header) states."""

    name: str
    fields: list[Param]  # annotated or assigned class attributes, in order
    annotated: list[Param]  # the annotated ones (a dataclass's constructor)
    methods: dict[str, str]  # name -> signature header
    constructed_from_fields: bool  # a dataclass, NamedTuple, pydantic model, TypedDict


@functools.lru_cache(maxsize=1024)
def class_info(header: str) -> ClassInfo | None:
    """The parts of a class header, or None if it states no class."""
    tree = parse(header.strip() + "\n")
    node = next((n for n in _walk(tree.root_node) if n.type == "class_definition"), None)
    if node is None:
        return None
    name = _text(node.child_by_field_name("name"))
    bases = _text(node.child_by_field_name("superclasses"))
    decorators = [line for line in header.splitlines() if line.startswith("@")]
    info = ClassInfo(
        name,
        [],
        [],
        {},
        any("dataclass" in d or "attr.s" in d or "define" in d for d in decorators)
        or any(b in bases for b in _FIELD_BASES),
    )
    body = node.child_by_field_name("body")
    for statement in body.named_children if body is not None else []:
        inner = statement.named_children[0] if statement.type == "expression_statement" else None
        assignment = inner if inner is not None and inner.type == "assignment" else statement
        if statement.type == "function_definition":
            method = _text(statement.child_by_field_name("name"))
            info.methods[method] = _signature(statement)
        elif assignment.type == "assignment":
            left = assignment.child_by_field_name("left")
            if left is None or left.type != "identifier":
                continue
            value = assignment.child_by_field_name("right")
            kind = assignment.child_by_field_name("type")
            param = Param(_text(left), _text(value) if value is not None else None)
            info.fields.append(param)
            if kind is not None and "ClassVar" not in _text(kind):
                info.annotated.append(param)
    return info


def constructor(info: ClassInfo) -> list[Param]:
    """The parameters a call of the class takes: its ``__init__``'s (self left out), else
    its fields where it is constructed from them (a dataclass), else none known."""
    if "__init__" in info.methods:
        return parameters(info.methods["__init__"])[1:]
    if info.constructed_from_fields:
        return info.annotated
    return []


def _signature(node: Any) -> str:
    body = node.child_by_field_name("body")
    data = bytes(node.text or b"")
    if body is not None:
        data = data[: body.start_byte - node.start_byte]
    return " ".join(data.decode("utf-8", "replace").split()).rstrip(":").rstrip()


def _walk(node: Any) -> Any:
    yield node
    for child in node.children:
        yield from _walk(child)


def _first_identifier(node: Any) -> str:
    if node.type == "identifier":
        return _text(node)
    for child in node.named_children:
        if child.type == "identifier":
            return _text(child)
    return ""
