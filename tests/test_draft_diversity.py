"""Issue 22 part 1: a block's drafts spend their slots on different first lines."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

from superposed.diversity import Slots, first_line_key, first_word_key
from superposed.hypotheses import Hypothesis
from superposed.prompt import Prompt
from superposed.request import DecodeRequest
from superposed.superposed import SuperposedDecoder, select
from superposed.types import DecodeConfig, StopCondition


def _hyps(tokenizer: Any, texts: list[str], scores: list[float]) -> list[Hypothesis]:
    return [Hypothesis(tokenizer.encode(t), s) for t, s in zip(texts, scores, strict=True)]


def test_first_line_key_waits_for_the_line_break() -> None:
    assert first_line_key(b"    x = 1") is None
    assert first_line_key(b"    x = 1  \n    y") == b"    x = 1"
    assert first_line_key(b"\n    x = 1\ny") == b"\n    x = 1"  # leading breaks are no line


def test_block_drafts_with_one_first_line_compete_for_one_slot(tokenizer, vocab) -> None:
    """Two drafts "x = 1\\n<tail>" and a third "y = 2\\n...": with first-line slots the
    worse tail of "x = 1" gives its slot to the next distinct first line."""
    hyps = _hyps(tokenizer, ["x = 1\n", "y = 2\n"], [-1.0, -3.0])
    tails = [tokenizer.encode(t)[0] for t in ("a", "b")]
    candidates = torch.tensor([tails, tails])
    scores = torch.tensor([[-0.1, -0.2], [-0.1, -0.2]], dtype=torch.float64)
    plain = select(hyps, candidates, scores, 2, vocab)
    assert [first_line_key(vocab.decode(h.tokens)) for h in plain] == [b"x = 1", b"x = 1"]
    slots = select(hyps, candidates, scores, 2, vocab, Slots(lines=set()))
    firsts = [first_line_key(vocab.decode(h.tokens)) for h in slots]
    assert firsts == [b"x = 1", b"y = 2"]
    assert slots[0].score == plain[0].score  # the better tail keeps the slot
    # A first line a finished draft holds takes no slot among the live ones.
    held = select(hyps, candidates, scores, 2, vocab, Slots(lines={b"x = 1"}))
    assert [first_line_key(vocab.decode(h.tokens)) for h in held] == [b"y = 2"]


def test_unfinished_first_lines_compete_by_their_whole_text(tokenizer, vocab) -> None:
    hyps = _hyps(tokenizer, ["x = 1"], [-1.0])
    nexts = [tokenizer.encode(t)[0] for t in ("0", "1")]
    candidates = torch.tensor([nexts])
    scores = torch.tensor([[-0.1, -0.2]], dtype=torch.float64)
    assert len(select(hyps, candidates, scores, 2, vocab, Slots(lines=set()))) == 2


def test_the_decoder_keeps_first_line_slots_for_blocks_only(vocab) -> None:
    runner = SimpleNamespace()
    block = StopCondition(floor=0, max_lines=8)
    line = StopCondition(single_line=True)
    for flag, stop, on in [(True, block, True), (True, line, False), (False, block, False)]:
        cfg = DecodeConfig(distinct_first_lines=flag)
        request = DecodeRequest(runner, vocab, Prompt([1]), cfg, stop=stop)  # type: ignore[arg-type]
        assert (SuperposedDecoder(request).slots.lines is not None) is on


def test_first_word_key_waits_for_the_word_to_end() -> None:
    assert first_word_key(b"    self") is None
    assert first_word_key(b"    self.x") == b"self"
    assert first_word_key(b"return x") == b"return"
    assert first_word_key(b"(a") == b"("


def test_a_first_word_cap_gives_slots_to_drafts_that_begin_otherwise(tokenizer, vocab) -> None:
    """Three live drafts begin "self."; with at most two per first word, the best draft that
    begins otherwise takes the third slot; with none left, the held-back ones fill it."""
    hyps = _hyps(tokenizer, ["self.", "return"], [-1.0, -4.0])
    nexts = [tokenizer.encode(t)[0] for t in ("a", "b", "c")]
    candidates = torch.tensor([nexts, [tokenizer.encode(" x")[0]] * 3])
    scores = torch.tensor([[-0.1, -0.2, -0.3], [-0.1, -9.0, -9.0]], dtype=torch.float64)
    words = [
        first_word_key(vocab.decode(h.tokens)) for h in select(hyps, candidates, scores, 3, vocab)
    ]
    assert words == [b"self", b"self", b"self"]
    capped = select(hyps, candidates, scores, 3, vocab, Slots(word_cap=2))
    assert [first_word_key(vocab.decode(h.tokens)) for h in capped] == [b"self", b"self", b"return"]
    alone = select(hyps[:1], candidates[:1], scores[:1], 3, vocab, Slots(word_cap=2))
    assert len(alone) == 3  # nothing begins otherwise: the cap gives way


def test_the_last_shown_slot_goes_to_a_draft_that_begins_otherwise() -> None:
    from lsp_server.drafts import Suggestion
    from superposed import ranking

    reserve_first_word = ranking.reserved(3, ranking.first_word)
    texts = ["self.a = 1", "self.b = 2", "self.c = 3", "return x", "yield y"]
    shown = reserve_first_word([Suggestion(t, 0.0) for t in texts])
    assert [s.text for s in shown] == [
        "self.a = 1",
        "self.b = 2",
        "return x",
        "self.c = 3",
        "yield y",
    ]
    varied = ["self.a = 1", "return x", "self.c = 3", "yield y"]
    assert [s.text for s in reserve_first_word([Suggestion(t, 0.0) for t in varied])] == varied


class _Recorder:
    """An Engine stand-in for completion.decode: records the config, answers ``texts``."""

    def __init__(self, tokenizer: Any, texts: list[str]) -> None:
        self.tokenizer, self.max_context, self.fim_tokens, self.name = tokenizer, 2048, None, "t"
        self.texts, self.cfgs = texts, []  # type: ignore[var-annotated]

    def prompt(self, text: str, max_new_tokens: int, **kwargs: object) -> SimpleNamespace:
        return SimpleNamespace(text=text, ids=[], max_new_tokens=max_new_tokens)

    def complete(self, prompt: SimpleNamespace, **kwargs: Any) -> Any:
        from superposed.api import Completion
        from superposed.types import Draft

        self.cfgs.append(kwargs["cfg"])
        return Completion(drafts=[Draft(t, [], -float(i), True) for i, t in enumerate(self.texts)])


def test_the_server_caps_first_words_at_a_line_start_only(tokenizer) -> None:
    """firstWordCap reaches the engine on a blank line (a line start), not mid-line, and
    the k shown there give their last slot to a draft that begins otherwise."""
    from lsp_server.completion import decode
    from lsp_server.cursor import CursorContext
    from lsp_server.settings import DecodingSettings

    texts = ["self.a = 1", "self.b = 2", "self.c = 3", "return x"]
    settings = DecodingSettings(first_prompt_tokens=0, line_mode="single", first_word_cap=2)
    engine = _Recorder(tokenizer, texts)
    text = "def f(self):\n    \n"
    start = CursorContext.at(text, text.index("\n    ") + 5, language="python")
    shown = decode(engine, start, settings)  # type: ignore[arg-type]
    assert [s.text for s in shown.suggestions] == ["self.a = 1", "self.b = 2", "return x"]
    assert engine.cfgs[0].first_word_cap == 2
    middle = CursorContext.at("x = sel\n", 7, language="python")
    decode(engine, middle, settings)  # type: ignore[arg-type]
    assert engine.cfgs[1].first_word_cap == 0
    off = decode(engine, start, DecodingSettings(first_prompt_tokens=0, line_mode="single"))  # type: ignore[arg-type]
    assert [s.text for s in off.suggestions] == texts[:3]
