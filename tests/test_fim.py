"""Fill-in-the-middle prompts (superposed/fim.py) and the stop-at-suffix rule
(completion/decode.py).

A tiny random Llama over the default tokenizer with StarCoder's three FIM markers added
stands in for a FIM-trained model: its drafts mean nothing, but the prompt layout, the
auto/on/off choice and the cache reuse run for real.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from lsp_server.completion.cleanup import postprocess, stop_at_suffix
from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.decode import decode
from lsp_server.settings import DecodingSettings, parse_settings
from superposed import fim
from superposed.api import Completion, Engine
from superposed.model import LoadedModel
from superposed.prompt import Prompt, encode_healed
from superposed.types import DecodeConfig, Draft
from superposed.vocab import Vocab

STARCODER = fim.FIM_SPELLINGS[0]
BEFORE = "import os\n\n\ndef size(path):\n    return os.path.get"
AFTER = "size(path)\n\n\nprint(size('a.txt'))\n"


@pytest.fixture(scope="module")
def fim_tokenizer(tmp_path_factory: pytest.TempPathFactory, tokenizer: Any) -> Any:
    """The default tokenizer plus <fim_prefix>, <fim_suffix>, <fim_middle> as special tokens,
    saved under a directory of its own (auto reads the tokenizer's path: SmolLM2's is off)."""
    from transformers import AutoTokenizer

    tokenizer = copy.deepcopy(tokenizer)  # the session's is shared: never changed
    tokenizer.add_special_tokens({"additional_special_tokens": list(STARCODER)})
    path = tmp_path_factory.mktemp("tiny-fim-coder")
    tokenizer.save_pretrained(path)
    return AutoTokenizer.from_pretrained(path)


@pytest.fixture(scope="module")
def fim_vocab(fim_tokenizer: Any) -> Vocab:
    return Vocab.from_tokenizer(fim_tokenizer)


def fim_engine(tokenizer: Any, vocab: Vocab, name: str, make_tiny_llama: Any) -> Engine:
    model = make_tiny_llama(len(tokenizer))
    cpu = torch.device("cpu")
    return Engine(LoadedModel(name, model, tokenizer, vocab, cpu, torch.float32))


class _Vocabulary:
    def __init__(self, *tokens: str) -> None:
        self.vocab = {token: 100 + i for i, token in enumerate(tokens)}

    def get_vocab(self) -> dict[str, int]:
        return self.vocab


def recorded_prompts(engine: Engine) -> list[Prompt]:
    """Every prompt the engine builds from now on (the tests turn firstPromptTokens off: its
    cold-cache check builds each request's prompt once more)."""
    prompts: list[Prompt] = []
    build = engine.prompt

    def record(*args: Any, **kwargs: Any) -> Prompt:
        prompts.append(build(*args, **kwargs))
        return prompts[-1]

    engine.prompt = record  # type: ignore[method-assign]
    return prompts


# --- finding the markers, and choosing ---------------------------------------------------


@pytest.mark.parametrize("spelling", fim.FIM_SPELLINGS)
def test_each_known_spelling_is_found(spelling: tuple[str, str, str]) -> None:
    tokens = fim.fim_tokens(_Vocabulary("a", *spelling, "b"))
    assert tokens == fim.FimTokens(101, 102, 103)


def test_no_markers_no_fim(tokenizer: Any) -> None:
    assert fim.fim_tokens(tokenizer) is None  # the default (SmolLM2) tokenizer has none
    assert fim.fim_tokens(_Vocabulary("<fim_prefix>", "<fim_suffix>")) is None  # incomplete
    assert fim.fim_tokens(_Vocabulary("<fim_prefix>", "<|fim_suffix|>", "<fim_middle>")) is None


def test_the_markers_are_looked_up_once_per_model() -> None:
    """Every Engine on a model asks for its markers; the vocabulary (0.2 s for the default
    model's) is read only the first time."""
    reads: list[int] = []

    class Counting(_Vocabulary):
        def get_vocab(self) -> dict[str, int]:
            reads.append(1)
            return super().get_vocab()

    markers = Counting(*fim.FIM_SPELLINGS[0])
    loaded = LoadedModel("m", None, markers, None, torch.device("cpu"), torch.float32)  # type: ignore[arg-type]
    assert loaded.fim_tokens == loaded.fim_tokens == fim.FimTokens(100, 101, 102)
    assert len(reads) == 1


def test_auto_on_off_choose_as_documented() -> None:
    tokens = fim.FimTokens(1, 2, 3)
    starcoder = ("bigcode/starcoder2-3b", "/models/starcoder2-3b")
    smol = ("smollm2-135m", "/cache/models/SmolLM2-135M-Instruct")
    assert fim.choose("auto", tokens, starcoder) == tokens
    assert fim.choose("auto", tokens, smol) is None  # FIM tokens, but not trained for FIM
    assert fim.choose("auto", tokens, ("x", "/m/SmolLM-360M")) is None  # matched in any name
    assert fim.choose("on", tokens, smol) == tokens  # on trusts the tokenizer
    assert fim.choose("off", tokens, starcoder) is None
    for mode in fim.FIM_MODES:
        assert fim.choose(mode, None, starcoder) is None  # no markers: always left to right
    with pytest.raises(ValueError, match="unknown fim mode 'sometimes'"):
        fim.choose("sometimes", tokens, starcoder)


def test_fim_setting_parses_and_rejects() -> None:
    settings, errors = parse_settings({"fim": "on"})
    assert errors == [] and settings.decoding.fim == "on"
    settings, errors = parse_settings({"fim": "yes"})
    assert settings.decoding.fim == "auto" and len(errors) == 1 and "fim" in errors[0]


# --- the prompt ----------------------------------------------------------------------------


def test_psm_prompt_layout(fim_tokenizer: Any, fim_vocab: Vocab) -> None:
    tokens = fim.fim_tokens(fim_tokenizer)
    assert tokens is not None
    prompt = fim.build_fim_prompt(fim_tokenizer, fim_vocab, tokens, BEFORE, AFTER, 512)
    prefix, healed = encode_healed(fim_tokenizer, fim_vocab, BEFORE)
    suffix = fim_tokenizer.encode(AFTER, add_special_tokens=False)
    assert prompt.ids == [tokens.prefix, *prefix, tokens.suffix, *suffix, tokens.middle]
    assert prompt.heal == healed and healed  # healing applies to the end of the prefix
    assert fim_vocab.decode(prefix) + healed == BEFORE.encode()


def test_suffix_keeps_its_share_and_ends_at_a_line(fim_tokenizer: Any, fim_vocab: Vocab) -> None:
    tokens = fim.fim_tokens(fim_tokenizer)
    assert tokens is not None
    after = "".join(f"value_{i} = compute({i}, 'x')\n" for i in range(200))
    before = "".join(f"line_{i} = {i}\n" for i in range(300)) + "result = "
    prompt = fim.build_fim_prompt(fim_tokenizer, fim_vocab, tokens, before, after, 200)
    assert len(prompt.ids) <= 200
    ids = prompt.ids
    middle_of = ids.index(tokens.suffix)
    suffix = ids[middle_of + 1 : -1]
    assert 0 < len(suffix) <= 200 // fim.SUFFIX_SHARE
    text = fim_vocab.text(suffix)
    assert after.startswith(text) and text.endswith("\n")  # whole lines from the start
    prefix = fim_vocab.text(ids[1:middle_of]) + prompt.heal.decode()
    assert before.endswith(prefix) and len(ids[1:middle_of]) > len(suffix)  # most: prefix


# --- through the completion path -----------------------------------------------------------


def test_decode_prompts_psm_for_a_fim_model(
    fim_tokenizer: Any, fim_vocab: Vocab, make_tiny_llama: Any
) -> None:
    engine = fim_engine(fim_tokenizer, fim_vocab, "starcoder2-like", make_tiny_llama)
    tokens = engine.fim_tokens
    assert tokens is not None
    prompts = recorded_prompts(engine)
    text = BEFORE + AFTER
    context = CursorContext.at(text, len(BEFORE))
    decode(engine, context, DecodingSettings(fim="auto", max_new_tokens=4, first_prompt_tokens=0))
    (prompt,) = prompts
    ids = prompt.ids
    assert ids[0] == tokens.prefix and ids[-1] == tokens.middle
    hole = ids.index(tokens.suffix)
    assert fim_vocab.text(ids[1:hole]) + prompt.heal.decode() == BEFORE
    assert fim_vocab.text(ids[hole + 1 : -1]) == AFTER

    decode(engine, context, DecodingSettings(fim="off", max_new_tokens=4, first_prompt_tokens=0))
    left_to_right = prompts[-1].ids
    assert not {tokens.prefix, tokens.suffix, tokens.middle} & set(left_to_right)
    assert fim_vocab.text(left_to_right).endswith(BEFORE.encode()[: -len(prompt.heal)].decode())


def test_auto_keeps_left_to_right_for_smollm_named_fim_tokenizer(
    fim_tokenizer: Any, fim_vocab: Vocab, make_tiny_llama: Any
) -> None:
    engine = fim_engine(fim_tokenizer, fim_vocab, "smollm2-135m", make_tiny_llama)
    prompts = recorded_prompts(engine)
    context = CursorContext.at(BEFORE + AFTER, len(BEFORE))
    decode(engine, context, DecodingSettings(fim="auto", max_new_tokens=4, first_prompt_tokens=0))
    decode(engine, context, DecodingSettings(fim="on", max_new_tokens=4, first_prompt_tokens=0))
    assert engine.fim_tokens is not None
    assert engine.fim_tokens.prefix not in prompts[0].ids  # auto: SmolLM is not FIM-trained
    assert prompts[1].ids[0] == engine.fim_tokens.prefix  # on: the tokenizer decides


def test_a_tokenizer_without_markers_keeps_left_to_right(tiny_engine: Engine) -> None:
    assert tiny_engine.fim_tokens is None
    prompts = recorded_prompts(tiny_engine)
    context = CursorContext.at(BEFORE + AFTER, len(BEFORE))
    decode(
        tiny_engine, context, DecodingSettings(fim="on", max_new_tokens=4, first_prompt_tokens=0)
    )
    expected = tiny_engine.tokenizer.encode(BEFORE, add_special_tokens=False)[:-1]
    assert prompts[0].ids[-len(expected) :] == expected  # the text before the cursor, healed


def test_cache_is_reused_when_only_the_prefix_grows(
    fim_tokenizer: Any, fim_vocab: Vocab, make_tiny_llama: Any
) -> None:
    engine = fim_engine(fim_tokenizer, fim_vocab, "qwen2.5-coder-like", make_tiny_llama)
    tokens = engine.fim_tokens
    assert tokens is not None
    cfg = DecodeConfig(k=2, max_new_tokens=4)
    before = "import os\n\n\ndef size(path):\n"
    first = engine.complete(engine.prompt(before, 4, fim=tokens, after=AFTER), cfg=cfg)
    prefix_len = len(encode_healed(fim_tokenizer, fim_vocab, before)[0])
    typed = before + "    return os.path.getsize(path)\n"
    second = engine.complete(engine.prompt(typed, 4, fim=tokens, after=AFTER), cfg=cfg)
    assert first.reused_tokens == 0
    assert second.reused_tokens >= 1 + prefix_len  # the marker and the old prefix: not again
    assert second.prompt_tokens > second.reused_tokens  # the suffix is prefilled again


# --- a draft stops where it runs into the text after the cursor ---------------------------


@pytest.mark.parametrize(
    ("draft", "after", "expected"),
    [
        ("foo)", ")", "foo"),  # the draft would type the ")" that is already there
        ("foo )", ")", "foo"),
        ("f(a))", ")", "f(a)"),  # its own ")" first, then the one after the cursor
        ("f(a)", ")", "f(a)"),  # balanced by itself: the ")" after the cursor closes more
        ("x, y)", ", y)  ", "x"),  # runs into the whole rest of the line
        ('hello")', '")', "hello"),
        ("foo)\n    bar", ")", "foo"),  # later lines go with the cut
        ("name", "n)", "name"),  # "n" inside a word is no match
        ("a, b", "b = 3", "a,"),  # its end is the start of the rest: stop before it
        ("foo)", "", "foo)"),  # nothing after the cursor: unchanged
        ("foo)", "   ", "foo)"),
        ("\n    return x", ")", "\n    return x"),  # a new line: not the cursor's line
        ("x] + y)", ")", "x] + y)"),  # closes what it did not open: no cut after that
    ],
)
def test_stop_at_suffix(draft: str, after: str, expected: str) -> None:
    assert stop_at_suffix(draft, after) == expected


def test_postprocess_cuts_drafts_at_the_text_after_the_cursor() -> None:
    completion = Completion(
        drafts=[Draft(t, [], -float(i)) for i, t in enumerate(["path)", "f(a))", ")", "x + 1"])]
    )
    result = postprocess(completion, after=")")
    assert [s.text for s in result] == ["path", "f(a)", "x + 1"]  # ")" alone: nothing left
    multi = postprocess(completion, after=")", line_mode="multi")
    assert [s.text for s in multi] == ["path", "f(a)", "x + 1"]
