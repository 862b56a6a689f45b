"""What a store's failure means: the advice the editor shows with it, and the n-gram source
that serves without a store that fails while in use (lsp_server/stores/stores.py uses both)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ngram_db import errors
from ngram_db.errors import Advice, NgramStoreError, advised
from superposed.ngram import NgramResult, NgramSource

_OTHER_PATH = "choose another store path (superposed.codebaseDb / superposed.userDb)"
# What the editor's user can do about each store error (subclasses first).
ADVICE: Advice = (
    (errors.StoreBusy, "try again once the other writer is done"),
    (
        errors.StoreFull,
        "free some space on its disk: saves and accepted drafts are kept and written then, "
        f"without a restart; or {_OTHER_PATH}",
    ),
    (
        errors.StoreUnwritable,
        "check that the file and its folder are writable by you and the disk has room, "
        f"or {_OTHER_PATH}",
    ),
    (
        errors.StoreCorrupt,
        f"run index-repo with --rebuild to replace it (or delete it), or {_OTHER_PATH}",
    ),
    (errors.NotAStore, f"run index-repo with --rebuild to replace it, or {_OTHER_PATH}"),
    (
        errors.TokenizerMismatch,
        "run index-repo with --rebuild and the server's model (--model) to rebuild it, "
        f"or {_OTHER_PATH}",
    ),
    (errors.SchemaMismatch, f"run index-repo with --rebuild, or {_OTHER_PATH}"),
    (
        errors.OrdersMismatch,
        "set superposed.orders to the stored orders, or run index-repo with --rebuild",
    ),
)


def explain(err: NgramStoreError) -> str:
    """A store error as the editor shows it: what is wrong, then what to do."""
    return advised(err, ADVICE)


class FailSafeSource:
    """A store's n-gram source that, when the store fails, answers "no support" instead."""

    def __init__(self, source: NgramSource, failed: Callable[[NgramStoreError], None]) -> None:
        self._source = source
        self._failed = failed

    @property
    def orders(self) -> tuple[int, ...]:
        return self._source.orders

    def probabilities(
        self, contexts: Sequence[Sequence[int]], candidates: np.ndarray
    ) -> NgramResult:
        try:
            return self._source.probabilities(contexts, candidates)
        except NgramStoreError as err:  # damaged, say: served without it from now on
            self._failed(err)
            d, c = np.asarray(candidates).shape
            return NgramResult(probs=np.zeros((d, c)), supported=np.zeros(d, dtype=bool))
