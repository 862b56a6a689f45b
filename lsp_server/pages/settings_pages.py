"""Write what a user reads of the settings from the one table, and check it.

lsp_server/settings.py (names, parsers, defaults) and lsp_server/pages/settings_docs.py (the words,
the order, the editors' own settings) generate:

- vscode-extension/package.json's ``contributes.configuration`` (names, types, defaults,
  choices, bounds, ``order``; the research knobs as one ``research`` object),
- README.md's settings tables, vscode-extension/README.md's and neovim/README.md's lists,
- the settings comment in neovim/lua/superposed/init.lua.

``python -m lsp_server.pages.settings_pages`` rewrites them; tests/test_settings_pages.py fails
when one drifts from the table.
"""

from __future__ import annotations

import argparse
import json
import re
import textwrap
from pathlib import Path
from typing import Any

from lsp_server import settings as s
from lsp_server.pages.settings_docs import BY_KEY, DOCS, EVERYDAY, RESEARCH_TEXT, Doc

ROOT = Path(__file__).resolve().parents[2]


def _server_schema(key: str) -> dict[str, Any]:
    """A server setting's JSON schema, read from its parser in settings.py."""
    parse = s._FIELDS[key][2]
    if isinstance(parse, s._Choice):
        return {"type": "string", "enum": list(parse.options)}
    if isinstance(parse, s._Int):
        return {"type": "integer", "minimum": parse.low, "maximum": parse.high}
    if isinstance(parse, s._Float):
        return {"type": "number", "minimum": parse.low, "maximum": parse.high}
    if isinstance(parse, s._PromptTokens):
        return {"type": "integer", "minimum": 0}
    by_parser: dict[Any, dict[str, Any]] = {
        s._bool: {"type": "boolean"},
        s._model_name: {"type": "string"},
        s._optional_path: {"type": "string"},
        s.index_folders: {"type": "array", "items": {"type": "string"}},
        s._orders: {
            "type": "array",
            "items": {"type": "integer", "minimum": 2, "maximum": 8},
            "minItems": 1,
        },
        s._lambdas: {"type": "object", "additionalProperties": {"type": "number", "minimum": 0}},
    }
    return dict(by_parser[parse])


def defaults() -> dict[str, Any]:
    """The server's defaults by key (a path the server chooses: the empty string)."""
    out = s.to_dict(s.Settings())
    return {key: "" if value is None else value for key, value in out.items()}


def _property(doc: Doc) -> dict[str, Any]:
    if doc.client is not None:
        prop = dict(doc.client)
    else:
        prop = {**_server_schema(doc.key), "default": defaults()[doc.key]}
    if doc.scope:
        prop["scope"] = doc.scope
    prop["description"] = doc.text
    return prop


def visible() -> list[str]:
    """The settings a VS Code user sees, in the Settings UI's order: the research knobs as one."""
    keys: list[str] = []
    for doc in DOCS:
        key = s.RESEARCH_KEY if doc.key in s.RESEARCH else doc.key
        if key not in keys:
            keys.append(key)
    return keys


def configuration() -> dict[str, Any]:
    """vscode-extension/package.json's ``contributes.configuration``."""
    properties: dict[str, Any] = {}
    for order, key in enumerate(visible(), start=1):
        if key == s.RESEARCH_KEY:
            knobs = {k: _property(BY_KEY[k]) for k in s.RESEARCH}
            prop: dict[str, Any] = {"type": "object", "default": {}, "properties": knobs}
            prop |= {"additionalProperties": False, "description": RESEARCH_TEXT}
        else:
            prop = _property(BY_KEY[key])
        properties[f"{s.SECTION}.{key}"] = {**prop, "order": order}
    return {"title": "Superposed Completions", "properties": properties}


def _shown(doc: Doc) -> str:
    """A default as the README's table shows it."""
    value = doc.client["default"] if doc.client is not None else defaults()[doc.key]
    if doc.shown_default:
        return doc.shown_default
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, str):
        return f"`{value}`" if value else "empty"
    if isinstance(value, list | dict):
        return f"`{json.dumps(value)}`"
    return str(value)


def _row(doc: Doc) -> str:
    """A README row; without words of its own, the editor's sentence in the table's style."""
    meaning = doc.readme or (doc.text[0].lower() + doc.text[1:]).removesuffix(".")
    return f"| `{doc.key}` | {_shown(doc)} | {meaning} |"


