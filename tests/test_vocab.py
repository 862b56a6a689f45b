"""The vocabulary's bytes: each token's, as the tokenizer itself decodes it."""

from __future__ import annotations

from typing import Any

from superposed.vocab import Vocab


def test_every_tokens_bytes_are_what_the_tokenizer_decodes(tokenizer: Any, vocab: Vocab) -> None:
    special = set(tokenizer.all_special_ids)
    decoded = tokenizer.batch_decode([[i] for i in range(len(tokenizer))])
    checked = 0
    for i in range(len(tokenizer)):
        if i in special:
            assert vocab.token_bytes[i] == b""
            continue
        try:
            text = vocab.token_bytes[i].decode("utf-8")
        except UnicodeDecodeError:  # part of a character: the tokenizer shows U+FFFD
            continue
        assert text == decoded[i], i
        checked += 1
    assert checked > 0.9 * len(tokenizer)
