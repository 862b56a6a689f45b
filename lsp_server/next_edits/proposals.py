"""Next edits: the recent patterns' sites, ranked, as the protocol's EDIT objects.

The server feeds the log (log.py) from didOpen/didChange/didClose; each ended change gives
at most one pattern (patterns.py), and the last PATTERNS patterns propose. A proposal is a
site (sites.py) in the document asked about (origin ``file``), in the other open documents
(``open``) or in the workspace's files (``workspace``), as the scope setting allows. Ranked
by origin, then by rows from the cursor, weighed by how often the user accepted and
dismissed proposals of that kind. Thread-safe: the server computes proposals off the event
loop (a document's first privacy verdict runs git).

Privacy: a proposal for a site in document B holds the edit's text and B's own text, nothing
else. An edit made in a document that a save would not learn
(lsp_server/stores/shareable_documents.py)
proposes only in that document.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from lsp_server.next_edits import tokens
from lsp_server.next_edits.log import Change, EditLog
from lsp_server.next_edits.patterns import Derived, Pattern, derive
from lsp_server.next_edits.sites import Site, find
from lsp_server.settings import NEXT_EDIT_SCOPES

PAUSE_S = 0.3  # NEXT_EDITS_PAUSE_S: a change ends this long after its last keystroke
# ... or this long when that keystroke left the caret right after a name's character: the user
# may be typing the name still (a pause mid-rename proposed "rename words -> tok", issue 52);
# a keystroke elsewhere ends it at once as ever.
NAME_PAUSE_S = 1.0
PATTERNS = 3  # the last ended changes' patterns that propose
# Edits in one answer at most, the nearest: a user reads the first few (bench/next_edits.py's
# walk reads 3) and each accept brings the next ones; every one shown that is wrong costs
# precision (a rename's far sites are the most often wrong: other variables of that name).
MAX_EDITS = 3
# A site in the edited document first, then the open ones, then the workspace's.
_ORIGIN_RANK = {scope: rank for rank, scope in enumerate(NEXT_EDIT_SCOPES)}
_DISMISSED_KEPT = 10_000


class Doc(NamedTuple):
    """An open document as a proposal reads it."""

    text: str
    version: int | None
    language: str


@dataclass(frozen=True)
class Proposal:
    """One next edit: a site, its id, and its document's version when found."""

    id: str
    site: Site
    version: int | None

    def to_json(self, units: Callable[[str], int]) -> dict[str, Any]:
        """The protocol's EDIT; ``units``: a string's length in the client's position units."""
        site, row = self.site, self.site.row
        start = {"line": row, "character": units(site.line[: site.start])}
        end = {"line": row, "character": units(site.line[: site.end])}
        return {
            "id": self.id,
            "textDocument": {"uri": site.uri, "version": self.version},
            "range": {"start": start, "end": end},
            "newText": site.new_text,
            "oldText": site.old_text,
            "origin": site.origin,
            "label": site.pattern.label,
        }


def _key(site: Site) -> tuple[str, str, int, int, str]:
    """What a dismissal is kept by: the site's line and range, not its row (lines added
    above it move it)."""
    return (site.uri, site.line, site.start, site.end, site.new_text)


