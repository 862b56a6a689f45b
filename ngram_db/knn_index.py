"""index-repo --knn: run the model over a store's files once and keep its hidden states.

Each file's stored token ids go through the model in windows of WINDOW tokens (a window
after the first starts CONTEXT tokens back, which it stores nothing for: they are its
context); the head's input at position i (the last hidden state, after the final norm) is
the key of the token at i + 1. The keys are reduced by a PCA fitted on this repository's
states (ngram_db/knn_store.py) and written beside the store. A file whose content is
already held (same sha256) is not run again; one that left the store leaves the memory.

kNM-LM's rule (Tang et al., 2023), ``keep="wrong"``, keeps only the positions where the
model's own top-1 was not the next token: where the memory can tell the model something.

It imports torch: the CLI imports it only for --knn.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ngram_db.knn_store import KEEP_RULES, KnnStore, KnnStoreError, Projection, knn_path
from ngram_db.store import NgramStore
from ngram_db.suffix_store import lasting
from superposed.knn import tapped

log = logging.getLogger(__name__)

WINDOW = 512  # tokens a forward reads
CONTEXT = 128  # of them, the context a later window repeats from the one before
DEFAULT_DIMS = 64


@dataclass
class KnnSummary:
    """What a --knn run did."""

    path: str = ""
    files: int = 0  # files held
    ran: int = 0  # files the model ran over now
    tokens: int = 0  # tokens the model read now (windows' repeated context included)
    positions: int = 0  # positions stored in all
    seconds: float = 0.0
    bytes: int = 0
    keep: str = "all"
    kept_share: float = 1.0  # of the positions run now, the share stored
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def format(self) -> str:
        return (
            f"knn: {self.positions} positions of {self.files} files in {self.path} "
            f"({self.bytes / 1e6:.1f} MB; ran the model over {self.ran} files, {self.tokens} "
            f"tokens in {self.seconds:.1f} s; keep {self.keep}: {self.kept_share:.0%})"
        )


def file_states(runner: Any, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Hidden states [n - 1, H] of a file's positions that have a next token, the model's
    top-1 there [n - 1], and the tokens the model read (with repeated context)."""
    n = len(ids)
    states: list[np.ndarray] = []
    top: list[np.ndarray] = []
    read = 0
    start, stored = 0, 0  # the window's first token; positions stored so far
    with tapped(runner) as tap:
        if tap is None:
            raise KnnStoreError("this runner shows no hidden states: use runner auto or hf")
        while stored < n - 1:
            end = min(start + WINDOW, n)
            window = [int(t) for t in ids[start:end]]
            runner.rewind(0)
            logits = runner.score(torch.tensor([window]))  # [1, T, V]
            rows = tap.rows()  # [T, H]
            assert rows is not None
            skip = stored - start  # positions of this window already stored (its context)
            last = min(end, n - 1) - start  # the window's last position with a next token
            states.append(rows[skip:last])
            top.append(logits[0, skip:last].argmax(-1).cpu().numpy())
            read += len(window)
            stored = start + last
            start = max(end - CONTEXT, start + 1)
    runner.rewind(0)
    if not states:
        return np.zeros((0, 0), np.float32), np.zeros(0, np.int64), read
    return np.concatenate(states), np.concatenate(top), read


def index_knn(
    store: NgramStore,
    runner: Any,
    model: str,
    keep: str = "all",
    dims: int = DEFAULT_DIMS,
    rebuild: bool = False,
    progress: Callable[[str], None] | None = None,
    only: Collection[str] | None = None,
) -> KnnSummary:
    """Bring ``store``'s kNN store up to date with its files (see the module).

    only: these paths of the store and no others (a benchmark's subset); None: every file.
    """
    if keep not in KEEP_RULES:
        raise ValueError(f"keep must be one of {KEEP_RULES}, got {keep!r}")
    if store.path is None:
        raise KnnStoreError("an in-memory store has no kNN store file")
    began = time.perf_counter()
    target = knn_path(store.path)
    header = {"model": model, "tokenizer": store.tokenizer.fingerprint, "keep": keep}
    files = [f for f in store.file_records() if lasting(f.path)]
    if only is not None:
        files = [f for f in files if f.path in set(only)]
    old = None if rebuild else _reusable(target, header, dims)
    held = old.shas() if old is not None else {}
    todo = [f for f in files if held.get(f.path) != f.sha256 and len(f.ids) > 1]
    summary = KnnSummary(path=str(target), keep=keep)
    runs: list[tuple[str, str, np.ndarray, np.ndarray, np.ndarray]] = []  # + states, next, hits
    total, kept = 0, 0
    for n, f in enumerate(todo):
        states, top, read = file_states(runner, f.ids)
        following = np.asarray(f.ids[1:], np.int64)
        rows = np.ones(len(following), bool) if keep == "all" else top != following
        total, kept = total + len(following), kept + int(rows.sum())
        runs.append((f.path, f.sha256, states[rows], following[rows], (top == following)[rows]))
        summary.ran, summary.tokens = summary.ran + 1, summary.tokens + read
        if progress is not None and (n + 1) % 20 == 0:
            progress(f"knn: {n + 1}/{len(todo)} files")
    if old is None:
        everything = [s for _, _, s, _, _ in runs if len(s)]
        if not everything or sum(len(s) for s in everything) < 2:
            raise KnnStoreError("nothing to index: the store holds no file of two tokens or more")
        hidden = int(everything[0].shape[1])
        projection = Projection.fit(np.concatenate(everything), dims)
        old = KnnStore.empty({**header, "hidden": hidden}, projection)
    result = old.restricted_to({f.path: f.sha256 for f in files})
    for path, sha, states, following, hits in runs:
        result = result.with_file(path, sha, result.projection.reduce(states), following, hits)
    result.save(target)
    summary.files, summary.positions = len(result.files), len(result)
    summary.kept_share = kept / total if total else 1.0
    summary.seconds = time.perf_counter() - began
    summary.bytes = Path(target).stat().st_size
    return summary


def _reusable(target: Path, header: dict[str, Any], dims: int) -> KnnStore | None:
    """The store already at ``target`` if it was made the same way (its projection stays)."""
    try:
        old = KnnStore.load(target)
    except FileNotFoundError:
        return None
    except KnnStoreError as err:
        log.warning("rebuilding the kNN store: %s", err)
        return None
    same = all(old.header.get(k) == v for k, v in header.items())
    return old if same and old.projection.dims == min(dims, old.projection.dims) else None