def readme_tables() -> str:
    """README.md's settings: the everyday and the other settings, then the research knobs."""
    head = ["| setting | default | meaning |", "|---|---|---|"]
    rows = [_row(d) for d in DOCS if d.key not in s.RESEARCH]
    research = [_row(BY_KEY[k]) for k in s.RESEARCH]
    intro = (
        f"Research knobs, set flat or inside one `{s.RESEARCH_KEY}` object (VS Code's "
        f"`superposed.{s.RESEARCH_KEY}`, in settings.json): the benchmarks turn them to compare "
        "decoding choices, and their defaults are what the benchmarks chose."
    )
    return "\n".join([*head, *rows, "", intro, "", *head, *research])


def _codes(keys: list[str] | tuple[str, ...]) -> str:
    return ", ".join(f"`{k}`" for k in keys)


def vscode_list() -> str:
    """vscode-extension/README.md's settings paragraph."""
    shown = visible()
    client = [d.key for d in DOCS if d.client is not None]
    return "\n".join(textwrap.wrap(
        f"In the Settings UI's order, the everyday ones first: {_codes(shown[:EVERYDAY])}; then "
        f"{_codes(shown[EVERYDAY:])}. `superposed.{s.RESEARCH_KEY}` (an object, set in "
        f"settings.json) holds the knobs the benchmarks turn: {_codes(s.RESEARCH)}. The "
        f"extension's own, never sent to the server: {_codes(client)}. Only the settings you "
        "change are sent to the server; the repository's README says what each one does.",
        width=96, break_long_words=False, break_on_hyphens=False,
    ))  # fmt: skip


def _server_order() -> list[str]:
    return [d.key for d in DOCS if d.client is None and d.key not in s.RESEARCH]


def neovim_list() -> str:
    """neovim/README.md's settings paragraph."""
    return "\n".join(textwrap.wrap(
        f"`settings` takes the server's names (the same as VS Code's `superposed.*`), the "
        f"everyday ones first: {_codes(_server_order())}; the research knobs flat or as "
        f"`{s.RESEARCH_KEY} = {{ ... }}`: {_codes(s.RESEARCH)}. Unset keys take the server's "
        "defaults; the repository's README says what each one does.",
        width=96, break_long_words=False, break_on_hyphens=False,
    ))  # fmt: skip


def neovim_comment() -> str:
    """The settings comment above ``settings = {}`` in neovim/lua/superposed/init.lua."""
    words = ", ".join(_server_order()) + "; research = { " + ", ".join(s.RESEARCH) + " }."
    lines = textwrap.wrap(words, width=92, break_long_words=False, break_on_hyphens=False)
    return "\n".join(f"  -- {line}" for line in lines)


# Each generated file: its path, and the text between its two markers (kept in the file).
_MD_START, _MD_END = (
    "<!-- settings: python -m lsp_server.pages.settings_pages -->",
    "<!-- end settings -->",
)
_LUA_START = "  -- settings: python -m lsp_server.pages.settings_pages"
_LUA_END = "  settings = {},"


def blocks() -> dict[Path, tuple[str, str, str]]:
    """The generated text of each file's settings block: path -> (start, text, end)."""
    return {
        ROOT / "README.md": (_MD_START, readme_tables(), _MD_END),
        ROOT / "vscode-extension" / "README.md": (_MD_START, vscode_list(), _MD_END),
        ROOT / "neovim" / "README.md": (_MD_START, neovim_list(), _MD_END),
        ROOT / "neovim" / "lua" / "superposed" / "init.lua": (
            _LUA_START, neovim_comment(), _LUA_END,
        ),
    }  # fmt: skip


def with_block(text: str, start: str, block: str, end: str) -> str:
    """``text`` with what lies between the lines ``start`` and ``end`` replaced by ``block``."""
    pattern = re.compile(re.escape(start) + r"\n.*?\n" + re.escape(end), re.S)
    if not pattern.search(text):
        raise ValueError(f"no block between {start!r} and {end!r}")
    return pattern.sub(lambda _: f"{start}\n{block}\n{end}", text, count=1)


MANIFEST = ROOT / "vscode-extension" / "package.json"


def manifest_text(current: str) -> str:
    """package.json with its ``contributes.configuration`` generated."""
    manifest = json.loads(current)
    manifest["contributes"]["configuration"] = configuration()
    return json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"


def generated() -> dict[Path, str]:
    """Every file the table writes, as it should read now."""
    out = {MANIFEST: manifest_text(MANIFEST.read_text())}
    for path, (start, block, end) in blocks().items():
        out[path] = with_block(path.read_text(), start, block, end)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write the settings' docs from the table.")
    parser.parse_args(argv)
    for path, text in generated().items():
        if path.read_text() != text:
            path.write_text(text)
            print(f"settings: wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
