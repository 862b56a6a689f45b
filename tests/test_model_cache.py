"""The model cache is a hint (superposed/model_cache.py, issue 51): a converted model folder
damaged on disk is logged, removed and converted again, never obeyed (a truncated
model.safetensors raised SafetensorError at every start and the server stayed "loading")."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from superposed import model as model_module
from superposed import model_cache
from superposed.embedded import SMOLLM2
from tests.runner_harness import tiny
from tests.test_fast_runner import saved


def _truncate(name: str, keep: float) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        path = folder / name
        path.write_bytes(path.read_bytes()[: int(path.stat().st_size * keep)])

    return damage


def _write(name: str, text: str) -> Callable[[Path], None]:
    return lambda folder: (folder / name).write_text(text)


def _remove(name: str) -> Callable[[Path], None]:
    return lambda folder: (folder / name).unlink()


DAMAGES = [
    pytest.param(_truncate("model.safetensors", 0.5), id="weights-truncated"),
    pytest.param(_truncate("model.safetensors", 0.0), id="weights-empty"),
    pytest.param(_truncate("model.safetensors", 0.00001), id="weights-header-cut"),
    pytest.param(_remove("model.safetensors"), id="weights-missing"),
    pytest.param(_write("model.safetensors.index.json", "{"), id="index-invalid-json"),
    pytest.param(_write("model.safetensors.index.json", "{}"), id="index-no-weight-map"),
    pytest.param(_write("config.json", '{"model_type": "llama",'), id="config-invalid-json"),
    pytest.param(_write("config.json", "[]"), id="config-not-an-object"),
    pytest.param(_write("config.json", '{"model_type": 7}'), id="config-model-type"),
    pytest.param(_truncate("tokenizer.json", 0.5), id="tokenizer-truncated"),
    pytest.param(_remove("tokenizer.json"), id="tokenizer-missing"),
    pytest.param(_write("tokenizer_config.json", "{"), id="tokenizer-config-invalid-json"),
]


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A converted model folder as the cache holds one: a tiny Llama and its tokenizer."""
    folder = tmp_path_factory.mktemp("good") / "model"
    saved(tiny(), folder)
    assert model_cache.problem(folder) is None
    return folder


@pytest.fixture()
def converting(
    good: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, list[list[str]]]:
    """The default model's folder in a cache of its own, and the conversions run: the child
    process's command recorded, the tiny model copied in its place (seconds, not a minute)."""
    monkeypatch.setenv("SUPERPOSED_CACHE_DIR", str(tmp_path / "cache"))
    target = tmp_path / "cache" / "models" / SMOLLM2.folder
    runs: list[list[str]] = []

    def convert(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        runs.append(command)
        shutil.copytree(good, command[-1])
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(model_module.subprocess, "run", convert)
    return target, runs


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_model_cache_is_logged_removed_and_converted_again(
    damage: Callable[[Path], None],
    good: Path,
    converting: tuple[Path, list[list[str]]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    target, runs = converting
    shutil.copytree(good, target)
    damage(target)
    with caplog.at_level("WARNING", logger=model_cache.__name__):
        assert model_module.embedded_model_dir(SMOLLM2) == target
    assert len(runs) == 1 and runs[0][-1] == str(target)  # converted again
    assert model_cache.problem(target) is None
    (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert str(target) in warning and "converting the model again" in warning
    assert not list(target.parent.glob(".damaged-*"))  # nothing left aside
    loaded = model_module.load_model(SMOLLM2.name, "cpu", "float32", skeleton=True)
    assert loaded.checkpoint is not None  # the weights read again


@pytest.mark.parametrize("damage", DAMAGES)
def test_the_stores_tokenizer_converts_a_damaged_cache_again(
    damage: Callable[[Path], None], good: Path, converting: tuple[Path, list[list[str]]]
) -> None:
    """The stores' tokenizer reads the cache's tokenizer.json alone (no model, no torch):
    a damaged one raised from the tokenizers library (index-repo failed with a trace)."""
    from superposed.tokenizer import load_tokenizer

    target, runs = converting
    shutil.copytree(good, target)
    damage(target)
    assert load_tokenizer(SMOLLM2.name).encode("def f():").ids
    assert len(runs) == 1 and model_cache.problem(target) is None


def test_a_sound_model_cache_is_used_as_it_is(
    good: Path, converting: tuple[Path, list[list[str]]]
) -> None:
    target, runs = converting
    shutil.copytree(good, target)
    assert model_module.embedded_model_dir(SMOLLM2) == target and runs == []


def test_a_sharded_folder_is_checked_shard_by_shard(good: Path, tmp_path: Path) -> None:
    folder = tmp_path / "sharded"
    saved(tiny(), folder, max_shard_size="200KB")
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 1 and model_cache.problem(folder) is None
    _truncate(shards[-1], 0.5)(folder)
    assert "SafetensorError" in (model_cache.problem(folder) or "")


@pytest.mark.slow  # two conversions of a tiny GGUF in child processes, as the server runs them
def test_a_damaged_conversion_of_the_users_gguf_is_converted_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from superposed.gguf_convert import converted_dir
    from superposed.own_model import gguf_model
    from tests.gguf_harness import write_tiny

    monkeypatch.setenv("SUPERPOSED_CACHE_DIR", str(tmp_path / "cache"))
    model = gguf_model(str(write_tiny(tmp_path, "llama")))
    assert model is not None
    first = converted_dir(model)
    (weights, *_) = sorted(model_cache._weight_files(first))  # its converter writes shards
    _truncate(weights.name, 0.5)(first)
    assert converted_dir(model) == first and model_cache.problem(first) is None
