"""The user's own model loaded: each architecture the fast runner implements runs on it, with
greedy and superposed drafts equal to the transformers runner's on the same weights; any
other runs on the transformers runner with one notice; the size is said before the weights
are read, and a model that cannot fit is refused; a model that cannot be used leaves the
server on the default model, saying why."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lsp_server import models
from lsp_server.settings import ModelSettings
from superposed import fits
from superposed.api import Engine
from superposed.fast_gemma import GemmaRunner
from superposed.fast_runner import FastRunner
from superposed.fits import ModelTooBig
from superposed.runner import HFRunner
from superposed.types import DecodeConfig
from tests.gguf_harness import convert_here, write_tiny

FAST = {"qwen2": FastRunner, "llama": FastRunner, "gemma3": GemmaRunner}
TEXTS = ("def main():\n    return read_", "class Store:\n    def get(self, key")


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The tiny GGUF files, converted into a cache of the module's own."""
    root = tmp_path_factory.mktemp("own")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SUPERPOSED_CACHE_DIR", str(root / "cache"))
        paths = {arch: str(write_tiny(root, arch)) for arch in (*FAST, "qwen3")}
        for path in paths.values():
            convert_here(path)
    return paths | {"cache": str(root / "cache")}


@pytest.fixture()
def cache(converted: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPERPOSED_CACHE_DIR", converted["cache"])


@pytest.mark.usefixtures("cache", "one_thread")
@pytest.mark.parametrize("arch", FAST)
def test_each_architecture_runs_fast_with_the_reference_drafts(
    converted: dict[str, str], arch: str
) -> None:
    fast = Engine.load(converted[arch], "cpu", "float32", precision="fp32")
    reference = Engine.load(converted[arch], "cpu", "float32", runner="hf")
    assert type(fast.runner) is FAST[arch] and isinstance(reference.runner, HFRunner)
    assert fast.notices == [] and fast.name == converted[arch]
    cfg = DecodeConfig(k=3, max_new_tokens=8, seed=0)
    for method in ("greedy", "superposed"):
        for text in TEXTS:
            want = reference.complete(text, method, cfg).drafts
            got = fast.complete(text, method, cfg).drafts
            assert [d.token_ids for d in got] == [d.token_ids for d in want], (method, text)


@pytest.mark.usefixtures("cache", "one_thread")
def test_a_fim_model_prompts_prefix_suffix_middle_on_either_runner(
    converted: dict[str, str],
) -> None:
    """The Qwen2 file's tokenizer has FIM markers: its prompt is PSM, and both runners draft
    the same middle from it; the Llama file's has none: left to right."""
    fast = Engine.load(converted["qwen2"], "cpu", "float32", precision="fp32")
    reference = Engine.load(converted["qwen2"], "cpu", "float32", runner="hf")
    markers = fast.fim_tokens
    assert markers is not None
    prompt = fast.prompt("def main():\n    return ", 8, fim=markers, after="\n\nmain()\n")
    assert prompt.ids[0] == markers.prefix and prompt.ids[-1] == markers.middle
    assert markers.suffix in prompt.ids
    cfg = DecodeConfig(k=3, max_new_tokens=8, seed=0)
    got = fast.complete(prompt, "greedy", cfg).drafts
    want = reference.complete(prompt, "greedy", cfg).drafts
    assert [d.token_ids for d in got] == [d.token_ids for d in want]
    assert Engine.load(converted["llama"], "cpu", "float32").fim_tokens is None


@pytest.mark.usefixtures("cache", "one_thread")
def test_an_architecture_only_transformers_runs_gets_one_notice(converted: dict[str, str]) -> None:
    engine = Engine.load(converted["qwen3"], "cpu", "float32")
    assert isinstance(engine.runner, HFRunner)
    (notice,) = engine.notices
    assert "transformers runner, slower" in notice and "qwen3" in notice
    assert engine.complete("def main():\n    return", "greedy").drafts


@pytest.mark.usefixtures("cache", "one_thread")
def test_the_size_is_said_first_and_a_model_that_cannot_fit_is_refused(
    converted: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    engine = Engine.load(converted["qwen2"], "cpu", "float32", progress=lambda m, p: said.append(m))
    assert any("parameters, about" in m and "free" in m for m in said), said
    reads: list[torch.Tensor] = []
    monkeypatch.setattr(fits, "free_bytes", lambda device: 1000)
    monkeypatch.setattr(FastRunner, "__init__", lambda *a, **k: reads.append(a[1]))
    with pytest.raises(ModelTooBig) as caught:
        Engine.load(converted["qwen2"], "cpu", "float32", precision="int4")
    assert "does not fit" in str(caught.value) and "1 kB free" in str(caught.value)
    assert "in int4" in str(caught.value) and reads == []  # refused before any weight was read
    assert isinstance(engine.runner, FastRunner)


def test_the_estimate_follows_the_precision(converted: dict[str, str], cache: None) -> None:
    """int4 keeps about a sixth of fp32's bytes of the layers; the embedding stays bf16."""
    from superposed.model import load_model

    skeleton = load_model(converted["llama"], "cpu", "float32", skeleton=True).model
    sizes = {p: fits.resident_bytes(skeleton, "fast", p, torch.float32)[0] for p in fits.BYTES}
    parameters = sum(p.numel() for p in skeleton.parameters())
    assert sizes["fp32"] == 4 * parameters and sizes["bf16"] == 2 * parameters
    assert sizes["int4"] < sizes["int8"] < sizes["bf16"]
    hf, how = fits.resident_bytes(skeleton, "hf", "int4", torch.float32)
    assert hf == 4 * parameters and how == "in float32"


def test_a_model_that_cannot_be_used_leaves_the_server_on_the_default(
    converted: dict[str, str], cache: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's loader: a GGUF file that is not there (or is damaged, or too big) loads
    the default model instead, the reason the first notice; other names fail as before."""
    monkeypatch.setattr(models, "device_default_model", lambda device: converted["llama"])
    missing = str(tmp_path / "qwen2.5-coder-1.5b.gguf")
    engine = models.load_engine(ModelSettings(model=missing, device="cpu", compile="off"))
    assert engine.name == converted["llama"]
    assert engine.notices[0].startswith(f"model {missing!r}: there is no such file")
    assert engine.notices[0].endswith(f"The default model {converted['llama']} runs instead.")
    with pytest.raises(Exception, match="cannot load model"):
        models.load_engine(ModelSettings(model=str(tmp_path / "no-folder"), device="cpu"))
