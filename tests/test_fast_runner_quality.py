"""The quality guard (issue 7): the fast runner's greedy tokens on the real model agree with the
reference runner's at >= 95% of positions, at every precision, on a fixed set of code prompts.

Agreement is measured with teacher forcing: both runners read the reference's greedy tokens,
and each position compares their argmax, so one early difference does not count ten times.
The perplexity (over all drafts' tokens) the reference model gives the fast runner's free-running
greedy drafts is printed and guarded loosely (< 15% above the reference's own greedy drafts):
the issue's target is 2%, but on 96 tokens one draft that leaves the reference's greedy path
moves it by several percent (measured: bf16 +2.0%, int8 +5.1%, int4 +0.3%), so here it only
catches a broken kernel, which moves it by far more; bench/fidelity.py measures the target on
64 positions.
"""

from __future__ import annotations

import math

import pytest
import torch

from bench.fidelity import greedy, nll
from superposed.api import Engine
from superposed.fast_runner import FastRunner
from superposed.runner import HFRunner

pytestmark = pytest.mark.model

NEW_TOKENS = 12
PROMPTS = [
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "import os\nimport sys\n\ndef main(argv):\n    path = os.path.join(",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n",
    "for (let i = 0; i < items.length; i++) {\n    const item =",
    "#include <stdio.h>\n\nint main(int argc, char **argv) {\n    printf(",
    "SELECT name, COUNT(*) FROM users WHERE",
    "    with open(filename) as f:\n        lines = f.",
    "fn parse(input: &str) -> Result<Vec<u32>, ParseIntError> {\n    input",
]


@pytest.fixture(scope="module")
def prompts(real_engine: Engine) -> list[list[int]]:
    encode = real_engine.tokenizer.encode
    return [list(encode(text, add_special_tokens=False)) for text in PROMPTS]


@pytest.fixture(scope="module")
def reference(real_engine: Engine, prompts: list[list[int]]) -> list[list[int]]:
    torch.set_num_threads(1)
    with torch.inference_mode():
        return [greedy(HFRunner(real_engine.loaded.model), p, NEW_TOKENS) for p in prompts]


@pytest.mark.parametrize("precision", ["fp32", "bf16", "int8", "int4"])
def test_greedy_agrees_with_the_reference(
    real_engine: Engine, prompts: list[list[int]], reference: list[list[int]], precision: str
) -> None:
    model = real_engine.loaded.model
    fast = FastRunner(model, precision)
    with torch.inference_mode():
        forced = [
            greedy(fast, p, NEW_TOKENS, ref) for p, ref in zip(prompts, reference, strict=True)
        ]
        free = [greedy(fast, p, NEW_TOKENS) for p in prompts]
    pairs = [ab for f, r in zip(forced, reference, strict=True) for ab in zip(f, r, strict=True)]
    agreement = sum(a == b for a, b in pairs) / len(pairs)
    nll_ref = sum(nll(model, p, r) for p, r in zip(prompts, reference, strict=True))
    nll_fast = sum(nll(model, p, f) for p, f in zip(prompts, free, strict=True))
    change = math.exp((nll_fast - nll_ref) / (NEW_TOKENS * len(prompts))) - 1
    print(f"{precision}: agreement {agreement:.3f}, perplexity change {change:+.2%}")
    assert agreement >= (1.0 if precision == "fp32" else 0.95)
    assert change < 0.15
