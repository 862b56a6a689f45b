"""Superposed drafts branched into their own rows (superposed/rows.py) on the tiny model."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, cast

import pytest
import torch

from superposed import rows
from superposed.api import Engine
from superposed.fast_runner import FastRunner
from superposed.hypotheses import Hypothesis
from superposed.prompt import Prompt
from superposed.request import DecodeRequest
from superposed.runner import HFRunner, ModelRunner
from superposed.superposed import superposed_decode
from superposed.types import Cancelled, DecodeConfig, Draft, EngineError, StopCondition
from superposed.vocab import Vocab

CODE = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return"
# No n-gram source, no memory: after the branch each row is its own draft's greedy decode.
ROWS = DecodeConfig(k=3, alpha=0.0, max_new_tokens=7, branch="first")


class Recording:
    """A runner that records the rows of every step and the rows every select keeps."""

    def __init__(self, runner: ModelRunner) -> None:
        self.runner = runner
        self.steps: list[int] = []
        self.selects: list[list[int]] = []
        self.scores = 0

    def step(self, embeds: torch.Tensor) -> torch.Tensor:
        self.steps.append(embeds.shape[0])
        return self.runner.step(embeds)

    def select(self, kept: torch.Tensor) -> None:
        self.selects.append(kept.tolist())
        self.runner.select(kept)

    def score(self, ids: torch.Tensor) -> torch.Tensor:
        self.scores += 1
        return self.runner.score(ids)

    def __getattr__(self, name: str) -> Any:  # everything else is the runner's own
        return getattr(self.runner, name)


class OneRow:
    """A runner without batches: no expand, score or select."""

    def __init__(self, runner: ModelRunner) -> None:
        self.runner = runner

    def __getattr__(self, name: str) -> Any:
        if name in ("expand", "score", "select"):
            raise AttributeError(name)
        return getattr(self.runner, name)


def decode(engine: Engine, prompt: Prompt, cfg: DecodeConfig, runner: Any = None, **kw: Any):
    request = DecodeRequest(cast(ModelRunner, runner or engine.runner), engine.vocab, prompt, cfg)
    return superposed_decode(replace(request, **kw))


def greedy_next(tiny_loaded: Any, ids: list[int]) -> int:
    """The model's most probable next token after ``ids``, on a fresh one-row cache."""
    return int(HFRunner(tiny_loaded.model).prefill(ids).argmax())


def test_each_row_continues_its_own_draft(tiny_engine: Engine, tiny_loaded: Any) -> None:
    """Row i's history is draft i's tokens: every token after the branch is the greedy next
    token of a one-row decode of draft i's prefix (the superposed path feeds one mixed input,
    so its drafts 2 and 3 follow the best draft's state instead)."""
    prompt = tiny_engine.prompt(CODE, ROWS.max_new_tokens, heal=False)
    drafts = decode(tiny_engine, prompt, ROWS)
    assert len(drafts) == 3 and all(len(d.token_ids) > 2 for d in drafts)
    for draft in drafts:
        ids = draft.token_ids
        expected = [greedy_next(tiny_loaded, prompt.ids + ids[:j]) for j in range(1, len(ids))]
        assert ids[1:] == expected, draft.text
    off = decode(tiny_engine, prompt, replace(ROWS, branch="off"))
    assert [d.token_ids for d in off] != [d.token_ids for d in drafts]  # not the rows' drafts