def _id(site: Site) -> str:
    raw = "\0".join(map(str, (site.uri, site.row, site.start, site.end, site.new_text)))
    return hashlib.sha1(raw.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _same(a: Pattern, b: Pattern) -> bool:
    """The same rewrite, wherever it was made."""
    return replace(a, uri="", row=-1, columns=(0, 0), label="") == replace(
        b, uri="", row=-1, columns=(0, 0), label=""
    )


class NextEdits:
    """The edit log, the patterns that propose, and what the user accepted and dismissed."""

    def __init__(self) -> None:
        self.log = EditLog()
        self._lock = threading.Lock()
        self._patterns: deque[Pattern] = deque(maxlen=PATTERNS)  # the newest first
        self._given: dict[str, Proposal] = {}  # id -> the proposals last given, per id
        self._dismissed: dict[tuple[str, str, int, int, str], None] = {}
        self._last: dict[str, tuple[Change, Pattern | None]] = {}  # uri -> last ended, its pattern
        self.accepts: Counter[str] = Counter()  # per pattern kind
        self.dismissals: Counter[str] = Counter()

    def ended(self, change: Change, language: str) -> Derived:
        """An ended change: its pattern (if any) proposes from now on, the newest first."""
        derived = derive(change, language)
        with self._lock:
            last = self._last.get(change.uri)
            self._last[change.uri] = (change, derived.pattern)
            kept = list(self._patterns)
            if last is not None and last[1] is not None and change.before is last[0].before:
                # the change went on where a pause had ended it (the log re-opened it):
                # what it proposed half-typed ("fet_user") goes
                kept = [p for p in kept if p is not last[1]]
            if derived.pattern is not None:
                kept = [derived.pattern, *(p for p in kept if not _same(p, derived.pattern))]
            # the newest PATTERNS (a deque given more than its maxlen keeps the last ones:
            # the oldest, and a fourth pattern never proposed)
            self._patterns = deque(kept[:PATTERNS], maxlen=PATTERNS)
        return derived

    def closed(self, uri: str) -> None:
        """didClose: the log's copy goes, and the patterns made there (their sites in other
        documents would quote a document no longer open), its parse, the proposals given
        there."""
        self.log.close(uri)
        tokens.forget(uri)
        with self._lock:
            self._last.pop(uri, None)
            self._patterns = deque((p for p in self._patterns if p.uri != uri), maxlen=PATTERNS)
            self._given = {
                i: p for i, p in self._given.items() if uri not in (p.site.uri, p.site.pattern.uri)
            }

    def clear(self) -> None:
        """Next edits turned off: the log, the patterns and the proposals given go (what
        the user accepted and dismissed stays)."""
        self.log.clear()
        for uri in tokens.kept():
            tokens.forget(uri)
        with self._lock:
            self._last.clear()
            self._patterns.clear()
            self._given.clear()

    def patterns(self) -> list[Pattern]:
        with self._lock:
            return list(self._patterns)

    def propose(
        self,
        uri: str,
        row: int,
        documents: Mapping[str, Doc],
        scope: str,
        shareable: Callable[[str, str], bool],
        workspace: Callable[[Pattern], Iterable[tuple[str, Doc]]] | None = None,
    ) -> list[Proposal]:
        """The next edits for a user at ``row`` of ``uri``, the best first.

        ``documents``: the open documents (uri -> Doc); ``shareable(uri, text)``: whether a
        save of that document would be learned; ``workspace(pattern)``: the workspace files
        (not open) that may hold the pattern's sites, read for scope ``workspace``.
        """
        ranked: list[tuple[tuple[int, float, int], Site, int | None]] = []
        seen: set[tuple[str, int, int, int]] = set()
        for recency, pattern in enumerate(self.patterns()):
            own = pattern.uri in documents and shareable(pattern.uri, documents[pattern.uri].text)
            for site, version in self._sites(pattern, uri, documents, scope, own, workspace):
                place = (site.uri, site.row, site.start, site.end)
                if place in seen or _key(site) in self._dismissed:
                    continue
                seen.add(place)
                distance = abs(site.row - row) if site.uri == uri else 0
                rank = (_ORIGIN_RANK[site.origin], distance / self.weight(pattern.kind), recency)
                ranked.append((rank, site, version))
        ranked.sort(key=lambda r: r[0])
        out = [Proposal(_id(site), site, version) for _, site, version in ranked[:MAX_EDITS]]
        with self._lock:
            self._given.update((p.id, p) for p in out)
            while len(self._given) > 10 * MAX_EDITS:
                del self._given[next(iter(self._given))]
        return out

    def _sites(
        self,
        pattern: Pattern,
        uri: str,
        documents: Mapping[str, Doc],
        scope: str,
        shareable_edit: bool,
        workspace: Callable[[Pattern], Iterable[tuple[str, Doc]]] | None,
    ) -> Iterable[tuple[Site, int | None]]:
        """The pattern's sites: the document asked about, then (scope allowing, and when
        the edit's document may lend its text) the other open ones, then the workspace."""
        allowed = [uri] if scope == "file" or not shareable_edit else list(documents)
        if not shareable_edit and pattern.uri != uri:
            return  # the edit's text stays in its own document
        for other in sorted(allowed, key=lambda u: u != uri):
            doc = documents.get(other)
            if doc is None:
                continue
            origin = "file" if other == uri else "open"
            for site in find(pattern, other, doc.text, doc.language, origin):
                yield site, doc.version
        if scope == "workspace" and shareable_edit and workspace is not None:
            for path_uri, doc in workspace(pattern):
                if path_uri in documents:
                    continue
                for site in find(pattern, path_uri, doc.text, doc.language, "workspace"):
                    yield site, None

    def weight(self, kind: str) -> float:
        """How much nearer a kind's proposals rank: accepted ones nearer, dismissed ones
        farther ((1 + accepts) / (1 + dismissals), within [1/4, 4])."""
        ratio = (1 + self.accepts[kind]) / (1 + self.dismissals[kind])
        return min(4.0, max(0.25, ratio))

    def fresh(self, proposals: Iterable[Proposal], documents: Mapping[str, Doc]) -> list[Proposal]:
        """The proposals whose site still holds the text they replace (open documents; a
        workspace file's are checked when it is found again)."""
        out, lines = [], dict[str, list[str]]()
        for proposal in proposals:
            site = proposal.site
            doc = documents.get(site.uri)
            if doc is None:
                if site.origin == "workspace":
                    out.append(proposal)
                continue
            rows = lines.setdefault(site.uri, doc.text.split("\n"))
            if site.row < len(rows) and rows[site.row][site.start : site.end] == site.old_text:
                out.append(proposal)
        return out

    def accepted(self, edit_id: str) -> Proposal | None:
        """The user accepted ``edit_id`` (the editor applied it): its kind ranks nearer.
        The proposal, None for an id not given."""
        with self._lock:
            proposal = self._given.pop(edit_id, None)
            if proposal is not None:
                self.accepts[proposal.site.pattern.kind] += 1
        return proposal

    def dismissed(self, edit_id: str) -> bool:
        """The user dismissed ``edit_id``: never proposed again; its kind ranks farther."""
        with self._lock:
            proposal = self._given.pop(edit_id, None)
            if proposal is None:
                return False
            self.dismissals[proposal.site.pattern.kind] += 1
            self._dismissed[_key(proposal.site)] = None
            while len(self._dismissed) > _DISMISSED_KEPT:
                del self._dismissed[next(iter(self._dismissed))]
        return True
