"""Which open documents the memory may copy from into other documents (issue 34, item 1).

The memory indexes the documents open in the editor, saved or not, and proposes their text
word for word in the other documents; next edits propose an edit made in one of them in the
others. An open document obeys the rule a save of it would (``workspace.never_learned``): one
whose save would not be learned (a ``.env`` or ``secrets.*``, a git-ignored file, a file
outside the workspace folders, one whose text holds a key, one over ``maxFileBytes``, a
buffer that is no file) still serves its own drafts and next edits, never another
document's. Its own read only its own text, which the user has in front of them.

Where a file is (``workspace.placed``: its name, the ignore files) is judged when a document
is first seen, and again in the background after PLACE_TTL_S, the older verdict serving
meanwhile; the rule is asked with that verdict at each change of its text (about 10 ms per
MB). Called on the memory's and next edits' own threads, never the event loop. A judgement
runs git twice (``_gitignored``): about 5 ms a document here, 0.5 s for 100 documents opened
at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pygls.uris import to_fs_path

from lsp_server.workspace import Placed, never_learned, placed

# Where an open document lies is judged again after this long: a .gitignore edited, a
# workspace folder added meanwhile.
PLACE_TTL_S = 30.0


class Shareable:
    """The open documents that other documents' drafts may copy from; verdicts cached."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # uri -> (roots, when judged, where it lies and why never learned there)
        self._places: dict[str, tuple[tuple[Path, ...], float, Placed]] = {}
        self._texts: dict[str, tuple[str, int, str | None]] = {}  # uri -> (text, limit, why)
        self._again: set[str] = set()  # documents being judged again (in the background)
        self._judge = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shareable")

    def others(
        self, documents: Mapping[str, str], roots: Sequence[Path], max_bytes: int
    ) -> dict[str, str]:
        """The ``documents`` (uri -> text) whose text a save would learn; the verdicts of
        documents no longer open are dropped."""
        with self._lock:
            for gone in [u for u in self._places if u not in documents]:
                del self._places[gone]
            for gone in [u for u in self._texts if u not in documents]:
                del self._texts[gone]
        return {
            uri: text
            for uri, text in documents.items()
            if self.reason(uri, text, roots, max_bytes) is None
        }

    def forget(self, uri: str) -> None:
        """The document ``uri`` closed: its verdicts (and the text they were for) go."""
        with self._lock:
            self._places.pop(uri, None)
            self._texts.pop(uri, None)

    def held(self) -> int:
        """The documents with a verdict kept (tests)."""
        with self._lock:
            return len(self._places.keys() | self._texts.keys())

    def reason(self, uri: str, text: str, roots: Sequence[Path], max_bytes: int) -> str | None:
        """Why the open document ``uri`` does not feed the others' drafts; None: it may."""
        key, now = tuple(roots), time.monotonic()
        with self._lock:
            place = self._places.get(uri)
            known = self._texts.get(uri)
        if place is None or place[0] != key:  # never seen, or other workspace folders
            place = self._place(uri, roots)
        elif now - place[1] > PLACE_TTL_S:
            with self._lock:
                again = uri in self._again
                self._again.add(uri)
            if not again:
                self._judge.submit(self._place, uri, roots, True)
        where = place[2]
        if where.reason is not None:
            return where.reason
        if known is None or known[1] != max_bytes or (known[0] is not text and known[0] != text):
            known = (text, max_bytes, never_learned(where.path, text, roots, max_bytes, where))
            with self._lock:
                self._texts[uri] = known
        return known[2]

    def _place(
        self, uri: str, roots: Sequence[Path], again: bool = False
    ) -> tuple[tuple[Path, ...], float, Placed]:
        """Judge where ``uri`` lies (``workspace.placed``) and keep the verdict; ``again``: in
        the background, kept only if the document is still open."""
        path = to_fs_path(uri) if uri.startswith("file:") else None
        place = (tuple(roots), time.monotonic(), placed(Path(path) if path else None, roots))
        with self._lock:
            if not again or uri in self._places:
                self._places[uri] = place
            self._again.discard(uri)
        return place
