"""Where a request is: URIs and the files they name, the workspace folders, and where a file
is learned (or why it never is).

The one place that turns a ``file:`` URI into a path (``path_of``), reads the workspace's
folders (``roots_of``), resolves paths against them (``workspace_root``, ``root_for``,
``placed``; ``never_learned``: ngram_db.files' rule in the workspace, which a save, an
accepted draft, an open document that others' drafts copy from and next edits all obey) and
snapshots a request's document and workspace (``Where``). No store is opened here: which
apply is stores.py's (Stores.for_path).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple
from urllib.parse import unquote

from pygls.uris import to_fs_path
from pygls.workspace import Workspace

from ngram_db import files
from ngram_db.files import path_skip_reason


def doc_key(uri: str) -> str:
    """One key per document for the caches, as pygls keys its open documents."""
    return unquote(uri)


def roots_of(workspace: Workspace) -> list[Path]:
    """The workspace's folders (else its root path): where codebase stores belong."""
    roots = [Path(to_fs_path(f.uri) or "") for f in workspace.folders.values()]
    if not roots and workspace.root_path:
        roots.append(Path(workspace.root_path))
    return roots


def path_of(uri: str) -> Path | None:
    """The file a ``file:`` URI names; None for any other URI."""
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return Path(path) if path else None


class UnresolvablePath(ValueError):
    """A path that cannot be resolved: a loop of symbolic links on its way."""


def resolved(path: Path) -> Path:
    """``path`` with every symbolic link resolved; UnresolvablePath for a loop of links."""
    try:
        return path.resolve()
    except (RuntimeError, OSError) as err:  # Python 3.11 raises RuntimeError("Symlink loop")
        raise UnresolvablePath(f"{path} goes through a loop of symbolic links ({err})") from err


def repo_root(path: Path) -> Path | None:
    """The nearest folder at or above ``path`` that holds a ``.git``."""
    for folder in [path, *path.parents]:
        if (folder / ".git").exists():
            return folder
    return None


def workspace_root(path: Path, roots: Sequence[Path]) -> Path | None:
    """The innermost workspace root that contains ``path`` once both are resolved (None for a
    path that cannot be resolved: it is in no workspace anyone can name)."""
    try:
        path = resolved(path)
    except UnresolvablePath:
        return None
    inside = []
    for root in roots:
        with contextlib.suppress(UnresolvablePath):
            inside.append(resolved(root))
    inside = [r for r in inside if path == r or r in path.parents]
    return max(inside, key=lambda r: len(r.parts)) if inside else None


def root_for(path: Path, roots: Sequence[Path]) -> Path | None:
    """The innermost workspace root that contains ``path``, else its git repository."""
    inside = workspace_root(path, roots)
    if inside is not None:
        return inside
    try:
        return repo_root(resolved(path).parent)
    except UnresolvablePath:
        return None


class Placed(NamedTuple):
    """A file as the stores see it: resolved, its workspace folder, and why its text is never
    learned by where it is (None: its text decides)."""

    path: Path | None  # resolved; None: not a file, or a loop of links on its way
    root: Path | None  # the innermost workspace folder that holds it; None: none does
    reason: str | None


def placed(path: Path | None, roots: Sequence[Path]) -> Placed:
    """Where ``path`` is learned, or why it never is: not a file, a loop of symbolic links,
    outside the workspace folders, or the rule before the text is read (its name, the
    ignore files: ``ngram_db.files.never_learned``)."""
    if path is None:
        return Placed(None, None, "not a file")
    try:
        real = resolved(path)
    except UnresolvablePath:
        return Placed(None, None, "symlink loop")
    root = workspace_root(real, roots)
    if root is None:
        return Placed(real, None, "outside the workspace")
    return Placed(real, root, path_skip_reason(real, root))


def never_learned(
    path: Path | None,
    text: str,
    roots: Sequence[Path],
    max_bytes: int,
    place: Placed | None = None,
) -> str | None:
    """Why ``text`` in the file ``path`` is never learned, nor moved into another document;
    None: it may be.

    The rule (``ngram_db.files.never_learned``) in the workspace: the file must lie in a
    workspace folder (``placed``: its name and the ignore files judged there), then its text
    is judged. Asked for a save of the file (``text``: its text), a draft accepted in it (the
    draft with its line), an open document that other documents' drafts would copy from
    (lsp_server/stores/shareable_documents.py), a next edit made in it and a workspace file read
    for next
    edits' sites. ``place``: ``placed(path, roots)`` judged before (kept, or asked before the
    file was read).
    """
    place = place or placed(path, roots)
    if place.reason is not None or place.path is None or place.root is None:
        return place.reason or "outside the workspace"
    rel = place.path.relative_to(place.root).as_posix()
    return files.never_learned(rel, text, max_bytes=max_bytes)


@dataclass(frozen=True)
class Where:
    """A request's document and the workspace around it, as they were when it came."""

    uri: str
    path: Path | None  # the document's file (None: not a file: URI)
    roots: list[Path]  # the workspace folders
    documents: dict[str, str]  # the open documents: uri -> text (pygls keeps them current)

    @classmethod
    def of(cls, uri: str, workspace: Workspace) -> Where:
        documents = {u: d.source for u, d in workspace.text_documents.items()}
        return cls(uri, path_of(uri), roots_of(workspace), documents)
