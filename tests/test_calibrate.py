"""The kernel and thread calibration (calibrate.py) and the KV cache's dtype (quant.kv_dtype),
driven by fake core counts and fake timings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from superposed import calibrate, quant
from superposed.calibrate import Calibration, choose, measure, thread_counts
from tests.runner_harness import tiny


def test_thread_counts_are_bounded_by_the_cores_offered_and_eight() -> None:
    assert thread_counts(1) == [1]
    assert thread_counts(2) == [1, 2]
    assert thread_counts(16) == list(range(1, 9))
    assert thread_counts() == list(range(1, min(len(__import__("os").sched_getaffinity(0)), 8) + 1))


def test_the_default_stays_unless_another_choice_is_clearly_faster() -> None:
    # a 2-core machine others use: two threads barely faster, int8 a little slower
    busy = {("int4", 1): 10.0, ("int8", 1): 10.5, ("int4", 2): 9.5, ("int8", 2): 9.8}
    assert choose(busy) == ("int4", 1)
    # a quiet 8-core laptop: four threads halve the time, more add nothing
    laptop = {("int4", t): 10.0 / min(t, 4) for t in range(1, 9)}
    laptop |= {("int8", t): 12.0 / min(t, 4) for t in range(1, 9)}
    assert choose(laptop) == ("int4", 4)  # the fewest threads within the margin of the best
    # a CPU whose int8 kernels are much faster (say VNNI or AMX)
    amx = {("int4", 1): 10.0, ("int8", 1): 6.0, ("int4", 2): 9.0, ("int8", 2): 5.8}
    assert choose(amx) == ("int8", 1)
    # a tiny model: its timings are the calls' overhead, whatever they say
    tiny_shapes = {("int4", 1): 0.04, ("int8", 1): 0.02, ("int4", 2): 0.03, ("int8", 2): 0.02}
    assert choose(tiny_shapes) == ("int4", 1)


def test_measure_times_every_candidate_at_every_count_and_chooses() -> None:
    seen: list[tuple[str, int]] = []

    def timer(shapes: list[tuple[int, int]], precision: str, threads: int) -> float:
        seen.append((precision, threads))
        return {"int4": 8.0, "int8": 4.0}[precision] / threads

    result = measure([(64, 32)], [1, 2, 3], timer)
    every = [(p, t) for t in (1, 2, 3) for p in calibrate.CANDIDATES]
    assert seen == every * calibrate.ROUNDS  # interleaved, round after round
    assert (result.precision, result.threads) == ("int8", 3)
    assert result.ms["int4@1"] == 8.0


def test_a_calibration_is_measured_once_and_then_read_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tiny().config.to_json_string()
    calls: list[int] = []

    def fake(shapes: list[tuple[int, int]], counts: list[int]) -> Calibration:
        calls.append(1)
        return Calibration("int8", counts[-1], {"int8@1": 1.0})

    monkeypatch.setattr(calibrate, "measure", fake)
    monkeypatch.setattr(calibrate, "thread_counts", lambda: [1, 2])
    first = calibrate.calibrated.__wrapped__(config, tmp_path)
    assert first == Calibration("int8", 2, {"int8@1": 1.0})
    (saved,) = (tmp_path / "calibration").glob("*.json")
    assert json.loads(saved.read_text())["precision"] == "int8"
    assert calibrate.calibrated.__wrapped__(config, tmp_path) == first and calls == [1]
    saved.write_text("{not json")  # a damaged file: measured again, not an error
    assert calibrate.calibrated.__wrapped__(config, tmp_path) == first and calls == [1, 1]


def test_a_real_measurement_of_tiny_shapes_gives_a_candidate() -> None:
    result = measure([(64, 64), (128, 64)], [1])
    assert result.precision in calibrate.CANDIDATES and result.threads == 1
    assert set(result.ms) == {f"{p}@1" for p in calibrate.CANDIDATES}


def test_the_kv_cache_is_fp32_where_bf16_attention_is_slower(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Attention over a bf16 cache took 20.4 ms a step on this CPU against 3.0 in fp32."""
    cpu = torch.device("cpu")
    slow_bf16 = {torch.bfloat16: 7.0, torch.float32: 1.0}
    monkeypatch.setattr(quant, "attention_seconds", lambda dtype: slow_bf16[dtype])
    assert quant.kv_dtype("int4", cpu) == torch.float32
    fast_bf16 = {torch.bfloat16: 0.8, torch.float32: 1.0}  # AMX, say
    monkeypatch.setattr(quant, "attention_seconds", lambda dtype: fast_bf16[dtype])
    assert quant.kv_dtype("int4", cpu) == torch.bfloat16
    assert quant.kv_dtype("fp32", cpu) == torch.float32
    assert quant.kv_dtype("bf16", torch.device("meta")) == torch.bfloat16  # not a CPU
