"""The engine's CUDA path: the fast runner, whole decoders and the compiled step on a GPU.

These run only where CUDA is available (CI has no GPU; they were run on an H200, see
bench/results/latency-cuda.md). On a GPU the fast runner keeps bf16 decode weights and a
static KV cache. The compiled step is not used on a GPU: its CUDA package built, but loading
it crashed the process there (compiled.unsupported_reason, tested in test_compiled.py).
"""

from __future__ import annotations

import copy

import pytest
import torch

from superposed.api import Engine
from superposed.fast_runner import FastRunner
from superposed.model import LoadedModel
from superposed.runner import HFRunner
from superposed.runner_choice import make_runner
from superposed.types import DecodeConfig
from superposed.vocab import Vocab
from tests.runner_harness import ids, script, tiny

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
CUDA = torch.device("cuda")


def test_auto_precision_on_a_gpu_is_bf16_with_a_static_cache() -> None:
    runner = make_runner(tiny().to(CUDA))
    assert isinstance(runner, FastRunner)
    assert runner.precision == "bf16" and runner.static_cache and runner.device.type == "cuda"


@pytest.mark.parametrize(("precision", "atol"), [("fp32", 1e-3), ("bf16", 0.05)])
def test_fast_runner_matches_the_reference_runner_on_cuda(precision: str, atol: float) -> None:
    model = tiny().to(CUDA)
    reference, fast = HFRunner(model), FastRunner(model, precision)
    for expected, got in zip(script(reference), script(fast), strict=True):
        assert got.device.type == "cuda" and got.shape == expected.shape
        assert (got.float() - expected.float()).abs().max() < atol
    assert fast.cached_ids == reference.cached_ids == ids(63)


@pytest.mark.parametrize("method", ["greedy", "superposed", "beam"])
def test_drafts_on_cuda_equal_the_drafts_on_the_cpu(
    tiny_loaded: LoadedModel, vocab: Vocab, method: str
) -> None:
    """fp32 on both devices: the same drafts, token for token (superposition included)."""
    on_gpu = LoadedModel(
        "tiny-random",
        copy.deepcopy(tiny_loaded.model).to(CUDA),
        tiny_loaded.tokenizer,
        vocab,
        CUDA,
        torch.float32,
    )
    cuda = Engine(on_gpu, runner=FastRunner(on_gpu.model, "fp32"))
    cfg = DecodeConfig(k=3, max_new_tokens=6, seed=7)
    texts = ["def add(a, b):\n    return", "import os\nimport sy"]
    got = [[d.text for d in cuda.complete(t, method=method, cfg=cfg).drafts] for t in texts]
    cpu = Engine(tiny_loaded, runner=FastRunner(tiny_loaded.model, "fp32"))
    want = [[d.text for d in cpu.complete(t, method=method, cfg=cfg).drafts] for t in texts]
    assert got == want and all(got)
