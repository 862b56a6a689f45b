"""The model's word on a site (lsp_server/next_edits/line_score.py), on the tiny model.

Its preferences mean nothing (random weights): what is tested is that the one batch gives
each rewrite the log-probabilities a forward pass over that rewrite's text alone gives.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from lsp_server.next_edits.line_score import Rewrite, score_rewrites, split
from superposed.api import Engine
from superposed.model import LoadedModel

CODE = "".join(f"def handler_{i}(request, count):\n    return count + {i}\n" for i in range(12))


@pytest.fixture()
def engine(tiny_loaded: LoadedModel) -> Engine:
    return Engine(tiny_loaded)


def alone(engine: Any, ids: list[int], ending: int) -> float:
    """log P of the last ``ending`` tokens of ``ids``, one forward over the text alone."""
    model = engine.runner.model
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()  # [T, V]
    logp = torch.log_softmax(logits[:-1], dim=-1).gather(1, torch.tensor(ids[1:])[:, None])
    return float(logp[-ending:].sum())


def test_one_batch_scores_each_rewrite_as_its_text_alone(engine: Engine) -> None:
    rewrites = [
        Rewrite(CODE, "def run(request, count):", "def run(req, count):", edit="x = req"),
        Rewrite(CODE + "x = 1\n", "    return count", "    return count + 1", edit="x = req"),
        Rewrite(CODE[:-40], "y = handler_3(a)", "y = handler_4(a, b)", edit="x = req"),
    ]
    newline = engine.tokenizer.encode("\n", add_special_tokens=False)[0]
    got = score_rewrites(engine, rewrites, window=16)
    for rewrite, scored in zip(rewrites, got, strict=True):
        context, old, new = split(engine.tokenizer, rewrite, 16)
        assert len(context) == len(split(engine.tokenizer, rewrites[0], 16)[0])  # no padding
        assert (scored.old_tokens, scored.new_tokens) == (len(old), len(new))
        # the cached, padded batch and one plain forward round apart by up to 0.02 on the
        # tiny model's steep logits (the same two alone: 0); a token out of place costs nats
        assert scored.old_logp == pytest.approx(
            alone(engine, [newline, *context, *old], len(old)), abs=0.05
        )
        assert scored.new_logp == pytest.approx(
            alone(engine, [newline, *context, *new], len(new)), abs=0.05
        )
    assert engine.runner.length == 0  # the cache is left empty: a completion prefills anew


def test_the_endings_start_where_the_lines_part(engine: Engine) -> None:
    context, old, new = split(engine.tokenizer, Rewrite("a = 1\n", "b = foo(x)", "b = foo(y)"), 8)
    decode = engine.tokenizer.decode
    assert decode(context + old) == "a = 1\nb = foo(x)\n"[-len(decode(context + old)) :]
    assert decode(old).endswith("x)\n") and decode(new).endswith("y)\n")


def test_no_rewrite_runs_nothing(engine: Engine) -> None:
    engine.runner.prefill([1, 2, 3])
    assert score_rewrites(engine, []) == []
    assert engine.runner.length == 3  # the cache was not touched