def stop_for_one(drafts: list[Draft]) -> tuple[int, str]:
    """A draft and a character that only its text after its first token has."""
    for i, draft in enumerate(drafts):
        others = "".join(d.text for j, d in enumerate(drafts) if j != i)
        for char in draft.text[len(draft.text) // 2 :]:
            if char.strip() and char not in others and char not in draft.text[:3]:
                return i, char
    raise AssertionError("no draft has a character of its own")


def test_finished_rows_leave_the_batch(tiny_engine: Engine) -> None:
    """A row whose draft stops leaves the batch; the others go on exactly as before."""
    prompt = tiny_engine.prompt(CODE, ROWS.max_new_tokens, heal=False)
    free = decode(tiny_engine, prompt, ROWS)
    stopper, char = stop_for_one(free)
    runner = Recording(tiny_engine.runner)
    stopped = decode(tiny_engine, prompt, ROWS, runner, stop=StopCondition(stop_strings=(char,)))
    assert runner.scores == 1  # the drafts' histories: one batched forward
    assert runner.steps[0] == 3 and runner.steps[-1] == 2 and len(runner.selects) == 1
    assert len(runner.selects[0]) == 2  # the stopped row is gone
    finished = [d for d in stopped if d.finished and char not in d.text]
    assert any(free[stopper].text.startswith(d.text) for d in finished)
    goes_on = {d.text for i, d in enumerate(free) if i != stopper}
    assert goes_on <= {d.text for d in stopped}


def test_a_runner_without_batches_stays_superposed(
    tiny_engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    prompt = tiny_engine.prompt(CODE, ROWS.max_new_tokens, heal=False)
    rows._said.clear()
    with caplog.at_level(logging.WARNING, logger="superposed.rows"):
        one_row = decode(tiny_engine, prompt, ROWS, OneRow(tiny_engine.runner))
        decode(tiny_engine, prompt, ROWS, OneRow(tiny_engine.runner))
    off = decode(tiny_engine, prompt, replace(ROWS, branch="off"))
    assert [d.token_ids for d in one_row] == [d.token_ids for d in off]
    said = [r.getMessage() for r in caplog.records if r.name == "superposed.rows"]
    assert len(said) == 1 and "no expand, score, select" in said[0]  # once, not per request


def test_the_cache_holds_the_prompt_after_rows(tiny_loaded: Any) -> None:
    """Rows are rewound: the next request reuses the prompt and decodes as a fresh engine."""
    warm = Engine(tiny_loaded)
    first = warm.prompt(CODE, ROWS.max_new_tokens)
    warm.complete(first, "superposed", ROWS)
    assert warm.runner.cached_ids == first.ids and warm.runner.length == len(first.ids)
    typed = CODE + " a * b"
    reused = warm.complete(typed, "superposed", ROWS)
    fresh = Engine(tiny_loaded).complete(typed, "superposed", ROWS)
    assert reused.reused_tokens > 0
    assert [d.token_ids for d in reused.drafts] == [d.token_ids for d in fresh.drafts]


def test_cancel_in_the_rows(tiny_engine: Engine) -> None:
    prompt = tiny_engine.prompt(CODE, ROWS.max_new_tokens, heal=False)
    checks: list[int] = []

    def cancel() -> bool:  # the first check is the superposed loop's, the rest the rows'
        checks.append(1)
        return len(checks) == 4

    runner = Recording(tiny_engine.runner)
    with pytest.raises(Cancelled):
        decode(tiny_engine, prompt, ROWS, runner, cancel=cancel)
    assert runner.scores == 1 and runner.steps == [3]  # cancelled between two row steps
    assert tiny_engine.runner.cached_ids == prompt.ids
    assert tiny_engine.runner.length == len(prompt.ids)


def test_split_waits_for_texts_that_differ_beyond_whitespace(tokenizer: Any, vocab: Vocab) -> None:
    def hyps(*texts: str) -> list[Hypothesis]:
        return [Hypothesis(tokens=tokenizer.encode(t)) for t in texts]

    same_tokens = hyps(" return", "return")  # one token each, the same word
    assert len({len(h.tokens) for h in same_tokens}) == 1
    assert not rows.branch_now("split", same_tokens, vocab)
    assert rows.branch_now("first", same_tokens, vocab)
    assert rows.branch_now("split", hyps(" return", " yield"), vocab)
    assert not rows.branch_now("off", hyps(" return", " yield"), vocab)


def test_an_unknown_branch_is_a_clear_error() -> None:
    with pytest.raises(EngineError, match="unknown branch 'sideways': use off, first, split"):
        DecodeConfig(branch="sideways").validate()


def test_the_default_follows_the_committed_test_split() -> None:
    """branch is on by default only where the test split's replay (bench/results/
    replay_branch.json, line start) met the rules: no loss of EM@1 or verbatim EM@3, and a
    request p50 at most 1.3x the default's."""
    import json
    from pathlib import Path

    result = json.loads(
        (Path(__file__).parents[1] / "bench/results/replay_branch.json").read_text()
    )
    base, rows_on = (result["summary"][c]["line-start"] for c in ("default", "branch"))
    kept = (
        rows_on["all"]["em1"]["mean"] >= base["all"]["em1"]["mean"]
        and rows_on["verbatim"]["emk"]["mean"] >= base["verbatim"]["emk"]["mean"]
    )
    fast = rows_on["all"]["p50_ms"] <= 1.3 * base["all"]["p50_ms"]
    chosen = result["configs"]["branch"]["options"]["branch"]
    assert DecodeConfig().branch == (chosen if kept and fast else "off")


@pytest.mark.parametrize("kind", ["hf", "fast"])
def test_score_gives_each_rows_log_probabilities_as_one_by_one_prefills_do(
    tiny_loaded: Any, kind: str
) -> None:
    """``runner.score``, which runs the branched rows' histories in one batch, scores every
    row's tokens after the cached prompt as prefilling them one at a time does."""
    model = tiny_loaded.model
    runner = HFRunner(model) if kind == "hf" else FastRunner(model, precision="fp32")
    ids = tiny_loaded.tokenizer.encode(CODE, add_special_tokens=False)
    histories = [[11, 12, 13], [500, 7, 7]]
    with torch.inference_mode():  # what the engine's callers hold (superposed/rows.py)
        runner.prefill(ids)
        runner.rewind(len(ids) - 1)  # the prompt's last token runs again: the first logits
        runner.expand(len(histories))
        batch = torch.tensor([[ids[-1], *h] for h in histories])
        logp = torch.log_softmax(runner.score(batch).float(), -1)  # [R, 1 + T, V]
        for row, history in enumerate(histories):
            runner.rewind(0)
            logits = runner.prefill(ids)
            for j, token in enumerate(history):
                want = float(torch.log_softmax(logits.float(), -1)[token])
                assert float(logp[row, j, token]) == pytest.approx(want, abs=1e-3)
                logits = runner.prefill([token])
