"""Proposals from the definitions a line calls: parameters inside a call, members after ``obj.``.

Small models do not read another file's signature and use it (issue 22: headers laid before
the window moved edit similarity by -4.5 points), but the decoder can: after
``frobnicate_widget(w, `` the definition's parameters are exactly what a draft needs. This
module turns the text before the cursor and a symbol lookup into proposal strings, the text
to insert at the cursor; lsp_server/definition_source.py hands them to the engine.

- Inside a call ``name(`` or ``obj.method(`` (arguments may be typed already): the argument
  list completed (the required parameters not yet given, then all of them with their
  defaults), and each keyword not yet given as ``name=``; a keyword name being typed is
  completed (``fo`` -> ``rce=``).
- After ``obj.`` (or ``obj.pre``) where ``obj`` resolves to a class (``self``, the class
  itself, ``obj = Class(...)`` or ``obj: Class`` in the document): its fields, then its
  methods as ``name(``.

Which definition a name means (``Resolver``): the open document's own definitions first
(the document is parsed as it is now), then the stored ones (ngram_db's symbols table),
where the document's imports decide between several definitions of one name
(``from pkg.mod import name`` prefers ``pkg/mod.py``). Python only, like ngram_db.symbols.
No pygls, no SQLite, no tensors here: the lookup is a function.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ngram_db.symbols import (
    ClassInfo,
    Param,
    Symbol,
    class_info,
    constructor,
    extract,
    parameters,
)

Lookup = Callable[[Sequence[str]], list[Symbol]]  # names -> their stored definitions
WINDOW_LINES = 60  # lines before the cursor read to find the call around it
MAX_PROPOSALS = 6
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CHAIN_END = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*)\s*$")
# keywords that a "(" may follow without a call
_NOT_CALLS = frozenset(
    {"def", "class", "if", "elif", "while", "for", "in", "not", "and", "or", "return"}
    | {"yield", "assert", "lambda", "await", "with", "except", "del", "import", "from"}
    | {"raise", "is"}
)


@dataclass
class Site:
    """What the text before the cursor ends inside: a call's arguments, or an attribute."""

    kind: str  # "call" or "attribute"
    chain: list[str]  # the callee or the object: ["frobnicate_widget"], ["obj", "method"]
    positional: int = 0  # arguments given by position
    keywords: set[str] = field(default_factory=set)  # arguments given by keyword
    starred: bool = False  # a *args was passed: positions are unknown
    typed: str = ""  # the identifier being typed at the cursor
    fresh: bool = False  # the cursor starts an argument (after ``(`` or ``,``)
    space: str = ""  # what a proposal starts with (" " right after a comma)


# ----- where the cursor is --------------------------------------------------------------------


def site_at(before: str) -> Site | None:
    """The call or attribute access the text before the cursor ends inside, or None (in a
    string or a comment, after a closed call, in a ``def`` line's parameters). Reads the
    last WINDOW_LINES lines, from their last definition at column 0 if they hold one."""
    text = "".join(before.splitlines(keepends=True)[-WINDOW_LINES:])
    return site_from(text, scan(text, scan_start(text)))


def scan_start(text: str) -> int:
    """Where a bracket scan of ``text`` may start: its last line at column 0 that opens a
    definition (no string or bracket is open there in practice), else its start. A window
    that starts inside a docstring would read the docstring's end as a string's start."""
    starts = [m.start() for m in _TOP_LEVEL.finditer(text)]
    return starts[-1] if starts else 0


def site_from(text: str, frames: list[tuple[str, int]] | None) -> Site | None:
    """The site at the end of ``text``, given the brackets open there (``scan``)."""
    if frames is None:
        return None  # in a string or a comment
    tail = text[-_TAIL_CHARS:]
    attribute = re.search(r"([A-Za-z_][A-Za-z0-9_.]*)\.([A-Za-z_][A-Za-z0-9_]*)?$", tail)
    if attribute and not re.search(r"[0-9]\.$", tail):
        chain = [p for p in attribute.group(1).split(".") if p]
        if chain and all(_IDENT.fullmatch(p) for p in chain):
            return Site("attribute", chain, typed=attribute.group(2) or "")
    if not frames or frames[-1][0] != "(":
        return None
    _, start = frames[-1]
    head = text[max(0, start - _TAIL_CHARS) : start]
    callee = _CHAIN_END.search(head)
    if callee is None:
        return None
    chain = [p.strip() for p in callee.group(1).split(".")]
    if chain[0] in _NOT_CALLS or re.search(r"\b(def|class)\s*$", head[: callee.start()]):
        return None
    return _arguments(Site("call", chain), _split_arguments(text[start + 1 :]))


