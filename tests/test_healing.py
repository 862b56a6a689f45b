"""Token healing with the default tokenizer: prompts end where the cursor is."""

from __future__ import annotations

import pytest
import torch

from superposed.api import Engine
from superposed.prompt import build_prompt
from superposed.types import DecodeConfig
from superposed.vocab import advance

CURSORS = {
    "after indentation": "def f(x):\n    ",
    "after a blank line": "def f(x):\n    if x:\n        y = x\n\n            ",
    "mid identifier": "import os\nos.pa",
    "after operator": "total = price *",
    "after dot": "import os\nos.",
    "end of file": "x = 1\n",
    "inside a string": 'print("hello wor',
    "after non-ascii": "naïve = 'café",
    "after an emoji": "mood = '🦙",
}


@pytest.mark.parametrize("text", CURSORS.values(), ids=CURSORS.keys())
def test_prompt_plus_healed_bytes_is_the_text(tokenizer, vocab, text: str) -> None:
    prompt = build_prompt(tokenizer, vocab, text, max_tokens=512)
    assert vocab.decode(prompt.ids) + prompt.heal == text.encode()
    assert prompt.heal, "the trailing token is healed"
    vocab.decode(prompt.ids).decode("utf-8")  # never ends inside a multi-byte character


def test_indentation_is_healed(tokenizer, vocab) -> None:
    prompt = build_prompt(tokenizer, vocab, CURSORS["after indentation"], 512)
    assert prompt.heal.endswith(b"    ")
    assert not vocab.decode(prompt.ids).endswith(b" ")


def test_a_whitespace_run_over_several_tokens_is_healed_whole(tokenizer, vocab) -> None:
    """After a blank line the tokenizer gives "\n" then "\n" + indentation: ending the prompt
    between them left the model only bare spaces to write, and every draft derailed."""
    text = CURSORS["after a blank line"]
    run = b"\n\n" + b" " * 12
    assert [vocab.token_bytes[i] for i in tokenizer.encode(text)][-2:] == [run[:1], run[1:]]
    prompt = build_prompt(tokenizer, vocab, text, 512)
    assert prompt.heal == run
    assert vocab.decode(prompt.ids).endswith(b"y = x")


@pytest.mark.parametrize("text", CURSORS.values(), ids=CURSORS.keys())
def test_first_step_admits_only_consistent_tokens(tokenizer, vocab, text: str) -> None:
    heal = build_prompt(tokenizer, vocab, text, 512).heal
    allowed = vocab.consistent_ids(heal)
    assert allowed
    for token in allowed:
        piece = vocab.token_bytes[token]
        assert piece.startswith(heal) or heal.startswith(piece), (heal, piece)
    # ...and every consistent ordinary token is admitted.
    expected = {
        i
        for i, piece in enumerate(vocab.token_bytes)
        if piece
        and i not in vocab.special_ids
        and (piece.startswith(heal) or heal.startswith(piece))
    }
    assert set(allowed) == expected


def test_mid_identifier_admits_completions(tokenizer, vocab) -> None:
    heal = build_prompt(tokenizer, vocab, "os.pa", 512).heal
    assert heal == b"pa"
    pieces = {vocab.token_bytes[i] for i in vocab.consistent_ids(heal)}
    assert {b"pa", b"p", b"path"} <= pieces


def test_advance_through_the_healed_text() -> None:
    assert advance(b"\n    ", b"\n") == b"    "
    assert advance(b"\n    ", b"\n        ") == b""
    assert advance(b"pa", b"path") == b""


@pytest.mark.parametrize(
    "method", ["superposed", "greedy", "nucleus", "beam", "nucleus-superposed"]
)
@pytest.mark.parametrize("text", CURSORS.values(), ids=CURSORS.keys())
def test_drafts_start_right_at_the_cursor(tiny_engine: Engine, text: str, method: str) -> None:
    """Each draft's tokens reproduce the healed text; its text is exactly what follows."""
    prompt = tiny_engine.prompt(text, 6)
    cfg = DecodeConfig(k=3, max_new_tokens=6, temperature=1.0)
    for draft in tiny_engine.complete(text, method, cfg).drafts:
        produced = tiny_engine.vocab.decode(draft.token_ids)
        assert produced.startswith(prompt.heal) or prompt.heal.startswith(produced)
        visible = produced[len(prompt.heal) :].decode("utf-8", errors="replace")
        assert visible.startswith(draft.text)


def test_deep_indentation_is_healed_whatever_its_length(tokenizer, vocab) -> None:
    text = "class A:\n    def f(self):\n        for x in y:\n            if x:\n                "
    prompt = build_prompt(tokenizer, vocab, text, 512)
    assert prompt.heal.endswith(b" " * 16)
    assert not vocab.decode(prompt.ids).endswith(b" ")


@pytest.mark.parametrize(
    "prefix", [b" ", b"    ", b"\n", b"s", b"self", b"(", b"\xe2", b"\xff", b""]
)
def test_the_heal_mask_is_exactly_the_consistent_tokens(vocab, prefix: bytes) -> None:
    """The mask (a slice of the sorted index) admits what the byte-level definition says:
    every ordinary token extending the prefix, and the first token spelling each shorter
    head of it."""
    ordinary = [(i, b) for i, b in enumerate(vocab.token_bytes) if b and i not in vocab.special_ids]
    extending = {i for i, b in ordinary if b.startswith(prefix)}
    heads = {prefix[:n] for n in range(1, len(prefix))}
    shorter = {
        min(i for i, b in ordinary if b == h) for h in heads if any(b == h for _, b in ordinary)
    }
    mask = vocab.consistent_mask(prefix, len(vocab), torch.device("cpu"))
    assert mask.shape == (len(vocab),)
    assert set(mask.nonzero()[:, 0].tolist()) == extending | shorter
    assert vocab.consistent_ids(prefix) == tuple(sorted(extending | shorter))


def test_whitespace_heal_masks_are_computed_at_load(tiny_engine: Engine) -> None:
    """Engine construction warms the masks of whitespace runs: a request reuses them."""
    vocab, runner = tiny_engine.vocab, tiny_engine.runner
    for prefix in (b" ", b"    ", b"\n"):
        hits = type(vocab).consistent_mask.cache_info().hits
        mask = vocab.consistent_mask(prefix, runner.vocab_size, runner.device)
        assert type(vocab).consistent_mask.cache_info().hits == hits + 1
        assert mask is vocab.consistent_mask(prefix, runner.vocab_size, runner.device)
