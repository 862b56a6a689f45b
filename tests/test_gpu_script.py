"""The device script (bench/gpu.py): its dry run on the CPU takes the steps the device run
takes, with tiny models, and writes results of the device run's shape."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bench import gpu, gpu_carry
from lsp_server.device_model import read_times
from superposed.embedded import DEFAULT_MODEL, EMBEDDED, GEMMA3

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_dry_run_measures_both_models_and_decides(tmp_path: Path) -> None:
    assert gpu.main(["run", "--device", "cpu", "--out", str(tmp_path), "--steps"]) == 0
    record = json.loads((tmp_path / "gpu.json").read_text())
    assert record["meta"]["device"] == "cpu" and record["meta"]["steps"] == []
    for step in ("shapes", *(f"targets {name}" for name in EMBEDDED), "decide"):
        assert record[step]["status"] == "ok", record[step]
    for name in EMBEDDED:
        measured = record[f"targets {name}"]["result"]
        assert measured["prompt_tokens"] >= gpu.PROMPT_TOKENS
        for variant in ("bf16", "bf16-graphs"):
            part = measured[variant]
            assert all(part[k] > 0 for k in ("step 1 row ms", "step 3 rows ms", "verify batch ms"))
            for method in ("superposed", "greedy"):
                request = part[f"{method} request"]
                assert 0 < request["steps_p50_ms"] < request["p50_ms"]
            assert part["superposed / greedy"] > 0
    assert "cpu default (int4, 1 thread)" in record[f"targets {DEFAULT_MODEL}"]["result"]
    decided = json.loads((tmp_path / "gpu-models.json").read_text())
    assert decided == record["decide"]["result"]
    assert decided["request_p50_ms"][GEMMA3.name]["cuda"] > 0
    assert decided["request_p50_ms"][DEFAULT_MODEL]["cpu"] > 0
    assert decided["default_on_cuda"] in EMBEDDED
    assert decided["dry_run"] and read_times(tmp_path / "gpu-models.json") is None
    assert not (tmp_path / "models").exists()  # the random weights are not results


def test_the_tests_step_keeps_the_output_and_the_counts(tmp_path: Path) -> None:
    summary = [sys.executable, "-c", "print('.s.'); print('5 passed, 2 skipped in 1.0s')"]
    out = tmp_path / "out"  # the first step: run() has not made the directory yet
    done = gpu.run_tests(summary, out, timeout_s=60)
    assert done["exit"] == 0 and done["counts"] == {"passed": 5, "skipped": 2}
    assert "5 passed" in (out / "tests.txt").read_text()
    hangs = [sys.executable, "-c", "import time; time.sleep(30)"]
    stopped = gpu.run_tests(hangs, tmp_path, timeout_s=0.3)
    assert stopped["exit"] == -1 and stopped["counts"] == {}
    assert "timed out after 0.3 s" in (tmp_path / "tests.txt").read_text()


def test_red_tests_fail_the_run_though_their_step_ran() -> None:
    record = {
        "meta": {"device": "NVIDIA H200"},
        "tests": {"status": "ok", "result": {"exit": 1, "counts": {"failed": 12}}},
        "shapes": {"status": "failed", "error": "ModuleNotFoundError: truststore"},
        "decide": {"status": "ok", "result": {"default_on_cuda": DEFAULT_MODEL}},
        "lsp": {"status": "skipped", "why": "past the budget"},
    }
    assert gpu.failed_steps(record) == ["tests", "shapes"]


def test_the_carried_wheels_are_this_machines_versions_of_what_the_device_lacks() -> None:
    from importlib.metadata import version

    pins = dict(pin.split("==") for pin in gpu_carry.wheel_pins())
    assert pins["transformers"] == version("transformers")  # the image's 5.17 is too old
    for needed in ("pygls", "lsprotocol", "sqlite-utils", "pydivsufsort", "pytest-lsp"):
        assert pins[needed] == version(needed)  # the server and the tests import them
    assert "torch" not in pins  # the image's CUDA build, never this machine's CPU wheel
    # The grammars are whatever the installed pack requires: a fresh machine's pack no longer
    # pulled tree-sitter-python, which a hand-written list still named (CI failed on it).
    assert {"tree-sitter-yaml", "tree-sitter-language-pack"} <= pins.keys()


def test_a_failed_step_is_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    run = gpu.Run(tmp_path, budget_s=60)

    def fails() -> None:
        raise RuntimeError("no CUDA")

    assert run.step("first", fails) is None
    assert run.step("second", lambda: {"ms": 1.5}) == {"ms": 1.5}
    saved = json.loads((tmp_path / "gpu.json").read_text())
    assert saved["first"]["status"] == "failed" and "no CUDA" in saved["first"]["error"]
    assert saved["second"] == {"status": "ok", "result": {"ms": 1.5}, "seconds": 0.0}
    late = gpu.Run(tmp_path, budget_s=0)
    assert late.step("third", lambda: 1) is None and late.record["third"]["status"] == "skipped"


@pytest.mark.slow
def test_the_whole_dry_run_with_the_server_and_bench_latency(tmp_path: Path) -> None:
    """Every step, the language server over stdio and bench.latency included."""
    assert gpu.main(["run", "--device", "cpu", "--out", str(tmp_path)]) == 0
    record = json.loads((tmp_path / "gpu.json").read_text())
    assert record["tests"]["result"]["exit"] == 0  # the CUDA tests skip here
    assert record["tests"]["result"]["counts"]["skipped"] > 0
    fresh = record["lsp"]["result"]["fresh 1,000-token file"]
    assert fresh["n"] == gpu.DRY_SIZES.lsp_requests and fresh["p50_ms"] > 0
    for name in EMBEDDED:
        steps = record[f"latency {name}"]["result"]["steps"]
        assert set(steps) == {"fast-bf16", "fast-bf16-graphs"}
        assert (tmp_path / f"{record[f'latency {name}']['result']['out']}.md").is_file()
