"""The ``sharedIndexes`` setting: an organisation's read-only infini-gram indexes, queried as
more MatchSources of the memory beside the stores and the open documents.

Each folder is built by ``index-repo --engine infini-gram --out DIR`` (ngram_db/infini.py), in
CI, and reaches the developer's disk by a read-only mount or a sync. It is opened once per
(folders, tokenizer), memory-mapped by infini-gram's engine (ngram_db/infini_source.py).
A folder that is missing, built with another tokenizer or damaged is left out and reported
once (until the setting or the model changes); the others serve. Nothing here raises into a
request.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ngram_db.infini_source import InfiniSource
from superposed.ngram import Match, MatchSource

log = logging.getLogger(__name__)

Report = Callable[[str], None]


def index_folders(value: Any) -> tuple[str, ...]:
    """The setting's parser: a list of folder paths (settings.py's table)."""
    from lsp_server.settings import InvalidSetting

    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        raise InvalidSetting('use a list of index folders, e.g. ["/mnt/org-index"]')
    return tuple(dict.fromkeys(value))


class SharedIndexes:
    """The indexes the setting names, opened once; a bad one reported once and left out."""

    def __init__(self, report: Report | None = None) -> None:
        self._report = report or (lambda message: log.warning("%s", message))
        self._lock = threading.Lock()
        self._key: tuple[tuple[str, ...], str] | None = None
        self._sources: list[MatchSource] = []

    def sources(self, folders: Sequence[str], fingerprint: str) -> list[MatchSource]:
        """The usable indexes among ``folders`` for a model whose tokenizer has
        ``fingerprint`` (opened at the first call after either changed)."""
        key = (tuple(folders), fingerprint)
        with self._lock:
            if key == self._key:
                return self._sources
            opened: list[MatchSource] = []
            for folder in key[0]:
                try:
                    source = InfiniSource([folder], fingerprint)
                except Exception as err:  # any failure: leave it out, say why
                    self._report(f"shared index not used: {err}")
                    continue
                opened.append(_Guarded(source, folder, self._report))
            self._key, self._sources = key, opened
            return opened


class _Guarded:
    """An index whose lookups never raise into a request: a failure is reported once, and
    the index answers nothing from then on."""

    def __init__(self, source: InfiniSource, folder: str, report: Report) -> None:
        self.source, self.folder, self._report = source, folder, report
        self.failed = False

    def __len__(self) -> int:
        return len(self.source)

    def match(self, context: Sequence[int], follow: int = 32, others: int = 0) -> Match | None:
        if self.failed:
            return None
        try:
            return self.source.match(context, follow, others)
        except Exception as err:
            self.failed = True
            self._report(f"shared index {self.folder} failed and is left out: {err!r}")
            return None
