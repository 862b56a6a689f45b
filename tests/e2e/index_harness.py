"""What the tests of index-repo as a real process share: a tiny byte-level tokenizer and the
command's run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def make_tokenizer(folder: Path, extra: str = "") -> Path:
    """A byte-level tokenizer.json (256 ids, plus ``extra`` tokens) in ``folder``."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {ch: i for i, ch in enumerate(pre_tokenizers.ByteLevel.alphabet())}
    if extra:
        vocab[extra] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    folder.mkdir(parents=True)
    tok.save(str(folder / "tokenizer.json"))
    return folder


def run(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ngram_db.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
