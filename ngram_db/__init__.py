"""Token n-gram statistics of the user's own code, in SQLite: per codebase and per user.

The language server's API::

    from ngram_db import NgramStore, CombinedSource, codebase_db_path, user_db_path
    from ngram_db import save_skip_reason

    # tokenizer: the model's (LoadedModel.tokenizer, a transformers tokenizer)
    codebase = NgramStore.open(codebase_db_path(workspace_root), tokenizer)  # orders 2..6
    user = NgramStore.open(user_db_path(), tokenizer)

    # on save: index-repo's rules (names, .gitignore, size, secrets in the text); None: index
    if save_skip_reason(resolved_path, resolved_root, text) is None:
        codebase.update_file(path, text)   # exact, one transaction; False if unchanged
    codebase.remove_file(path)         # on delete; False if unknown
    codebase.rename_file(old, new)     # on rename: counts unchanged
    user.forget(path_or_folder)        # erase a file or a folder's files; user.clear(): all
    codebase.stats()                   # {"files", "tokens", "ngrams": {n: distinct}, "bytes", ...}

    # engine's NgramSource (superposed.ngram): default lambdas, or others via .source()
    source = CombinedSource(codebase.source(lambdas), user.source(lambdas), user_weight=0.3)
    result = source.probabilities(contexts, candidates)   # NgramResult(probs[D, C], supported[D])

    index_repo(root, codebase)         # what `index-repo` runs; returns an IndexSummary
    index_repo(root, codebase, progress=lambda done, total, message: ...)  # a callback

Paths are plain keys: ``index_repo`` stores absolute paths under the resolved root, so pass
``str(Path(p).resolve())`` to update_file/remove_file for the two to agree. A store object
may be shared between threads (calls are serialised); several processes may write one store
file at once (WAL, BEGIN IMMEDIATE, a 60 s busy timeout). Lookups read through a second
connection, so they never wait for a write in progress (an index_repo chunk, a save).
IndexSummary.as_dict() gives the summary as plain data.

Store files are private (0600, folders created 0700). Errors (``ngram_db.errors``, all
NgramStoreError): NotAStore (a foreign file, never overwritten; suggests --rebuild),
StoreCorrupt (a NotAStore damaged inside, found at the first failing read), StoreBusy (another
writer held the lock past the busy timeout: retry), StoreUnwritable (permissions, a folder that
cannot be created, a full disk), TokenizerMismatch (names both fingerprints), OrdersMismatch,
SchemaMismatch, BadOrders.

Modules: ``keys`` (token tuples as 64-bit keys, vectorised counting), ``store`` (all SQL),
``tokenizer``, ``files`` (what to index),
``indexer``, ``paths``, ``tokenizer_stores`` (a default store per tokenizer), ``combined``,
``cli``.
"""

from ngram_db.combined import CombinedSource
from ngram_db.errors import (
    BadOrders,
    NgramStoreError,
    NotAStore,
    OrdersMismatch,
    SchemaMismatch,
    TokenizerMismatch,
)
from ngram_db.files import save_skip_reason, skip_reason
from ngram_db.indexer import IndexSummary, index_repo
from ngram_db.paths import codebase_db_path, user_db_path
from ngram_db.store import DEFAULT_ORDERS, NgramStore, StoreSource
from ngram_db.tokenizer import ByteTokenizer, HFTokenizer

__all__ = [
    "DEFAULT_ORDERS",
    "BadOrders",
    "ByteTokenizer",
    "CombinedSource",
    "HFTokenizer",
    "IndexSummary",
    "NgramStore",
    "NgramStoreError",
    "NotAStore",
    "OrdersMismatch",
    "SchemaMismatch",
    "StoreSource",
    "TokenizerMismatch",
    "codebase_db_path",
    "index_repo",
    "save_skip_reason",
    "skip_reason",
    "user_db_path",
]
