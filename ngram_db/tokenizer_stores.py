"""A default store per tokenizer, so that moving between models strands nothing (issue 56).

A store counts token ids, so it serves the tokenizer that built it alone. The default store
files (the user store, a codebase's store: paths.py) are kept per tokenizer: the file at the
default path serves the tokenizer that built it, and any other tokenizer gets its own beside
it, ``<stem>.<fingerprint>.sqlite``. A server that switches models opens the stores of the
new model's tokenizer, and finds the first one's again when it switches back (before, the
other model's tokenizer found the default file built with another and used no store at all).
Forgetting reaches every tokenizer's store of a path (``erase``): what a user asks to forget
is erased from all of them, whichever model runs.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path

from ngram_db.schema import stored_tokenizer
from ngram_db.store import NgramStore
from ngram_db.tokenizer import FingerprintOnly

FINGERPRINT = re.compile(r"[0-9a-f]{16}")  # ngram_db.tokenizer.vocab_fingerprint's form


def for_tokenizer(base: Path, fingerprint: str) -> Path:
    """The store file at default location ``base`` for the tokenizer of ``fingerprint``: its
    own file beside ``base`` where there is one, else ``base`` unless another tokenizer built
    the store there, else its own file beside it (created on first use)."""
    own = base.with_name(f"{base.stem}.{fingerprint}{base.suffix}")
    if own.exists():
        return own
    built = stored_tokenizer(base)
    return base if built is None or built == fingerprint else own


def tokenizer_stores(base: Path) -> list[Path]:
    """``base`` and every other tokenizer's store beside it, those that exist."""
    pattern = f"{glob.escape(base.stem)}.*{glob.escape(base.suffix)}"
    siblings = [
        p
        for p in sorted(base.parent.glob(pattern))
        if FINGERPRINT.fullmatch(p.name[len(base.stem) + 1 : len(p.name) - len(base.suffix)])
    ]
    return [p for p in [base, *siblings] if p.is_file()]


def erase(base: Path, target: Path | None, skip: Path | None = None) -> dict[str, int]:
    """Forget ``target`` (a file or folder; None: everything) in every tokenizer's store of
    default location ``base`` but ``skip`` (the one the caller erased from already); the
    files removed, per store."""
    removed: dict[str, int] = {}
    for path in tokenizer_stores(base):
        fingerprint = stored_tokenizer(path)
        if path == skip or fingerprint is None:
            continue
        with NgramStore.open(path, FingerprintOnly(fingerprint)) as store:
            removed[str(path)] = store.clear() if target is None else store.forget(target)
    return removed
