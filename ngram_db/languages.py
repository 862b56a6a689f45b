"""A file's language from its name, and which files' text the memory may propose where.

The memory (lsp_server/stores/match_indexes.py) matches a draft's context in every indexed file; a
Python
line once drew ``-the-world-is-a-local-clone-of-your-fork`` from a reStructuredText guide
(issue 22). So each stream of a suffix index carries its file's language, and a request
matches in two tiers (``tiers``):

1. the files of the document's language, and those whose language is unknown (an accepted
   draft, a file named ``Jenkinsfile``): nothing says they cross a line;
2. only when the first tier matches nothing: the other languages of the same kind.

Never across kinds: code, prose and data (configuration, tables) stay apart. A document whose
language is unknown matches everything, as before.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from urllib.parse import unquote, urlparse

import numpy as np

CODE, PROSE, DATA = "code", "prose", "data"
UNKNOWN = -1  # a stream's language code when its file's name says nothing

_CODE = {
    "python": ".py .pyi .pyw .pyx .pxd",
    "javascript": ".js .mjs .cjs .jsx",
    "typescript": ".ts .tsx .mts .cts",
    "c": ".c .h",
    "cpp": ".cc .cpp .cxx .hh .hpp .hxx .ipp",
    "csharp": ".cs",
    "java": ".java",
    "kotlin": ".kt .kts",
    "scala": ".scala",
    "go": ".go",
    "rust": ".rs",
    "ruby": ".rb",
    "php": ".php",
    "swift": ".swift",
    "lua": ".lua",
    "shell": ".sh .bash .zsh .fish",
    "powershell": ".ps1 .psm1",
    "r": ".r",
    "julia": ".jl",
    "haskell": ".hs",
    "ocaml": ".ml .mli",
    "elixir": ".ex .exs",
    "erlang": ".erl .hrl",
    "clojure": ".clj .cljs .cljc",
    "dart": ".dart",
    "zig": ".zig",
    "nim": ".nim",
    "perl": ".pl .pm",
    "sql": ".sql",
    "html": ".html .htm",
    "css": ".css .scss .sass .less",
    "vue": ".vue",
    "svelte": ".svelte",
    "vim": ".vim",
    "make": ".mk",
    "cmake": ".cmake",
    "dockerfile": ".dockerfile",
}
_PROSE = {
    "markdown": ".md .markdown .mdx",
    "restructuredtext": ".rst",
    "asciidoc": ".adoc .asciidoc",
    "text": ".txt .text",
    "tex": ".tex",
    "org": ".org",
}
_DATA = {
    "json": ".json .jsonc .json5",
    "yaml": ".yaml .yml",
    "toml": ".toml",
    "ini": ".ini .cfg .conf",
    "xml": ".xml .svg",
    "csv": ".csv .tsv",
}
# Files whose name says their language without an extension.
_NAMES = {
    "makefile": "make",
    "gnumakefile": "make",
    "dockerfile": "dockerfile",
    "cmakelists.txt": "cmake",
    "readme": "text",
    "license": "text",
    "licence": "text",
    "copying": "text",
    "authors": "text",
    "contributors": "text",
    "changelog": "text",
    "changes": "text",
    "notice": "text",
}

KINDS: dict[str, str] = {
    name: kind for kind, table in ((CODE, _CODE), (PROSE, _PROSE), (DATA, _DATA)) for name in table
}
NAMES: tuple[str, ...] = tuple(KINDS)  # a language's code is its position here
_CODES = {name: i for i, name in enumerate(NAMES)}
_BY_SUFFIX = {
    suffix: name
    for table in (_CODE, _PROSE, _DATA)
    for name, suffixes in table.items()
    for suffix in suffixes.split()
}
_KIND_OF_CODE = np.array([KINDS[n] for n in NAMES] + [""], dtype=object)  # [L + 1]: -1 -> ""


def language_of(path: str) -> str | None:
    """The language of a file path or a ``file:`` URI by its name; None when it is unknown."""
    if "://" in path or path.startswith("file:"):
        path = unquote(urlparse(path).path)
    name = posixpath.basename(path.replace("\\", "/")).lower()
    if name in _NAMES:
        return _NAMES[name]
    return _BY_SUFFIX.get(posixpath.splitext(name)[1])


def codes(paths: Iterable[str]) -> np.ndarray:
    """[S] int16: each path's language code (UNKNOWN where its name says nothing)."""
    out = [_CODES.get(language_of(p) or "", UNKNOWN) for p in paths]
    return np.array(out, dtype=np.int16)


def tiers(languages: np.ndarray, language: str | None) -> tuple[np.ndarray, np.ndarray] | None:
    """Which streams a document in ``language`` matches, in two tiers ([S] bool each): its own
    language (and unknown ones), then the other languages of its kind; None: no filter (the
    document's language is unknown)."""
    if language is None or language not in _CODES:
        return None
    own = (languages == _CODES[language]) | (languages == UNKNOWN)
    kind = _KIND_OF_CODE[languages]  # [S] (UNKNOWN indexes the trailing "")
    near = (kind == KINDS[language]) & ~own
    return own, near
