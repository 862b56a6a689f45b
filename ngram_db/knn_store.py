"""The kNN store: reduced keys of the model's hidden states, and next tokens.

One file beside the SQLite store (``<store>.knn.npz``, numpy's own format, no pickles): per
stored position the key (the model's last hidden state there, projected by a PCA fitted on
the repository's own states to ``dims`` dimensions and stored as float16) and the token that
followed, with the file it came from. The header names the model, the tokenizer and the keep
rule (``all`` positions, or kNM-LM's ``wrong``: only where the model's top-1 was not the next
token), so a store that does not belong to the running model is refused, not misread.

The file is written beside and renamed over the old one: a reader never sees half of it.
``KnnIndex`` answers ``superposed.knn.HiddenSource`` over it: faiss's exact L2 search
(``IndexFlatL2``) where the store is big enough for it to pay, numpy below that.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ngram_db.errors import NgramStoreError
from superposed.knn import Neighbours

SUFFIX = ".knn.npz"
FORMAT = 1
KEEP_RULES = ("all", "wrong")
PCA_SAMPLE = 20_000  # states the projection is fitted on, at most (a random sample)
FAISS_MIN = 4_096  # stored positions from which faiss's search beats numpy's (one query)


class KnnStoreError(NgramStoreError):
    """The hidden-state store cannot be used: run index-repo --knn to rebuild it."""


class KnnStoreDamaged(KnnStoreError):
    """The hidden-state store file is damaged or of another format: run index-repo --knn."""


def knn_path(store_path: str | os.PathLike[str]) -> Path:
    """The hidden-state store beside the SQLite store at ``store_path``."""
    return Path(f"{os.fspath(store_path)}{SUFFIX}")


@dataclass(frozen=True)
class Projection:
    """PCA to ``dims`` dimensions, scaled so that a key's mean squared norm is 1: distances
    then read the same whatever the model's hidden size (knnTemperature's scale)."""

    mean: np.ndarray  # [H] float32
    components: np.ndarray  # [dims, H] float32, the principal axes
    scale: float  # the projected states' root mean squared norm

    @classmethod
    def fit(cls, states: np.ndarray, dims: int, seed: int = 0) -> Projection:
        """The projection of states [N, H] (a random sample of PCA_SAMPLE rows at most)."""
        if states.ndim != 2 or len(states) < 2:
            raise ValueError(f"PCA needs at least 2 states [N, H], got shape {states.shape}")
        rng = np.random.default_rng(seed)
        sample = (
            states
            if len(states) <= PCA_SAMPLE
            else states[rng.choice(len(states), PCA_SAMPLE, replace=False)]
        )
        sample = sample.astype(np.float32)
        mean = sample.mean(0)
        _u, _s, vt = np.linalg.svd(sample - mean, full_matrices=False)  # vt [min(N, H), H]
        components = vt[: min(dims, vt.shape[0])].astype(np.float32)
        projected = (sample - mean) @ components.T
        scale = float(np.sqrt((projected**2).sum(1).mean())) or 1.0
        return cls(mean.astype(np.float32), components, scale)

    @property
    def dims(self) -> int:
        return int(self.components.shape[0])

    def reduce(self, states: np.ndarray) -> np.ndarray:
        """states [N, H] -> keys [N, dims] float32."""
        return ((states.astype(np.float32) - self.mean) @ self.components.T) / self.scale


@dataclass(frozen=True)
class KnnStore:
    """The stored positions and what they need to be read (see the module)."""

    header: Mapping[str, Any]  # model, tokenizer, rule, hidden (size)
    projection: Projection
    keys: np.ndarray  # [N, dims] float16
    tokens: np.ndarray  # [N] int32, the next token at each position
    owner: np.ndarray  # [N] int32, the index in ``files`` of each position's file
    hits: np.ndarray  # [N] bool: the model's own top-1 there was the next token
    files: tuple[tuple[str, str], ...]  # (path, content sha256) of every file held

    @classmethod
    def empty(cls, header: Mapping[str, Any], projection: Projection) -> KnnStore:
        dims = projection.dims
        return cls(dict(header), projection, np.zeros((0, dims), np.float16),
                   np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, bool), ())  # fmt: skip

    def __len__(self) -> int:
        return len(self.tokens)

    def shas(self) -> dict[str, str]:
        """path -> content sha256 of every file held."""
        return dict(self.files)

    def without(self, paths: Sequence[str]) -> KnnStore:
        """The store without the positions of ``paths``."""
        gone = set(paths)
        kept = [i for i, (p, _) in enumerate(self.files) if p not in gone]
        return self._keep_files(kept)

    def restricted_to(self, alive: Mapping[str, str]) -> KnnStore:
        """Only the files that ``alive`` (path -> sha256, the SQLite store's files) holds with
        the same content: a file forgotten or changed there lends nothing here."""
        kept = [i for i, (p, sha) in enumerate(self.files) if alive.get(p) == sha]
        return self if len(kept) == len(self.files) else self._keep_files(kept)

    def _keep_files(self, kept: Sequence[int]) -> KnnStore:
        remap = np.full(len(self.files) + 1, -1, np.int64)
        remap[np.asarray(kept, np.int64)] = np.arange(len(kept))
        rows = remap[self.owner] >= 0 if len(self.owner) else np.zeros(0, bool)
        return replace(
            self,
            keys=self.keys[rows],
            tokens=self.tokens[rows],
            owner=remap[self.owner[rows]].astype(np.int32),
            hits=self.hits[rows],
            files=tuple(self.files[i] for i in kept),
        )

    def only_wrong(self) -> KnnStore:
        """kNM-LM's store: the positions where the model's top-1 was not the next token."""
        wrong = ~self.hits
        header = {**self.header, "keep": "wrong"}
        return replace(self, header=header, keys=self.keys[wrong], tokens=self.tokens[wrong],
                       owner=self.owner[wrong], hits=self.hits[wrong])  # fmt: skip

    def with_file(
        self, path: str, sha: str, keys: np.ndarray, tokens: np.ndarray, hits: np.ndarray
    ) -> KnnStore:
        """The store with ``path``'s positions replaced by keys [n, dims], tokens [n] and
        hits [n] (the model's top-1 was the token)."""
        if keys.shape != (len(tokens), self.projection.dims):
            raise ValueError(
                f"keys {keys.shape} do not fit {len(tokens)} tokens x {self.projection.dims} dims"
            )
        rest = self.without([path])
        return replace(
            rest,
            keys=np.concatenate([rest.keys, keys.astype(np.float16)]),
            tokens=np.concatenate([rest.tokens, tokens.astype(np.int32)]),
            owner=np.concatenate([rest.owner, np.full(len(tokens), len(rest.files), np.int32)]),
            hits=np.concatenate([rest.hits, hits.astype(bool)]),
            files=(*rest.files, (path, sha)),
        )

    # ----- the file --------------------------------------------------------------------------

    def save(self, path: Path) -> None:
        """Write the store to ``path`` (beside it first, then renamed over it)."""
        header = {**self.header, "format": FORMAT, "scale": self.projection.scale}
        arrays = {
            "header": np.array(json.dumps(header)),
            "mean": self.projection.mean,
            "components": self.projection.components,
            "keys": self.keys,
            "tokens": self.tokens,
            "owner": self.owner,
            "hits": self.hits,
            "paths": np.array([p for p, _ in self.files], dtype=str),
            "shas": np.array([s for _, s in self.files], dtype=str),
        }
        fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, allow_pickle=False, **arrays)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @classmethod
    def load(cls, path: Path) -> KnnStore:
        """The store at ``path``; KnnStoreDamaged if it is not one that this code wrote."""
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {name: z[name] for name in z.files}
            header = json.loads(str(arrays["header"]))
            projection = Projection(arrays["mean"], arrays["components"], float(header["scale"]))
            files = tuple(zip(arrays["paths"].tolist(), arrays["shas"].tolist(), strict=True))
            store = cls(header, projection, arrays["keys"], arrays["tokens"], arrays["owner"],
                        arrays["hits"], files)  # fmt: skip
        except (OSError, KeyError, ValueError, TypeError, zipfile.BadZipFile) as err:
            if isinstance(err, FileNotFoundError):
                raise
            raise KnnStoreDamaged(f"{path}: {KnnStoreDamaged.__doc__} ({err})") from err
        store.check(path)
        return store

    def check(self, path: Path) -> None:
        """Every array's shape agrees with the others' (KnnStoreDamaged if not)."""
        n, dims = len(self.tokens), self.projection.dims
        hidden = self.projection.mean.shape
        fine = (
            self.header.get("format") == FORMAT
            and self.keys.shape == (n, dims)
            and self.keys.dtype == np.float16
            and self.owner.shape == (n,)
            and self.hits.shape == (n,)
            and self.projection.components.shape == (dims, *hidden)
            and (n == 0 or (int(self.owner.min()) >= 0 and int(self.owner.max()) < len(self.files)))
        )
        if not fine:
            raise KnnStoreDamaged(f"{path}: {KnnStoreDamaged.__doc__} (inconsistent arrays)")


class KnnIndex:
    """``superposed.knn.HiddenSource`` over a store: exact L2 search on its keys."""

    def __init__(self, store: KnnStore) -> None:
        self.store = store
        self._keys = store.keys.astype(np.float32)  # [N, dims]
        self._faiss: Any = None
        if len(self._keys) >= FAISS_MIN:
            import faiss  # only for a store big enough to need it

            self._faiss = faiss.IndexFlatL2(self._keys.shape[1])
            self._faiss.add(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def neighbours(self, hidden: np.ndarray, k: int) -> Neighbours | None:
        if len(self._keys) == 0:
            return None
        expected = self.store.projection.mean.shape
        if hidden.shape != expected:
            raise ValueError(f"a hidden state of shape {hidden.shape}, the store's are {expected}")
        query = self.store.projection.reduce(hidden[None])  # [1, dims]
        k = min(k, len(self._keys))
        if self._faiss is not None:
            distances, rows = self._faiss.search(query, k)  # [1, k] each
            d, r = distances[0], rows[0]
        else:
            all_d = ((self._keys - query) ** 2).sum(1)  # [N]
            r = np.argpartition(all_d, k - 1)[:k] if k < len(all_d) else np.arange(len(all_d))
            r = r[np.argsort(all_d[r], kind="stable")]
            d = all_d[r]
        return Neighbours(d.astype(np.float32), self.store.tokens[r].astype(np.int64))
