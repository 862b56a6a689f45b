"""The kernel and thread calibration (calibrate.py) and the KV cache's dtype (quant.kv_dtype),
driven by fake core counts and fake timings."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from superposed import calibrate, quant
from superposed.api import Engine
from superposed.calibrate import Calibration, choose, measure, thread_counts
from superposed.fast_runner import FastRunner
from tests.runner_harness import ids, tiny
from tests.test_fast_runner import saved


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

    def prefill(shapes: list[tuple[int, int]], threads: int) -> float:
        seen.append(("prefill", threads))
        return 50.0 / threads

    result = measure([(64, 32)], [1, 2, 3], timer, prefill)
    one_round = [*calibrate.CANDIDATES, "prefill"]
    every = [(p, t) for t in (1, 2, 3) for _ in range(calibrate.ROUNDS) for p in one_round]
    assert seen == every  # interleaved, round after round, at each count
    assert (result.precision, result.threads, result.prefill_threads) == ("int8", 3, 3)
    assert result.ms["int4@1"] == 8.0 and result.prefill_ms["2"] == 25.0


def fake_cpu(
    cores: int, decode_best: int, prefill_best: int
) -> tuple[Callable[..., float], Callable[..., float], list[int]]:
    """Timers of a CPU with ``cores`` cores whose decode step stops gaining from
    ``decode_best`` threads on and its prefill from ``prefill_best``, and the counts tried."""
    tried: list[int] = []

    def timer(shapes: list[tuple[int, int]], precision: str, threads: int) -> float:
        tried.append(threads)
        return {"int4": 20.0, "int8": 30.0}[precision] / min(threads, decode_best)

    def prefill(shapes: list[tuple[int, int]], threads: int) -> float:
        return 400.0 / min(threads, prefill_best)

    return timer, prefill, tried


@pytest.mark.parametrize(
    ("cores", "decode_best", "prefill_best", "expected"),
    [
        (2, 1, 1, (1, 1)),  # a shared 2-core machine: a second thread gains nothing
        (8, 2, 6, (2, 6)),  # a laptop: the step bound by memory at 2, the prefill by cores
        (16, 4, 16, (4, 8)),  # never past MAX_THREADS
        (4, 4, 2, (4, 2)),  # the decode may want more threads than the prefill
    ],
)
def test_the_thread_policy_takes_each_phase_s_fewest_threads_near_its_best(
    cores: int, decode_best: int, prefill_best: int, expected: tuple[int, int]
) -> None:
    timer, prefill, tried = fake_cpu(cores, decode_best, prefill_best)
    result = measure([(64, 32)], thread_counts(cores), timer, prefill)
    assert (result.threads, result.prefill_threads) == expected
    assert result.precision == "int4"
    # the climb stops one count past the last that gained, for either phase
    assert max(tried) == min(max(expected) + 1, cores, calibrate.MAX_THREADS)


def test_the_climb_stops_at_the_budget() -> None:
    timer, prefill, tried = fake_cpu(8, 8, 8)  # every thread would gain
    ticks = iter(range(100))  # one second a reading

    def clock() -> float:
        return float(next(ticks))

    result = measure([(64, 32)], thread_counts(8), timer, prefill, clock)
    assert max(tried) == 3  # read at 0, then 1, 2, 3 s: past BUDGET_S = 2 after 3 threads
    assert (result.threads, result.prefill_threads) == (3, 3)


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


GOOD = {"precision": "int8", "threads": 2, "ms": {"int8@1": 1.0}}
DAMAGES = [
    pytest.param('{"precision": "int8", "threads"', id="invalid-json"),
    pytest.param("[1, 2]", id="not-an-object"),
    pytest.param({**GOOD, "threads": 2.5}, id="threads-fraction"),
    pytest.param({**GOOD, "threads": "2"}, id="threads-string"),
    pytest.param({**GOOD, "threads": True}, id="threads-bool"),
    pytest.param({**GOOD, "threads": 0}, id="threads-zero"),
    pytest.param({**GOOD, "threads": 100000}, id="threads-huge"),  # SIGSEGV in libgomp
    pytest.param({**GOOD, "threads": None}, id="threads-null"),
    pytest.param({k: v for k, v in GOOD.items() if k != "threads"}, id="threads-missing"),
    pytest.param({**GOOD, "precision": "int3"}, id="precision-unknown"),
    pytest.param({**GOOD, "precision": 4}, id="precision-number"),
    pytest.param({k: v for k, v in GOOD.items() if k != "precision"}, id="precision-missing"),
    pytest.param({**GOOD, "ms": [1.0]}, id="ms-list"),
    pytest.param({**GOOD, "ms": {"int8@1": "fast"}}, id="ms-string"),
    pytest.param({k: v for k, v in GOOD.items() if k != "ms"}, id="ms-missing"),
    pytest.param({**GOOD, "prefill_threads": 1.5}, id="prefill-threads-fraction"),
    pytest.param({**GOOD, "prefill_threads": 100000}, id="prefill-threads-huge"),
    pytest.param({**GOOD, "prefill_ms": {"1": -1.0}}, id="prefill-ms-negative"),
    pytest.param({**GOOD, "prefill_ms": "1"}, id="prefill-ms-string"),
    pytest.param({**GOOD, "turbo": True}, id="unknown-field"),
]


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_calibration_is_ignored_logged_and_measured_again(
    damage: object,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The calibration file is a hint: a value of the wrong type or out of range (issue 51:
    "threads": 2.5 raised in set_num_threads, 100000 crashed libgomp, an unknown precision
    kept the model from loading) is measured again and the file rewritten."""
    config = tiny().config.to_json_string()
    calls: list[int] = []

    def fake(shapes: list[tuple[int, int]], counts: list[int]) -> Calibration:
        calls.append(1)
        return Calibration(**GOOD)

    monkeypatch.setattr(calibrate, "measure", fake)
    monkeypatch.setattr(calibrate, "thread_counts", lambda: [1, 2])
    calibrate.calibrated.__wrapped__(config, tmp_path)
    (saved,) = (tmp_path / "calibration").glob("*.json")
    saved.write_text(damage if isinstance(damage, str) else json.dumps(damage))
    with caplog.at_level("WARNING", logger=calibrate.__name__):
        assert calibrate.calibrated.__wrapped__(config, tmp_path) == Calibration(**GOOD)
    assert calls == [1, 1]
    (warning,) = [r for r in caplog.records if r.levelname == "WARNING"]
    assert str(saved) in warning.getMessage() and "measuring again" in warning.getMessage()
    assert json.loads(saved.read_text()) == json.loads(json.dumps(asdict(Calibration(**GOOD))))
    assert calibrate.calibrated.__wrapped__(config, tmp_path) == Calibration(**GOOD)
    assert calls == [1, 1]  # the rewritten file is read


