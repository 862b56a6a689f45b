"""bench.kernel_choices' pure parts: the AVX2 path's environment, agreement, the report."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
import torch

from bench import kernel_choices as kc
from bench.measure import RESULTS


def test_the_avx2_path_sets_what_is_missing_and_native_sets_nothing() -> None:
    assert kc.needs_env(False, {}) == kc.AVX2_ENV
    assert kc.needs_env(False, dict(kc.AVX2_ENV)) == {}
    partly = {"ATEN_CPU_CAPABILITY": "avx2", "FBGEMM_ENABLE_INSTRUCTIONS": "AVX512"}
    assert kc.needs_env(False, partly) == {
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2",
    }
    assert kc.needs_env(True, {}) == {}


def test_main_starts_again_with_the_avx2_variables_before_torch_measures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in kc.AVX2_ENV:
        monkeypatch.delenv(name, raising=False)
    seen: dict[str, Any] = {}

    class Started(Exception):
        pass

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        seen.update(path=path, argv=argv, env=env)
        raise Started

    monkeypatch.setattr(kc.os, "execve", execve)
    with pytest.raises(Started):
        kc.main(["--quick", "--modes", "head"])
    assert seen["path"] == sys.executable
    assert seen["argv"][1:] == ["-m", "bench.kernel_choices", "--quick", "--modes", "head"]
    assert all(seen["env"][k] == v for k, v in kc.AVX2_ENV.items())


def test_agreement_is_the_share_of_equal_tokens_over_all_sequences() -> None:
    assert kc.agreement([[1, 2, 3], [4, 5]], [[1, 2, 0], [4, 0]]) == 0.6
    with pytest.raises(ValueError, match="same lengths"):
        kc.agreement([[1, 2]], [[1]])
    with pytest.raises(ValueError, match="no tokens"):
        kc.agreement([], [])


def test_relative_error_and_medians_leave_out_the_warm_up() -> None:
    ref = torch.tensor([3.0, 4.0])
    assert kc.relative_error(torch.tensor([3.0, 4.5]), ref) == pytest.approx(0.1)
    assert kc.medians({"a": [100.0, 1.0, 2.0, 3.0], "b": [5.0]}) == {"a": 2.0, "b": 5.0}


@pytest.mark.parametrize("reduce_range", [False, True])
def test_dynamic_int8_is_the_matmul_within_its_quantization(reduce_range: bool) -> None:
    g = torch.Generator().manual_seed(0)
    w, bias = torch.randn(64, 128, generator=g), torch.randn(64, generator=g)
    x = torch.randn(2, 3, 128, generator=g)  # [B, T, K]
    out = kc.DynamicInt8Linear(w, bias, reduce_range)(x)
    assert out.shape == (2, 3, 64) and out.dtype == torch.float32
    assert kc.relative_error(out, x @ w.t() + bias) < 0.03


def results(**modes: Any) -> dict[str, Any]:
    stamp: dict[str, Any] = {"command": "python -m bench.kernel_choices", "date": "d"}
    stamp |= {"commit": "c"}
    stamp |= {"machine": "m", "load_start": [1], "load_end": [2]}
    base = {"stamp": stamp, "path": "native", "cpu_capability": "AVX512", "rounds": 3}
    return base | {"note": "noisy."} | modes


def test_the_report_has_a_table_for_each_mode_measured_and_none_for_the_others() -> None:
    errors = dict.fromkeys(kc.MATRICES, 0.25)
    text = kc.markdown(
        results(
            matmuls={"int4": {"ms": 7.5, "error": errors}},
            prefill={"dense": {"ms": 700.0, "agreement": 1.0}},
            threads={
                "ms": {"step matmuls, int4": {"1": 7.0, "2": 14.0, "2 / 1": 2.0}},
                "calibration": {"precision": "int4", "threads": 1, "prefill_threads": 1}
                | {"counts": [1, 2]},
            },
        )
    )
    assert "| int4 | 7.5 | 0.25 | 0.25 | 0.25 | 0.25 |" in text
    assert "| dense | 700.0 | 1.0 |" in text
    assert "| step matmuls, int4 | 7.0 | 14.0 | 2.0 |" in text
    assert "int4 on 1 thread(s) for steps, 1 for prefills, counts tried [1, 2]" in text
    assert "native path (torch CPU capability AVX512)" in text
    assert "agreement with the reference" not in text and "output head" not in text


def test_the_committed_markdown_renders_from_its_results() -> None:
    saved = json.loads((RESULTS / "kernel_choices.json").read_text())
    assert kc.markdown(saved) == (RESULTS / "kernel_choices.md").read_text()