_TOP_LEVEL = re.compile(r"^(?:async\s+def|def|class|@)\b", re.M)
_TAIL_CHARS = 200  # a callee or attribute chain is read from this many characters at most


_SPECIAL = re.compile(r"[#'\"()\[\]{}]")  # where the bracket scan stops
# A string's rest after its opening quote, up to its closing one (escapes skipped); a
# one-line string left open ends at its line, as Python says.
_STRING_END = {
    "'''": re.compile(r"(?:[^\\']|\\.|'(?!''))*'''", re.S),
    '"""': re.compile(r'(?:[^\\"]|\\.|"(?!""))*"""', re.S),
    "'": re.compile(r"(?:[^\\'\n]|\\.)*(?:'|\n)"),
    '"': re.compile(r'(?:[^\\"\n]|\\.)*(?:"|\n)'),
}


def scan(
    text: str, start: int = 0, stack: list[tuple[str, int]] | None = None
) -> list[tuple[str, int]] | None:
    """The brackets still open at the end of ``text`` (char, offset), innermost last, when
    ``stack`` were open at ``start``; None when the end is inside a string or a comment.
    Strings with any prefix, triple quotes and escapes are skipped; a closer without its
    opener is ignored. It jumps from one special character to the next: it runs for each
    draft at each step."""
    stack = list(stack or [])
    pairs = {")": "(", "]": "[", "}": "{"}
    i = start
    while (found := _SPECIAL.search(text, i)) is not None:
        at, ch = found.start(), found.group()
        if ch == "#":
            end = text.find("\n", at)
            if end < 0:
                return None
            i = end
        elif ch in "'\"":
            quote = text[at : at + 3] if text[at : at + 3] in ("'''", '"""') else ch
            rest = _STRING_END[quote].match(text, at + len(quote))
            if rest is None:
                return None  # the end is inside the string
            i = rest.end()
        else:
            if ch in "([{":
                stack.append((ch, at))
            elif stack and stack[-1][0] == pairs[ch]:
                stack.pop()
            i = at + 1
    return stack


