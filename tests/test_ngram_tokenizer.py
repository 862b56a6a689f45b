"""The store with the model's own tokenizer: fingerprints, ids, and a real lookup."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ngram_db import ByteTokenizer, HFTokenizer, NgramStore, TokenizerMismatch
from ngram_db.tokenizer import as_tokenizer

CODE = "def area(width, height):\n    return width * height\n\nprint(area(2, 3))\n"


def test_transformers_and_raw_tokenizers_agree(tokenizer: Any) -> None:
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(Path(tokenizer.name_or_path) / "tokenizer.json"))
    wrapped, bare = as_tokenizer(tokenizer), HFTokenizer(raw)
    assert wrapped.fingerprint == bare.fingerprint
    texts = [CODE, "", "  caf\u00e9 \udcff"]
    got = [x.tolist() for x in bare.encode_batch(texts)]
    assert got == [x.tolist() for x in wrapped.encode_batch(texts)]
    assert got[0] == tokenizer(CODE, add_special_tokens=False)["input_ids"]


def test_a_tokenizer_is_fingerprinted_once_until_tokens_are_added(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each store, the session and the memory wrap the model's tokenizer: the vocabulary is
    hashed once per tokenizer object, and again only after it gained tokens."""
    import ngram_db.tokenizer as module
    from tests.runner_harness import tiny_tokenizer

    tokenizer = copy.deepcopy(tiny_tokenizer())  # its own: it is changed
    hashed = []
    fingerprint = module.vocab_fingerprint
    monkeypatch.setattr(module, "vocab_fingerprint", lambda v: hashed.append(1) or fingerprint(v))
    first = as_tokenizer(tokenizer)
    assert as_tokenizer(tokenizer) is first and NgramStore.open(":memory:", tokenizer)
    assert len(hashed) == 1
    tokenizer.add_special_tokens({"additional_special_tokens": ["<fim_prefix>"]})
    grown = as_tokenizer(tokenizer)
    assert len(hashed) == 2 and grown.fingerprint != first.fingerprint


def test_a_store_of_the_model_tokenizer_rejects_another(tokenizer: Any, tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    with NgramStore.open(path, tokenizer) as store:
        store.update_file("area.py", CODE)
        ids = store.file_ids("area.py")
        assert ids is not None
        # the draft "...return width *" continues with " height" in the file
        at = ids.tolist().index(tokenizer.encode(" height", add_special_tokens=False)[0], 10)
        candidates = np.array([[ids[at], tokenizer.convert_tokens_to_ids("<|im_end|>")]])
        result = store.probabilities([ids[:at].tolist()], candidates)
        assert result.supported.tolist() == [True]
        assert result.probs[0, 0] > 0 and result.probs[0, 1] == 0
    with pytest.raises(TokenizerMismatch) as err:
        NgramStore.open(path, ByteTokenizer())
    assert as_tokenizer(tokenizer).fingerprint in str(err.value)
    assert ByteTokenizer().fingerprint in str(err.value)
