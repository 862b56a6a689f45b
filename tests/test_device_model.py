"""The default model by device (lsp_server/device_model.py), driven by fake measurements."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from lsp_server import device_model
from lsp_server.device_model import RequestTimes, cuda_default, device_default_model, read_times
from lsp_server.settings import parse_settings
from superposed.embedded import DEFAULT_MODEL, GEMMA3


def results(tmp_path: Path, gemma_cuda: float, smollm2_cpu: float) -> Path:
    """A gpu-models.json as bench/gpu.py writes it."""
    path = tmp_path / "gpu-models.json"
    p50 = {GEMMA3.name: {"cuda": gemma_cuda}, DEFAULT_MODEL: {"cpu": smollm2_cpu, "cuda": 9.0}}
    path.write_text(json.dumps({"request_p50_ms": p50}))
    return path


def test_gemma_on_cuda_only_when_measured_faster_than_the_cpu_default() -> None:
    assert cuda_default(RequestTimes(gemma_cuda_ms=40.0, cpu_default_ms=300.0)) == GEMMA3.name
    assert cuda_default(RequestTimes(gemma_cuda_ms=300.0, cpu_default_ms=300.0)) == DEFAULT_MODEL
    assert cuda_default(RequestTimes(gemma_cuda_ms=450.0, cpu_default_ms=300.0)) == DEFAULT_MODEL
    assert cuda_default(None) == DEFAULT_MODEL


@pytest.fixture()
def on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_model, "_on_cuda", lambda device: device != "cpu")


def test_the_device_results_file_decides_on_cuda(tmp_path: Path, on_cuda: None) -> None:
    assert device_default_model("cuda", results(tmp_path, 40.0, 300.0)) == GEMMA3.name
    assert device_default_model("auto", results(tmp_path, 400.0, 300.0)) == DEFAULT_MODEL
    assert device_default_model("cuda", tmp_path / "none.json") == DEFAULT_MODEL


def test_a_cpu_keeps_smollm2_whatever_the_file_says(tmp_path: Path, on_cuda: None) -> None:
    assert device_default_model("cpu", results(tmp_path, 40.0, 300.0)) == DEFAULT_MODEL


def test_without_gemma_installed_the_default_stays(
    tmp_path: Path, on_cuda: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(device_model.importlib.util, "find_spec", lambda name: None)
    assert device_default_model("cuda", results(tmp_path, 40.0, 300.0)) == DEFAULT_MODEL


def test_a_malformed_file_is_ignored_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "gpu-models.json"
    path.write_text('{"request_p50_ms": {"gemma-3-270m": {}}}')
    with caplog.at_level(logging.WARNING):
        assert read_times(path) is None
    assert "ignoring the device measurements" in caplog.text


def test_settings_follow_the_device_only_for_an_unset_model(
    tmp_path: Path, on_cuda: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(device_model.GPU_MODELS_ENV, str(results(tmp_path, 40.0, 300.0)))
    assert parse_settings({})[0].model.model == GEMMA3.name
    assert parse_settings({"model": None})[0].model.model == GEMMA3.name
    assert parse_settings({"model": DEFAULT_MODEL})[0].model.model == DEFAULT_MODEL
    assert parse_settings({"device": "cpu"})[0].model.model == DEFAULT_MODEL


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the device results decide")
def test_on_a_cpu_the_default_is_unchanged() -> None:
    assert parse_settings({})[0].model.model == DEFAULT_MODEL


def test_a_dry_run_s_file_decides_nothing(tmp_path: Path, on_cuda: None) -> None:
    """bench.gpu --device cpu writes the same file from tiny models on a CPU."""
    path = results(tmp_path, 40.0, 300.0)
    path.write_text(json.dumps({**json.loads(path.read_text()), "dry_run": True}))
    assert device_default_model("cuda", path) == DEFAULT_MODEL
