"""The captured decode step (superposed/cuda_graph.py).

On the CPU, ``eager_capture`` runs the graphs' bookkeeping (static inputs and outputs, cache
views fixed at capture, buckets, recapture when the storage moves) without a graph, held to
the eager runner; the CUDA tests at the end capture real graphs and skip without a GPU.
"""

from __future__ import annotations

import copy
import sys
from typing import Any

import pytest
import torch

from superposed.api import Engine
from superposed.cuda_graph import (
    SMALLEST_BUCKET,
    GraphRunner,
    capacity_bucket,
    cuda_capture,
    eager_capture,
    power_of_two,
)
from superposed.fast_runner import FastRunner
from superposed.model import LoadedModel
from superposed.types import DecodeConfig, EngineError
from tests.runner_harness import ids, script, tiny

CUDA_ONLY = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


pytestmark = pytest.mark.usefixtures("one_thread")


def test_buckets_are_powers_of_two_within_the_storage() -> None:
    assert [power_of_two(n) for n in (1, 2, 3, 4, 5, 17)] == [1, 2, 4, 4, 8, 32]
    assert capacity_bucket(1, 8192) == SMALLEST_BUCKET
    assert capacity_bucket(1000, 8192) == 1024
    assert capacity_bucket(1025, 8192) == 2048
    assert capacity_bucket(1000, 1000) == 1000  # the storage's own size, never past it
    assert capacity_bucket(1001, 1000) is None


def pair(precision: str = "fp32") -> tuple[FastRunner, GraphRunner]:
    """An eager runner and a graphed one (eager_capture) on the same weights, static caches."""
    model = tiny()
    eager = FastRunner(model, precision, static_cache=True)
    graphed = GraphRunner(FastRunner(model, precision, static_cache=True), eager_capture)
    return eager, graphed


def test_graphed_steps_equal_eager_ones_through_every_call_a_decoder_makes() -> None:
    eager, graphed = pair()
    want, got = script(eager), script(graphed)
    for expected, logits in zip(want, got, strict=True):
        assert logits.shape == expected.shape
        assert (logits - expected).abs().max() < 1e-4
    assert graphed.cached_ids == eager.cached_ids
    # the steps and the typed word went through graphs; the script's 4-row step moved the
    # storage (3 rows before), so its graphs were captured again
    assert graphed.compiled_calls == 5 and graphed.graphs.captures >= 4


def test_a_moved_storage_is_never_read_by_an_old_graph() -> None:
    """A batch of more rows reallocates the static cache: a graph captured before reads the
    old tensors, so the graphs must be captured again (the logits would be stale)."""
    eager, graphed = pair()
    one, six = eager.embed(torch.tensor([[5]])), eager.embed(torch.arange(6)[:, None])
    for runner in (eager, graphed):
        runner.prefill(ids(40))
        runner.step(one)  # a graph of one row, over the first storage
        runner.rewind(40)
        runner.expand(6)  # more rows than the storage had: it moves
        runner.step(six)
        runner.rewind(40)
    before = graphed.graphs.storage
    assert (graphed.step(one) - eager.step(one)).abs().max() < 1e-4  # the one-row graph again
    assert graphed.graphs.storage == before != (0, 0) and graphed.graphs.captures == 3


def test_the_mixture_inside_the_graph_is_superposition_s_input() -> None:
    """step_mixture's weighted embedding (tokens padded to 4 with weight 0) equals the eager
    step on superposed_input's sum_i gamma_i E(x_i), over several steps."""
    eager, graphed = pair()
    for runner in (eager, graphed):
        runner.prefill(ids(50))
    for newest in ([3, 9, 27], [4, 8], [100]):
        weights = torch.softmax(torch.tensor([0.5, -1.0, 0.25][: len(newest)]).double(), 0)
        mixed = weights.float()[:, None] * eager.embed(torch.tensor([newest]))[0]
        want = eager.step(mixed.sum(0)[None, None])
        got = graphed.step_mixture(torch.tensor([newest]), weights[None])
        assert got.shape == want.shape == (1, eager.vocab_size)
        assert (got - want).abs().max() < 1e-4
    assert graphed.length == eager.length == 53


def test_the_scoring_batch_scores_every_position_as_the_eager_runner_does() -> None:
    eager, graphed = pair()
    drafts = torch.tensor([[7, 8, 9, 10, 11], [12, 13, 14, 15, 16], [1, 2, 3, 4, 5]])
    for runner in (eager, graphed):
        runner.prefill(ids(30))
        runner.expand(3)
    want, got = eager.score(drafts), graphed.score(drafts)  # 5 tokens, padded to 8
    assert got.shape == want.shape == (3, 5, eager.vocab_size)
    assert (got - want).abs().max() < 1e-4
    assert graphed.length == eager.length == 35  # the padding's keys were not kept
    step = eager.embed(torch.tensor([[1], [2], [3]]))
    assert (graphed.step(step) - eager.step(step)).abs().max() < 1e-4


