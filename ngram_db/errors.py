"""The store's errors: one small class per failure, its docstring the gist of the message."""

from __future__ import annotations


class NgramStoreError(Exception):
    """An n-gram store could not be used."""


class NotAStore(NgramStoreError):
    """The file is not an n-gram store (corrupt, or some other file); it was left untouched."""


class TokenizerMismatch(NgramStoreError):
    """The store was built with another tokenizer; its token ids would mean something else."""


class SchemaMismatch(NgramStoreError):
    """The store was written by another version of ngram_db."""


class OrdersMismatch(NgramStoreError):
    """The store holds other n-gram orders than the ones asked for."""


class BadOrders(NgramStoreError):
    """The n-gram orders are not valid."""


class StoreCorrupt(NotAStore):
    """The store is damaged inside (its header is intact); it was left untouched."""


class StoreBusy(NgramStoreError):
    """Another writer held the store's lock for longer than the busy timeout; nothing was lost."""


class StoreUnwritable(NgramStoreError):
    """The store or its folder cannot be created, opened or written (permissions, disk)."""


class StoreFull(StoreUnwritable):
    """The disk (or the store's size limit) is full: this write was not made, earlier ones are
    kept, and the same write succeeds once there is room."""


class StoreClosed(NgramStoreError):
    """The store object was closed (the settings named another store, or the model changed)
    while this call was on its way: the store file is fine; reopen it and call again."""


# What to do about a failure depends on who asks (index-repo's flags, the editor's settings):
# each front end keeps its own advice per error class and says it with ``advised``.
Advice = tuple[tuple[type[NgramStoreError], str], ...]


def advised(err: NgramStoreError, advice: Advice) -> str:
    """The error's message, then the first advice whose class it is an instance of."""
    for kind, todo in advice:
        if isinstance(err, kind):
            return f"{err}: {todo}"
    return str(err)