def _split_arguments(inside: str) -> list[str]:
    """The arguments typed after a call's ``(``, split at its own commas (the last one is
    the argument at the cursor, maybe empty)."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in _blank_strings(inside):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _blank_strings(text: str) -> str:
    """``text`` with string literals' contents replaced by spaces (commas in them are no
    argument separators)."""
    return re.sub(r"('''|\"\"\"|'|\")(.*?)(\1)", lambda m: m[1] + " " * len(m[2]) + m[3], text)


def _arguments(site: Site, parts: list[str]) -> Site:
    """The site with the arguments given so far and the one at the cursor."""
    for part in parts[:-1]:
        given = part.strip()
        keyword = re.match(r"([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)", given)
        if keyword:
            site.keywords.add(keyword[1])
        elif given.startswith("*"):
            site.starred = True
        elif given:
            site.positional += 1
    current = parts[-1]
    site.fresh = not current.strip()
    typed = current.lstrip()
    if typed and re.fullmatch(r"[\w.=\-]*", typed):  # a name or a simple value, going on
        site.typed = typed
    site.space = " " if site.fresh and len(parts) > 1 and current == "" else ""
    return site


# ----- what a name means ----------------------------------------------------------------------


class Resolver:
    """Which definition a name of the document means: its own, then the store's (imports
    decide between several)."""

    def __init__(self, document: str, path: str, lookup: Lookup | None = None) -> None:
        self.document = document
        self.path = path
        self.own = extract(path or "document.py", document, "python")
        self.lookup = lookup
        self.imports = imports(document)  # local name -> (module, name there or "")

    def find(self, name: str, kind: str = "", scope: str | None = None) -> Symbol | None:
        """The definition of ``name`` (of ``kind``; a method of class ``scope``)."""

        def fits(s: Symbol) -> bool:
            return (not kind or s.kind == kind or kind == "callable" and s.kind != "method") and (
                scope is None or s.scope == scope
            )

        imported = self.imports.get(name)
        if imported is None or scope is not None:
            own = [s for s in self.own if s.name == name and fits(s)]
            if own:
                return own[-1] if scope is None else own[0]
        module, real = imported if imported and scope is None else ("", name)
        real = real or name
        if self.lookup is None:
            return None
        stored = [s for s in self.lookup([real]) if fits(s) and s.path != self.path]
        if module:
            tail = module.replace(".", "/").lstrip("/")
            preferred = [
                s for s in stored
                if s.path.replace("\\", "/").endswith((f"{tail}.py", f"{tail}/__init__.py"))
            ]  # fmt: skip
            stored = preferred or stored
        if len({s.header for s in stored}) > 1 and not module:
            here = self.path.rsplit("/", 1)[0]
            stored = [s for s in stored if s.path.startswith(here + "/")] or stored
        return stored[0] if stored else None

    def class_of(self, name: str, before: str) -> ClassInfo | None:
        """The class an object name stands for at the cursor: ``self``/``cls`` (the class
        around the cursor), a class name, or a variable assigned or annotated with one."""
        if name in ("self", "cls"):
            owner = _enclosing_class_name(before)
            return self._class(owner) if owner else None
        found = self._class(name)
        if found is not None:
            return found
        typed = re.findall(
            rf"\b{re.escape(name)}\s*(?::\s*([A-Za-z_][\w.]*)|=\s*([A-Za-z_][\w.]*)\s*\()",
            before,
        )
        for annotation, call in reversed(typed):
            candidate = (annotation or call).rsplit(".", 1)[-1]
            found = self._class(candidate)
            if found is not None:
                return found
        return None

    def _class(self, name: str) -> ClassInfo | None:
        symbol = self.find(name, kind="class") if _IDENT.fullmatch(name or "") else None
        return class_info(symbol.header) if symbol is not None else None

    def signature(self, chain: list[str], before: str) -> list[Param] | None:
        """The parameters a call of ``chain`` takes (self left out); None: not resolved."""
        name = chain[-1]
        if len(chain) == 1:
            symbol = self.find(name, kind="callable")
            if symbol is None:
                return None
            if symbol.kind == "class":
                info = class_info(symbol.header)
                return constructor(info) if info is not None else None
            return parameters(symbol.header)
        owner = chain[-2]
        if len(chain) == 2 and owner in self.imports and not self.imports[owner][1]:
            symbol = self.find(name, kind="callable")  # module.function(
            return parameters(symbol.header) if symbol is not None else None
        info = self.class_of(owner, before) if len(chain) == 2 else None
        if info is not None and name in info.methods:
            params = parameters(info.methods[name])
            static = owner == info.name and "self" not in [p.name for p in params[:1]]
            return params if static else params[1:]
        if info is None:  # an object of unknown class: a method only one class defines
            methods = self.lookup([name]) if self.lookup is not None else []
            headers = {s.header for s in methods if s.kind == "method"}
            if len(headers) == 1:
                return parameters(headers.pop())[1:]
        return None


def imports(document: str) -> dict[str, tuple[str, str]]:
    """local name -> (module, the name imported from it, "" for a module) of the
    document's ``import`` and ``from ... import`` statements."""
    found: dict[str, tuple[str, str]] = {}
    for module, names in re.findall(
        r"^\s*from\s+([\w.]+)\s+import\s+\(?([\w\s,]+?)\)?\s*$", document, re.M
    ):
        for item in names.split(","):
            parts = item.split()
            if len(parts) == 1:
                found[parts[0]] = (module, parts[0])
            elif len(parts) == 3 and parts[1] == "as":
                found[parts[2]] = (module, parts[0])
    for names in re.findall(r"^\s*import\s+([\w\s,.]+?)\s*$", document, re.M):
        for item in names.split(","):
            parts = item.split()
            if len(parts) == 3 and parts[1] == "as":
                found[parts[2]] = (parts[0], "")
            elif len(parts) == 1:
                found[parts[0].split(".")[0]] = (parts[0].split(".")[0], "")
    return found