def test_drafts_with_graphs_equal_the_eager_runner_s(tiny_loaded: LoadedModel) -> None:
    """Whole requests (superposition's mixture, greedy, beam, the scoring batch of the
    branched rows): the same drafts, token for token."""
    cfg = DecodeConfig(k=3, max_new_tokens=6, seed=7, branch="first")
    text = "def add(a, b):\n    return"
    got, want = [], []
    for method in ("superposed", "greedy", "beam"):
        eager = Engine(tiny_loaded, runner=FastRunner(tiny_loaded.model, "fp32", static_cache=True))
        runner = FastRunner(tiny_loaded.model, "fp32", static_cache=True)
        graphed = Engine(tiny_loaded, runner=GraphRunner(runner, eager_capture))
        want.append([d.text for d in eager.complete(text, method=method, cfg=cfg).drafts])
        got.append([d.text for d in graphed.complete(text, method=method, cfg=cfg).drafts])
        assert graphed.compiled_calls > 0
    assert got == want and all(got)


def test_a_capture_that_fails_leaves_that_forward_eager() -> None:
    """A capture can fail (another thread's CUDA work during it, memory): the request must
    still be answered, eagerly, and that shape is not tried again."""
    attempts: list[int] = []

    def fails(forward: Any) -> Any:
        attempts.append(1)
        raise RuntimeError("operation not permitted when stream is capturing")

    eager = FastRunner(tiny(), "fp32", static_cache=True)
    graphed = GraphRunner(FastRunner(tiny(), "fp32", static_cache=True), fails)
    for runner in (eager, graphed):
        runner.prefill(ids(20))
    for token in (3, 4):
        embeds = eager.embed(torch.tensor([[token]]))
        assert (graphed.step(embeds) - eager.step(embeds)).abs().max() < 1e-4
    assert len(attempts) == 1 and graphed.graphs.captures == 0


def test_graphs_need_cuda_and_say_why() -> None:
    with pytest.raises(EngineError, match="CUDA graphs need a CUDA device"):
        GraphRunner(FastRunner(tiny(), "fp32", static_cache=True))


def test_a_gpu_runner_gets_graphs_and_no_compiled_package(
    tiny_loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """compile "background" on CUDA: graphs in process, never an AOTInductor package (its
    load crashed there); the stats say which step decodes."""
    runner = FastRunner(tiny_loaded.model, "bf16", static_cache=True)
    engine = Engine(tiny_loaded, runner=runner)
    monkeypatch.setattr(runner, "device", torch.device("cuda"))  # after the CPU-side set-up
    engine.start_compiler([sys.executable, "-c", "raise SystemExit('the builder ran')"])
    assert isinstance(engine.runner, GraphRunner) and engine.compiler is None
    assert engine.decode_step() == "graphs"
    assert engine.compile_status() == "ready: CUDA graphs"


# --- on a GPU ---------------------------------------------------------------------------------

CUDA = torch.device("cuda")


def cuda_pair(model: Any) -> tuple[FastRunner, GraphRunner]:
    model = copy.deepcopy(model).to(CUDA)
    return FastRunner(model, "bf16"), GraphRunner(FastRunner(model, "bf16"))


@CUDA_ONLY
@pytest.mark.parametrize("rows", [1, 3])
def test_cuda_graph_steps_equal_eager_steps(rows: int) -> None:
    """bf16, several steps of k rows through real CUDA graphs against the eager runner."""
    eager, graphed = cuda_pair(tiny())
    for runner in (eager, graphed):
        runner.prefill(ids(300))
        runner.expand(rows)
    for step in range(6):
        embeds = eager.embed(torch.arange(rows)[:, None] + 10 * step)  # [R, 1, H]
        want, got = eager.step(embeds), graphed.step(embeds)
        assert got.device.type == "cuda" and got.shape == want.shape
        assert (got - want).abs().max() < 0.05
    assert graphed.compiled_calls == 6


@CUDA_ONLY
def test_cuda_graph_mixture_and_scoring_batch_equal_eager() -> None:
    eager, graphed = cuda_pair(tiny())
    for runner in (eager, graphed):
        runner.prefill(ids(300))
    for newest in ([3, 9, 27], [4, 8], [100]):
        weights = torch.softmax(torch.arange(len(newest)).double(), 0)
        mixed = weights.float().to(CUDA)[:, None] * eager.embed(torch.tensor([newest]))[0]
        want = eager.step(mixed.sum(0)[None, None])
        got = graphed.step_mixture(torch.tensor([newest]), weights[None])
        assert (got - want).abs().max() < 0.05
    drafts = torch.tensor([[7, 8, 9, 10, 11], [12, 13, 14, 15, 16], [1, 2, 3, 4, 5]], device=CUDA)
    for runner in (eager, graphed):
        runner.rewind(300)
        runner.expand(3)
    assert (graphed.score(drafts) - eager.score(drafts)).abs().max() < 0.05


@CUDA_ONLY
def test_cuda_graph_drafts_match_eager_drafts(tiny_loaded: LoadedModel) -> None:
    """fp32 graphs on the GPU: the same superposed drafts as the eager GPU runner."""
    on_gpu = copy.deepcopy(tiny_loaded.model).to(CUDA)
    loaded = LoadedModel("tiny-random", on_gpu, tiny_loaded.tokenizer, tiny_loaded.vocab,
                         CUDA, torch.float32)  # fmt: skip
    cfg = DecodeConfig(k=3, max_new_tokens=8, seed=7)
    text = "import os\nimport sy"
    eager = Engine(loaded, runner=FastRunner(on_gpu, "fp32"))
    graphed = Engine(loaded, runner=GraphRunner(FastRunner(on_gpu, "fp32"), cuda_capture))
    want = [d.text for d in eager.complete(text, cfg=cfg).drafts]
    assert [d.text for d in graphed.complete(text, cfg=cfg).drafts] == want
    assert graphed.compiled_calls > 0
