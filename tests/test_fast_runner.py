"""The fast runner against the reference transformers runner, on tiny random models."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from lsp_server.runtime.warmup import WARM_CHUNK
from superposed import prefill
from superposed.api import Engine
from superposed.fast_runner import FastRunner, UnsupportedModel
from superposed.model import LoadedModel, load_model
from superposed.prefill import DequantizedBlocks
from superposed.quant import DenseLinear, prefill_dtype
from superposed.runner import HFRunner, prefill_reusing_cache
from superposed.runner_choice import make_runner
from superposed.types import DecodeConfig, EngineError
from superposed.vocab import Vocab
from tests.runner_harness import VOCAB, ids, script, tiny, tiny_tokenizer


@pytest.fixture(scope="module")
def llama() -> Any:
    torch.set_num_threads(1)
    return tiny()


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_fp32_matches_the_reference_runner_call_for_call(kind: str) -> None:
    model = tiny(kind)
    reference, fast = HFRunner(model), FastRunner(model, "fp32")
    for expected, got in zip(script(reference), script(fast), strict=True):
        assert got.dtype == torch.float32 and got.shape == expected.shape
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert fast.cached_ids == reference.cached_ids == ids(63)
    assert fast.length == reference.length == 63


@pytest.mark.parametrize(("precision", "atol"), [("bf16", 0.05), ("int8", 0.3), ("int4", 0.3)])
def test_lower_precisions_stay_close_to_the_reference(
    llama: Any, precision: str, atol: float
) -> None:
    reference, fast = HFRunner(llama), FastRunner(llama, precision)
    expected, got = script(reference), script(fast)
    for e, g in zip(expected, got, strict=True):
        assert g.dtype == torch.float32
        assert (g - e).abs().max() < atol
    same = [(e.argmax(-1) == g.argmax(-1)) for e, g in zip(expected, got, strict=True)]
    agree, total = sum(int(s.sum()) for s in same), sum(s.numel() for s in same)
    assert agree / total >= 0.8
    assert fast.cached_ids == reference.cached_ids


@pytest.mark.parametrize("kv", [torch.float32, torch.bfloat16])
def test_either_kv_cache_dtype_stays_close_to_the_reference(llama: Any, kv: torch.dtype) -> None:
    """The KV cache's dtype is measured per CPU (quant.kv_dtype): int4 with either one keeps
    the tolerance of the int4 test above."""
    reference, fast = HFRunner(llama), FastRunner(llama, "int4", kv_dtype=kv)
    assert fast.cache.keys.dtype == kv
    for e, g in zip(script(reference), script(fast), strict=True):
        assert (g - e).abs().max() < 0.3
    assert fast.cached_ids == reference.cached_ids


def test_long_prefill_in_chunks_and_cache_growth(llama: Any) -> None:
    """700 tokens: two prefill chunks, and the KV tensors grow past several quanta."""
    reference, fast = HFRunner(llama), FastRunner(llama, "fp32")
    tokens = ids(700, seed=2)
    torch.testing.assert_close(fast.prefill(tokens[:5]), reference.prefill(tokens[:5]))
    torch.testing.assert_close(
        fast.prefill(tokens[5:]), reference.prefill(tokens[5:]), atol=1e-4, rtol=1e-4
    )
    fast.expand(8)
    reference.expand(8)
    rows = torch.arange(8)[:, None]
    torch.testing.assert_close(
        fast.step(fast.embed(rows)), reference.step(reference.embed(rows)), atol=1e-4, rtol=1e-4
    )


def test_static_cache_holds_the_whole_context_from_the_start() -> None:
    model = tiny(max_positions=300)
    reference, fast = HFRunner(model), FastRunner(model, "fp32", static_cache=True)
    assert not FastRunner(model, "fp32").static_cache  # the default on a CPU
    tokens = ids(290, seed=4)
    torch.testing.assert_close(fast.prefill(tokens[:10]), reference.prefill(tokens[:10]))
    storage = fast.cache.keys, fast.cache.values
    assert fast.cache.capacity == 300
    torch.testing.assert_close(
        fast.prefill(tokens[10:]), reference.prefill(tokens[10:]), atol=1e-4, rtol=1e-4
    )
    assert fast.cache.keys is storage[0] and fast.cache.values is storage[1]  # never reallocated
    fast.rewind(0)  # not even for a new prompt
    fast.prefill(tokens[:5])
    assert (
        fast.cache.keys is storage[0]
        and fast.cache.layer_keys[0].data_ptr() == storage[0].data_ptr()
    )


def test_prompt_cache_reuse_gives_the_logits_of_a_fresh_prefill(llama: Any) -> None:
    fast = FastRunner(llama, "fp32")
    first, edited = ids(50), ids(50)[:42] + ids(6, seed=3)
    prefill_reusing_cache(fast, first)
    fast.expand(3)
    fast.step(fast.embed(torch.tensor([[1], [2], [3]])))  # a decode, left in the cache ...
    fast.rewind(len(first))  # ... and rewound, as the decoders do
    reused = prefill_reusing_cache(fast, edited)
    assert fast.cached_ids == edited and fast.length == len(edited)
    fresh = FastRunner(llama, "fp32").prefill(edited)
    torch.testing.assert_close(reused, fresh, atol=1e-5, rtol=1e-5)


METHODS = ["greedy", "superposed", "beam", "nucleus", "nucleus-sequential"]


@pytest.mark.parametrize("method", METHODS)
def test_engine_drafts_are_the_same_on_both_runners(
    tiny_loaded: LoadedModel, vocab: Vocab, method: str
) -> None:
    """Whole decoders on the real tokenizer: fp32 fast drafts equal the reference drafts."""
    reference = Engine(tiny_loaded)
    fast = Engine(tiny_loaded, runner=FastRunner(tiny_loaded.model, "fp32"))
    cfg = DecodeConfig(k=3, max_new_tokens=6, seed=7)
    for text in ["def add(a, b):\n    return", "import os\nimport sy"]:
        want = reference.complete(text, method=method, cfg=cfg).drafts
        got = fast.complete(text, method=method, cfg=cfg).drafts
        assert [d.token_ids for d in got] == [d.token_ids for d in want]
        assert [d.text for d in got] == [d.text for d in want]
    assert fast.runner.cached_ids == reference.runner.cached_ids


def test_make_runner_picks_fast_for_llama_and_falls_back_for_others(
    llama: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    from superposed import runner_choice
    from superposed.calibrate import Calibration

    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=2)).eval()
    for measured in ("int4", "int8"):  # auto on a CPU: the calibration's choice
        monkeypatch.setattr(
            runner_choice, "calibrated", lambda _, p=measured: Calibration(p, 1, {})
        )
        auto = make_runner(llama)
        assert isinstance(auto, FastRunner) and auto.precision == measured
    assert isinstance(make_runner(llama, "hf"), HFRunner)
    assert isinstance(make_runner(gpt2), HFRunner)
    runner = make_runner(llama, "fast", "int8")
    assert isinstance(runner, FastRunner) and runner.precision == "int8"
    with pytest.raises(UnsupportedModel, match="gpt2"):
        make_runner(gpt2, "fast")
    with pytest.raises(EngineError, match="precision"):
        FastRunner(llama, "int2")
    with pytest.raises(EngineError, match="runner"):
        make_runner(llama, "onnx")


def test_misuse_raises_clear_errors() -> None:
    fast = FastRunner(tiny(max_positions=64), "fp32")
    with pytest.raises(ValueError, match="at least one"):
        fast.prefill([])
    fast.prefill(ids(10))
    fast.expand(2)
    with pytest.raises(ValueError, match="rows"):
        fast.step(fast.embed(torch.tensor([[1]])))
    with pytest.raises(ValueError, match="rewind"):
        fast.prefill([1])
    fast.rewind(10)
    with pytest.raises(EngineError, match="context"):
        fast.prefill(ids(60))


def test_a_new_prompt_gets_a_cache_of_its_own_size() -> None:
    """After a long prompt, rewinding to nothing frees the cache, so a short prompt's steps
    (which, compiled, read every cached position) do not pay for the long one."""
    runner = FastRunner(tiny(), "fp32")
    runner.prefill(ids(600))
    runner.expand(3)
    assert runner.cache.keys.shape[1:4] == (3, runner.kv_heads, 640)
    runner.rewind(10)  # typing on: the cache stays
    assert runner.cache.capacity == 640
    runner.rewind(0)
    runner.prefill(ids(20))
    assert runner.cache.keys.shape[1:4] == (1, runner.kv_heads, 128)
    assert runner.step(runner.embed(torch.tensor([[1]]))).shape == (1, VOCAB)


def _tensors(obj: Any, seen: set[int]) -> list[torch.Tensor]:
    """Every tensor reachable from ``obj`` through attributes and containers."""
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        children = list(obj.values())
    elif isinstance(obj, list | tuple):
        children = list(obj)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        children = list(vars(obj).values())
    else:
        return []
    return [t for child in children for t in _tensors(child, seen)]


@pytest.mark.parametrize("precision", ["fp32", "int4"])
def test_the_runner_keeps_no_view_of_the_model_weights(precision: str) -> None:
    """Loaded weights can map the checkpoint file: a view of any of them (the weights'
    fingerprint sample, the embedding, a norm) kept the whole map resident, 0.5 GB for the
    default model, after the fp32 master copy was dropped."""
    model = tiny()
    runner = FastRunner(model, precision)
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    held = _tensors(runner, set())
    assert held  # the walk reaches the runner's weights
    assert not [t.shape for t in held if t.untyped_storage().data_ptr() in weights]


def saved(model: Any, directory: Path, **options: Any) -> str:
    """``model`` saved as a model directory (safetensors), with a tokenizer of its vocabulary."""
    model.save_pretrained(directory, **options)
    tiny_tokenizer().save_pretrained(directory)
    return str(directory)


@pytest.mark.parametrize(
    ("kind", "precision", "shards"), [("llama", "fp32", False), ("qwen2", "int4", True)]
)
def test_a_runner_read_tensor_by_tensor_equals_one_built_from_the_loaded_model(
    kind: str, precision: str, shards: bool, tmp_path: Path
) -> None:
    """Engine.load builds the fast runner from a weightless skeleton and its checkpoint,
    read one tensor at a time (no fp32 master resident beside the runner's copies): the
    runner must be the same, bit for bit, as one built from the model with its weights."""
    options = {"max_shard_size": "200KB"} if shards else {}  # several files and an index
    directory = saved(tiny(kind), tmp_path, **options)  # safetensors
    assert (tmp_path / "model.safetensors.index.json").is_file() == shards
    full = load_model(directory, "cpu", "float32")
    skeleton = load_model(directory, "cpu", "float32", skeleton=True)
    assert full.checkpoint is None and skeleton.checkpoint is not None
    assert next(skeleton.model.parameters()).device.type == "meta"  # no weights read
    by_tensor = FastRunner(skeleton.model, precision, checkpoint=skeleton.checkpoint)
    by_model = FastRunner(full.model, precision)
    assert by_tensor.config_json == by_model.config_json  # the compiled step's key
    for a, b in zip(by_tensor.weight_sample(), by_model.weight_sample(), strict=True):
        assert torch.equal(a, b)
    for expected, got in zip(script(by_model), script(by_tensor), strict=True):
        assert torch.equal(got, expected)


def test_load_model_keeps_the_callers_threads_unless_asked(tmp_path: Path) -> None:
    """load_model's default set torch's threads to one, silently undoing a caller's setting
    (bench.latency sets its --threads, then loads)."""
    directory = saved(tiny(), tmp_path)
    torch.set_num_threads(2)
    try:
        load_model(directory, "cpu", "float32", skeleton=True)
        assert torch.get_num_threads() == 2
        load_model(directory, "cpu", "float32", threads=1, skeleton=True)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(1)


def test_a_checkpoint_reads_a_big_tensor_in_blocks_of_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tensor over _READ_BYTES (the default model's embedding) is read a block of rows at a
    time, the file closed between blocks: the same values, in the dtype asked for."""
    import superposed.model as model_module

    skeleton = load_model(saved(tiny(), tmp_path), "cpu", "float32", skeleton=True)
    checkpoint = skeleton.checkpoint
    assert checkpoint is not None
    parameters = dict(skeleton.model.named_parameters())
    whole = {name: checkpoint(p) for name, p in parameters.items()}
    monkeypatch.setattr(model_module, "_READ_BYTES", 1000)  # most tensors, in blocks of 3 rows
    read = []
    monkeypatch.setattr(model_module, "safe_open", _counting(model_module.safe_open, read))
    for name, parameter in parameters.items():
        read.clear()
        assert torch.equal(checkpoint(parameter), whole[name])
        assert torch.equal(checkpoint(parameter, torch.bfloat16), whole[name].bfloat16())
        blocks = -(-parameter.shape[0] // max(1, 250 // parameter[0].numel()))
        assert len(read) == (2 * blocks if parameter.numel() * 4 > 1000 else 2)


def _counting(opener: Any, calls: list[str]) -> Any:
    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(str(args[0]))
        return opener(*args, **kwargs)

    return counted


def test_a_skeleton_falls_back_to_the_full_model_where_tensors_cannot_be_streamed(
    tmp_path: Path,
) -> None:
    model = tiny()
    directory = saved(model, tmp_path)
    (tmp_path / "model.safetensors").unlink()  # a pytorch_model.bin only
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    loaded = load_model(directory, "cpu", "float32", skeleton=True)
    assert loaded.checkpoint is None
    assert next(loaded.model.parameters()).device.type == "cpu"


def test_engine_load_keeps_no_model_beside_the_fast_runner(tmp_path: Path) -> None:
    directory = saved(tiny(), tmp_path)
    engine = Engine.load(directory, "cpu", "float32", precision="int4")
    assert isinstance(engine.runner, FastRunner)
    assert engine.loaded.model is None and engine.loaded.checkpoint is None
    hf = Engine.load(directory, "cpu", "float32", runner="hf")  # needs the weights
    assert isinstance(hf.runner, HFRunner)
    assert next(hf.loaded.model.parameters()).device.type == "cpu"


def test_the_prefill_weights_share_the_decode_head() -> None:
    """The head reads one row per sequence in its decode precision: a bf16 copy of it beside
    the prefill layers (57 MB for the default model) was never read."""
    runner = FastRunner(tiny(), "int4")
    assert runner.plan.dense.lm_head is runner.decode_weights.lm_head


def _storages(obj: Any, seen: set[int] | None = None) -> set[int]:
    """The tensor storages reachable from ``obj`` through attributes and lists."""
    seen = set() if seen is None else seen
    if isinstance(obj, torch.Tensor):
        seen.add(obj.untyped_storage().data_ptr())
    elif isinstance(obj, list | tuple):
        for item in obj:
            _storages(item, seen)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        for value in vars(obj).values():
            _storages(value, seen)
    return seen


@pytest.mark.parametrize("precision", ["int8", "int4"])
def test_a_quantized_runner_keeps_no_bf16_copy_of_the_layers(precision: str) -> None:
    """Issue 14: the prefill reads the decode weights, de-quantized one layer at a time (the
    bf16 copy was 203 of the server's 831 MiB); prefill_copy keeps the copy."""
    runner = FastRunner(tiny(), precision)
    assert _storages(runner.plan.dense) <= _storages(runner.decode_weights)
    layers = list(runner.plan.dense.blocks)
    assert all(isinstance(b.gate_up, DenseLinear) for b in layers)
    assert all(b.gate_up.weight.dtype == prefill_dtype() for b in layers)  # type: ignore[attr-defined]
    copying = FastRunner(tiny(), precision, prefill_copy=True)
    assert not _storages(copying.plan.dense) <= _storages(copying.decode_weights)


def test_a_quantized_runner_keeps_its_embedding_in_bf16() -> None:
    """Half the default model's largest tensor (108 -> 54 MiB; issue 14); embed stays fp32."""
    model = tiny()
    runner, exact = FastRunner(model, "int4"), FastRunner(model, "fp32")
    assert runner._embed_weight.dtype == torch.bfloat16
    tokens = torch.tensor([[3, 17, 40]])
    embedded = runner.embed(tokens)
    assert embedded.dtype == torch.float32
    torch.testing.assert_close(embedded, exact.embed(tokens), atol=0, rtol=2.0**-8)


@pytest.mark.parametrize("precision", ["int4"])
def test_the_dequantized_prefill_matches_the_quantized_kernels(precision: str) -> None:
    """Prefilling through the de-quantized layers computes what the decode kernels would on
    every row (the same weights; only the matmul's rounding differs), in chunks too: closer
    than the bf16 copy of the original weights comes (measured 0.002 against 0.025).
    int8 is checked at the layer (test_fast_runner_quant.py): its kernel scales after the
    matmul, so its rounding differs as much as the copy's."""
    model = tiny()
    dequantizing, kernels = FastRunner(model, precision), FastRunner(model, precision)
    kernels.plan.dense = kernels.decode_weights
    dequantizing.prefill_chunk = kernels.prefill_chunk = 40  # two forwards, the second masked
    dequantizing.plan.decode_tokens = 4  # and both through the de-quantized layers
    tokens = ids(70)
    torch.testing.assert_close(
        dequantizing.prefill(tokens), kernels.prefill(tokens), atol=0.015, rtol=0
    )


class CountingBlocks(DequantizedBlocks):
    """De-quantized blocks that count the blocks read."""

    def __init__(self, blocks: Any) -> None:
        super().__init__(blocks)
        self.reads = 0

    def __getitem__(self, index: Any) -> Any:
        self.reads += 1
        return super().__getitem__(index)


def test_a_short_prefill_skips_the_de_quantization() -> None:
    """De-quantizing the layers costs the same for 5 tokens as for 190 (about 140 ms with the
    default model), so prefills up to ``plan.decode_tokens`` (a typed word, a warm-up chunk) run on
    the int4 kernels, longer ones on the de-quantized layers."""
    runner = FastRunner(tiny(), "int4")
    assert isinstance(runner.plan.dense.blocks, DequantizedBlocks)
    assert runner.plan.decode_tokens >= WARM_CHUNK
    blocks = CountingBlocks(runner.decode_weights.blocks)
    runner.plan.dense = dataclasses.replace(runner.plan.dense, blocks=blocks)
    runner.prefill(ids(20))
    assert blocks.reads == 0
    runner.rewind(0)
    runner.plan.decode_tokens = 10
    runner.prefill(ids(20))
    assert blocks.reads == runner.layers


class ThreadNoting(DequantizedBlocks):
    """De-quantized blocks that note the thread each block is read on."""

    def __init__(self, blocks: Any) -> None:
        super().__init__(blocks)
        self.threads: list[str] = []

    def __getitem__(self, index: Any) -> Any:
        self.threads.append(threading.current_thread().name)
        return super().__getitem__(index)


def _weights(block: Any) -> list[torch.Tensor]:
    return [block.qkv.weight, block.out.weight, block.gate_up.weight, block.down.weight]


def test_with_a_core_spare_the_next_block_is_de_quantized_while_the_forward_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The forward reads the same blocks in order; each is de-quantized on the other thread,
    ahead. With no core spare (torch's threads take them all) the forward's thread does it."""
    runner = FastRunner(tiny(), "int4")
    blocks = ThreadNoting(runner.decode_weights.blocks)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    monkeypatch.setattr(prefill, "usable_cores", lambda: 2)
    ahead = list(blocks)
    assert len(ahead) == runner.layers >= 2
    assert all(name.startswith("dequantize") for name in blocks.threads)
    for got, wanted in zip(ahead, (blocks[i] for i in range(len(blocks))), strict=True):
        assert all(map(torch.equal, _weights(got), _weights(wanted)))
    blocks.threads.clear()
    monkeypatch.setattr(prefill, "usable_cores", lambda: 1)
    assert len(list(blocks)) == runner.layers
    assert blocks.threads == [threading.current_thread().name] * runner.layers


def test_only_a_short_forward_has_a_layer_de_quantized_ahead() -> None:
    """The layer held ahead adds to the peak memory, which a long prefill's activations
    already bring to the target: a first window's forward gets it, a warm-up's long chunk
    does not."""
    plan = FastRunner(tiny(), "int4").plan
    short, long = plan.weights(prefill.AHEAD_TOKENS), plan.weights(prefill.AHEAD_TOKENS + 1)
    assert isinstance(short.blocks, DequantizedBlocks) and short.blocks.ahead
    assert isinstance(long.blocks, DequantizedBlocks) and not long.blocks.ahead
    assert long.blocks.blocks is short.blocks.blocks


def test_a_forward_that_stops_early_leaves_no_block_under_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner = FastRunner(tiny(), "int4")
    blocks = ThreadNoting(runner.decode_weights.blocks)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    monkeypatch.setattr(prefill, "usable_cores", lambda: 2)
    walk = iter(blocks)
    next(walk)
    walk.close()  # an exception in the forward, a cancelled prefill
    assert len(list(blocks)) == runner.layers  # the thread is free for the next forward


def test_engine_load_passes_prefill_copy_to_the_runner(tmp_path: Path) -> None:
    directory = saved(tiny(), tmp_path)
    copying = Engine.load(directory, "cpu", "float32", precision="int4", prefill_copy=True)
    default = Engine.load(directory, "cpu", "float32", precision="int4")
    assert isinstance(copying.runner, FastRunner) and isinstance(default.runner, FastRunner)
    assert copying.runner.plan.dense is not copying.runner.decode_weights
    assert not isinstance(copying.runner.plan.dense.blocks, DequantizedBlocks)
    assert isinstance(default.runner.plan.dense.blocks, DequantizedBlocks)