def test_a_valid_calibration_reads_back_as_written() -> None:
    full = {**GOOD, "prefill_threads": 2, "prefill_ms": {"1": 3.0, "2": 2}}
    assert calibrate.read_calibration(json.dumps(full), 2) == (Calibration(**full), "")
    assert calibrate.read_calibration(json.dumps(GOOD), 1)[0] is None  # 2 threads, 1 core


def test_a_real_measurement_of_tiny_shapes_gives_a_candidate() -> None:
    result = measure([(64, 64), (128, 64)], [1])
    assert result.precision in calibrate.CANDIDATES and result.threads == 1
    assert set(result.ms) == {f"{p}@1" for p in calibrate.CANDIDATES}
    assert result.prefill_threads == 1 and result.prefill_ms["1"] > 0


def test_a_calibration_saved_before_the_prefill_policy_still_reads() -> None:
    old = {"precision": "int4", "threads": 2, "ms": {"int4@1": 9.0}}
    assert Calibration(**old).prefill_threads == 1


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


def test_a_long_prefill_runs_on_the_prefill_threads_and_steps_on_the_callers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner = FastRunner(tiny(), "int4")
    runner.plan.threads = 3
    seen: list[tuple[int, int]] = []  # (new tokens, torch's threads) of each forward
    forward = runner._forward

    def recording(x: torch.Tensor, start: int, every: bool = False) -> torch.Tensor:
        seen.append((x.shape[1], torch.get_num_threads()))
        return forward(x, start, every)

    monkeypatch.setattr(runner, "_forward", recording)
    before = torch.get_num_threads()
    long = runner.plan.decode_tokens + 20
    runner.prefill(ids(long))
    runner.prefill(ids(2))  # a typed word: on the decode weights, the caller's threads
    runner.step(runner.embed(torch.tensor([[5]])))
    assert seen == [(long, 3), (2, before), (1, before)]
    assert torch.get_num_threads() == before


def test_threads_0_loads_an_engine_with_both_calibrated_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from superposed import api

    monkeypatch.setattr(api, "calibrated", lambda _: Calibration("int4", 2, {}, 3, {}))
    before = torch.get_num_threads()
    try:
        engine = Engine.load(saved(tiny(), tmp_path), "cpu", "float32", threads=0, precision="int4")
        assert torch.get_num_threads() == 2
        assert isinstance(engine.runner, FastRunner) and engine.runner.plan.threads == 3
        forced = Engine.load(saved(tiny(), tmp_path), "cpu", "float32", threads=1)
        assert isinstance(forced.runner, FastRunner) and forced.runner.plan.threads is None
        assert torch.get_num_threads() == 1  # a ``threads`` setting forces both phases
    finally:
        torch.set_num_threads(before)
