"""Workspace sites: the codebase store's files that hold a pattern, read from disk.

The store's suffix indexes (lsp_server/stores/store_indexes.py, ngram_db/suffix.py) hold every
stored
file's token ids: the pattern's anchor (sites.anchor), tokenized alone and after a space as
the model's tokenizer splits it inside a file, finds the files that hold it in one lookup
each. Those files (at most MAX_FILES, not open in the editor) are read from disk and searched
like an open document: the index only picks them, the text decides.

A file is read only as index-repo would read it, whatever the repository put there since it
was stored (a pulled commit can replace a file by a link): the rule is asked first, on where
it lies (``workspace.placed``: in a workspace folder, its name, the ignore files), and a file
it keeps out is never opened; then ``ngram_db.files.read_text`` opens it only if it is a
regular file and not a link (``ngram_db.regular.open_regular``: a FIFO does not block, a
device such as /dev/zero or /dev/stdin is not read), never reads more than ``maxFileBytes``
(a bigger file is not read, nor parsed), and asks the rule again on its text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pygls.uris import from_fs_path

from lsp_server.next_edits.patterns import Pattern
from lsp_server.next_edits.proposals import Doc
from lsp_server.next_edits.sites import anchor
from lsp_server.workspace import placed
from ngram_db.errors import NgramStoreError
from ngram_db.files import Candidate, Skipped, read_text
from ngram_db.suffix_store import Segment

log = logging.getLogger(__name__)

MAX_FILES = 50  # files read for one pattern at most

Finder = Callable[[Pattern], Iterable[tuple[str, Doc]]]


def files_holding(
    segments: Sequence[Segment], encode: Callable[[str], Any], text: str
) -> list[str]:
    """The paths of the segments' alive streams that hold ``text``'s token ids (as the
    tokenizer splits it alone or after a space), the delta's first."""
    variants = {tuple(int(i) for i in encode(t)) for t in (text, " " + text)}
    paths: dict[str, None] = {}
    for segment in segments:
        index = segment.index
        ends = np.cumsum(segment.lengths + 1) - 1  # [S] each stream's separator
        alive = index.alive
        for ids in variants:
            if not ids:
                continue
            depth, after = index.longest(list(ids))
            if depth < len(ids):
                continue
            streams = np.unique(np.searchsorted(ends, after - 1))  # the stream of each end
            for stream in streams.tolist():
                if stream < len(segment.files) and (alive is None or alive[stream]):
                    paths[segment.files[stream][0]] = None
    return list(paths)


def finder(
    segments: Sequence[Segment],
    encode: Callable[[str], Any],
    roots: Sequence[Path],
    max_bytes: int,
) -> Finder:
    """What scope ``workspace`` asks for a pattern's files (proposals.NextEdits.propose)."""

    def find(pattern: Pattern) -> Iterable[tuple[str, Doc]]:
        for path in files_holding(segments, encode, anchor(pattern))[:MAX_FILES]:
            text = readable(path, roots, max_bytes)
            if text is not None:
                yield from_fs_path(path) or "", Doc(text, None, path)

    return find


def readable(path: str, roots: Sequence[Path], max_bytes: int) -> str | None:
    """The text of the stored file ``path`` if the rule lets it lend its sites (asked before
    it is opened, then on its text) and it is still a regular file of at most ``max_bytes``
    (not a link, a FIFO or a device); None otherwise (gone, unreadable, or not text)."""
    place = placed(Path(path), roots)
    if place.reason is not None or place.path is None or place.root is None:
        return None
    rel = place.path.relative_to(place.root).as_posix()
    try:  # the path as stored: a link put in its place is not followed
        return read_text(Candidate(rel, path), place.root, max_bytes)
    except Skipped:
        return None


def finder_for(
    session: Any, path: Path | None, roots: Sequence[Path], max_bytes: int
) -> Finder | None:
    """The finder over the codebase store of ``path`` (a document's file) in a loaded
    ``session`` (lsp_server/session.py); None before the model is loaded (the memory's
    indexes need its tokenizer) or without a usable store."""
    from lsp_server.session import Session  # the session imports the engine: only here

    if not isinstance(session, Session):
        return None
    try:
        store = session.stores.for_path(path, roots).codebase
    except NgramStoreError:
        return None
    if store is None:
        return None
    segments = session.indexes.stores.store_segments(store)
    tokenizer = store.tokenizer

    def encode(text: str) -> Any:
        return tokenizer.encode_batch([text])[0]

    return finder(segments, encode, roots, max_bytes)