def _enclosing_class_name(before: str) -> str:
    """The class whose body the end of ``before`` is in, by indentation."""
    lines = before.splitlines()
    if not lines:
        return ""
    current = lines[-1]
    depth = len(current) - len(current.lstrip())
    for line in reversed(lines[:-1]):
        stripped = line.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(stripped)
        if indent < depth:
            found = re.match(r"class\s+([A-Za-z_]\w*)", stripped)
            if found:
                return found[1]
            depth = indent
            if indent == 0:
                return ""
    return ""


# ----- proposals ---------------------------------------------------------------------------------


def proposals(
    before: str,
    resolver: Resolver,
    limit: int = MAX_PROPOSALS,
    *,
    scope: str | None = None,
    site: Site | None = None,
) -> list[str]:
    """The text to insert at the cursor that the definitions called at the end of ``before``
    propose, best first (none where the cursor is in no call or attribute, or nothing
    resolves). ``scope``: the whole text before the cursor, where variables' classes are
    read (default: ``before``); ``site``: ``site_at(before)`` if the caller has it."""
    site = site or site_at(before)
    if site is None:
        return []
    before = before if scope is None else scope
    if site.kind == "attribute":
        return _member_proposals(site, resolver, before)[:limit]
    params = resolver.signature(site.chain, before)
    if not params:
        return []
    return _argument_proposals(site, params)[:limit]


def _argument_proposals(site: Site, params: list[Param]) -> list[str]:
    """After ``(`` or ``,``: the argument list completed (the required parameters left, then
    all of them), and each keyword left as ``name=``; while an argument is typed, the rest
    of those it starts (``fo`` -> ``rce=``)."""
    left = [
        p
        for i, p in enumerate(params)
        if p.name not in site.keywords and (p.keyword_only or site.starred or i >= site.positional)
    ]
    if not left or not (site.fresh or site.typed):
        return []
    by_keyword = bool(site.keywords) or site.starred  # no more positions after a keyword
    required = [
        _argument(p, by_keyword or p.keyword_only, False) for p in left if p.default is None
    ]
    full = [_argument(p, by_keyword or p.keyword_only, True) for p in left]
    out: list[str] = []
    if required:
        out.append(", ".join(required) + ")")
    out += [
        f"{p.name}="
        for p in left
        if not p.positional_only and (p.default is not None or p.keyword_only)
    ]
    if full != required:
        out.append(", ".join(full) + ")")
    if site.typed:
        cut = len(site.typed)
        out = [text[cut:] for text in out if text.startswith(site.typed) and len(text) > cut]
    return [site.space + text for text in dict.fromkeys(out)]


def _argument(param: Param, keyword: bool, with_default: bool) -> str:
    """A parameter as an argument: its name (a variable of that name is the likeliest
    value), ``name=name`` where it must be a keyword, ``name=default`` with its default."""
    if with_default and param.default is not None:
        return f"{param.name}={param.default}"
    return f"{param.name}={param.name}" if keyword else param.name


def _member_proposals(site: Site, resolver: Resolver, before: str) -> list[str]:
    """After ``obj.pre``: the resolved class's fields, then its methods as ``name(``, that
    the typed prefix starts, completed (nothing right after the dot). Private names only
    when ``_`` is typed, dunder ones when ``__`` is."""
    if not site.typed:  # which member comes is the memory's and the model's to say: on the
        return []  # replay, the first-declared member right after "self." cost edit similarity
    info = resolver.class_of(site.chain[-1], before) if len(site.chain) == 1 else None
    if info is None:
        return []
    names = [f.name for f in info.fields] + [f"{m}(" for m in info.methods]
    out = [
        name[len(site.typed) :]
        for name in names
        if name.startswith(site.typed)
        and name.rstrip("(") != site.typed
        and (site.typed.startswith("_") or not name.startswith("_"))
        and (site.typed.startswith("__") or not name.startswith("__"))
    ]
    return list(dict.fromkeys(out))
