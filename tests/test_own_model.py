"""The user's own model: a GGUF file by path or an Ollama model by name, found, keyed by its
content, converted (in this process here: the child process's path is the end-to-end
test's) into the same weights transformers' own GGUF load gives, and refused with one clear
message where it cannot be used."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
import torch

from bench.gguf_models import tiny, write_gguf
from ngram_db.tokenizer import as_tokenizer
from superposed import gguf_convert, own_model
from superposed.fim import FimTokens, fim_tokens
from superposed.gguf_convert import convert, gguf_tokenizer, open_gguf
from superposed.own_model import OwnModelError, content_key, gguf_model, is_own_model
from superposed.tokenizer import load_tokenizer
from superposed.vocab import byte_level
from tests.gguf_harness import ARCHITECTURES, convert_here, fake_ollama, truncated_copy, write_tiny


@pytest.fixture(scope="module")
def ggufs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("gguf")
    return {arch: write_tiny(folder, arch) for arch in ARCHITECTURES}


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SUPERPOSED_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


# --- which setting names which file -------------------------------------------------------


def test_the_setting_names_a_gguf_file_or_an_ollama_model(
    ggufs: dict[str, Path], tmp_path: Path
) -> None:
    path = ggufs["qwen2"]
    assert is_own_model(str(path)) and is_own_model("ollama:qwen2.5-coder:1.5b")
    assert not is_own_model("smollm2-135m") and not is_own_model(str(tmp_path))
    blob = tmp_path / "sha256-0123"  # no suffix: a GGUF all the same (an Ollama blob)
    blob.write_bytes(path.read_bytes())
    assert is_own_model(str(blob))
    found = gguf_model(str(path))
    assert found is not None and found.path == path.resolve() and found.name == str(path)
    assert gguf_model("smollm2-135m") is None and gguf_model(str(tmp_path)) is None


def test_a_missing_or_foreign_file_is_named_with_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(OwnModelError, match="no such file"):
        gguf_model(str(tmp_path / "gone.gguf"))
    text = tmp_path / "notes.gguf"
    text.write_text("not a model")
    with pytest.raises(OwnModelError, match="not a GGUF file"):
        gguf_model(str(text))


def test_an_ollama_name_resolves_through_its_manifest(
    ggufs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = tmp_path / "ollama"
    blob = fake_ollama(models, ggufs["qwen2"], "tiny-coder", "1b")
    fake_ollama(models, ggufs["llama"], "tiny-coder", "latest")
    monkeypatch.setenv("OLLAMA_MODELS", str(models))
    assert own_model.ollama_models_dir() == models
    found = gguf_model("ollama:tiny-coder:1b")
    assert found is not None and found.path == blob and found.name == "ollama:tiny-coder:1b"
    latest = gguf_model("ollama:tiny-coder")  # no tag: latest, as ollama pull takes it
    assert latest is not None and latest.path.read_bytes() == ggufs["llama"].read_bytes()
    someone = own_model.ollama_manifest("someone/tiny:2", models)
    assert someone == models / "manifests" / "registry.ollama.ai" / "someone" / "tiny" / "2"
    hosted = own_model.ollama_manifest("hf.co/org/repo:Q4_K_M", models)
    assert hosted == models / "manifests" / "hf.co" / "org" / "repo" / "Q4_K_M"


def test_an_ollama_model_not_pulled_names_the_pull(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path))
    with pytest.raises(OwnModelError) as caught:
        gguf_model("ollama:qwen2.5-coder:1.5b")
    assert "`ollama pull qwen2.5-coder:1.5b`" in str(caught.value)
    assert "OLLAMA_MODELS" in str(caught.value)
    with pytest.raises(OwnModelError, match="not an Ollama model name"):
        gguf_model("ollama:../../etc:passwd")


def test_an_ollama_manifest_without_its_blob_or_with_an_adapter_is_refused(
    ggufs: dict[str, Path], tmp_path: Path
) -> None:
    blob = fake_ollama(tmp_path, ggufs["qwen2"], "tiny-coder", "1b")
    blob.unlink()
    with pytest.raises(OwnModelError, match="is missing: run `ollama pull tiny-coder:1b`"):
        own_model.ollama_blob("tiny-coder:1b", tmp_path)
    manifest = tmp_path / "manifests" / "registry.ollama.ai" / "library" / "tiny-coder" / "1b"
    layers = json.loads(manifest.read_text())["layers"]
    adapter = {"mediaType": "application/vnd.ollama.image.adapter", "digest": "sha256:" + "1" * 64}
    manifest.write_text(json.dumps({"layers": [*layers, adapter]}))
    with pytest.raises(OwnModelError, match="LoRA adapter"):
        own_model.ollama_blob("tiny-coder:1b", tmp_path)
    manifest.write_text("{not json")
    with pytest.raises(OwnModelError, match="cannot be read"):
        own_model.ollama_blob("tiny-coder:1b", tmp_path)


# --- the content key ------------------------------------------------------------------------


def test_the_key_changes_with_the_file_and_reads_a_bounded_part_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.gguf"
    with open(path, "wb") as handle:
        handle.write(b"GGUF" + bytes(range(256)) * 64)
        handle.truncate(3 * 2**30)  # 3 GB, sparse
    key = content_key(path)
    assert content_key(path) == key
    read: list[int] = []

    class Counting(io.FileIO):
        def read(self, size: int = -1) -> bytes:
            data = super().read(size)
            read.append(len(data or b""))
            return data or b""

    monkeypatch.setattr(own_model, "open", lambda file, mode: Counting(file), raising=False)
    assert content_key(path) == key
    assert sum(read) <= own_model.HEADER_BYTES + own_model.SAMPLES * own_model.SAMPLE_BYTES
    monkeypatch.undo()
    with open(path, "r+b") as handle:  # the same size and the same header, a sample changed
        handle.seek(3 * 2**30 // 9)
        handle.write(b"changed")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns))
    changed = content_key(path)
    assert changed != key
    os.utime(path, ns=(0, 10**9))  # the same bytes, touched
    assert content_key(path) != changed


# --- damaged files, and architectures neither runner loads -------------------------------


def test_a_truncated_or_damaged_file_says_so(ggufs: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(OwnModelError, match="truncated") as caught:
        open_gguf(truncated_copy(ggufs["qwen2"], tmp_path / "cut.gguf"))
    assert "download it again" in str(caught.value)
    head = tmp_path / "head.gguf"
    head.write_bytes(ggufs["qwen2"].read_bytes()[:2000])  # cut inside the metadata
    with pytest.raises(OwnModelError, match="damaged or truncated"):
        open_gguf(head)


def test_an_architecture_neither_runner_loads_is_named(tmp_path: Path) -> None:
    path = write_gguf(tiny("llama", arch="rwkv7"), tmp_path / "rwkv.gguf")
    with pytest.raises(OwnModelError) as caught:
        convert(path, tmp_path / "out", lambda done, total: None)
    message = str(caught.value)
    assert "'rwkv7'" in message and "llama, qwen2, gemma3" in message and "qwen3" in message
    assert not (tmp_path / "out").exists()


def test_a_disk_without_room_is_refused_with_the_numbers(
    ggufs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    free = type("Usage", (), {"free": 1000})()  # 1 kB left on the disk
    monkeypatch.setattr(gguf_convert.shutil, "disk_usage", lambda _: free)
    with pytest.raises(OwnModelError, match="take 400 kB once converted, and .* has 1 kB free"):
        convert(ggufs["qwen2"], tmp_path / "out", lambda done, total: None)
    assert not (tmp_path / "out").exists()


# --- the conversion -----------------------------------------------------------------------


QUANTIZED = [("qwen2", "Q8_0"), ("llama", "Q4_0")]


@pytest.mark.parametrize(("arch", "quant"), [(a, "F32") for a in ARCHITECTURES] + QUANTIZED)
def test_the_conversion_gives_transformers_own_gguf_weights(
    ggufs: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    arch: str,
    quant: str,
) -> None:
    """Tensor for tensor what from_pretrained(gguf_file=...) loads: llama.cpp's permuted q/k
    rows (Llama), Gemma's 1 + w norms, Qwen2's biases, tied heads; quantized matrices
    de-quantized a few rows at a time as transformers does them whole."""
    from transformers import AutoModelForCausalLM

    path = ggufs[arch] if quant == "F32" else write_tiny(tmp_path / quant, arch, quant)
    monkeypatch.setattr(gguf_convert, "DEQUANTIZE_BYTES", 1000)  # several chunks a matrix
    reports: list[tuple[int, int]] = []
    convert(path, tmp_path / "out", lambda done, total: reports.append((done, total)))
    got = AutoModelForCausalLM.from_pretrained(tmp_path / "out", dtype=torch.float32)
    want = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    )
    assert type(got) is type(want)
    expected, converted = want.state_dict(), got.state_dict()
    assert expected.keys() == converted.keys()
    assert all(torch.equal(expected[k], converted[k]) for k in expected)
    assert reports[-1][0] == reports[-1][1] == len(reports)  # one report a tensor
    assert json.loads((tmp_path / "out" / "source.json").read_text())["path"] == str(path)


def test_the_conversion_writes_shards_and_their_index(
    ggufs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gguf_convert, "SHARD_BYTES", 64 * 1024)  # the tiny Gemma: 0.3 MB of fp32
    convert(ggufs["gemma3"], tmp_path / "out", lambda done, total: None)
    index = json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())
    files = set(index["weight_map"].values())
    assert len(files) > 3 and all((tmp_path / "out" / f).is_file() for f in files)
    from superposed.model import load_model

    loaded = load_model(str(tmp_path / "out"), "cpu", "float32", skeleton=True)
    assert loaded.checkpoint is not None  # the fast runner reads it tensor by tensor


def test_the_stores_tokenizer_is_the_same_before_and_after_the_conversion(
    ggufs: dict[str, Path], cache: Path
) -> None:
    """The stores open with the model's tokenizer before the model loads: read from the GGUF
    on the first run, from the converted folder after; both count the same ids."""
    text = "def main():\n    return read_config(path) \u00fc <|fim_prefix|>\n"
    for arch in ("qwen2", "gemma3"):
        before = as_tokenizer(load_tokenizer(str(ggufs[arch])))
        convert_here(str(ggufs[arch]))
        after = as_tokenizer(load_tokenizer(str(ggufs[arch])))
        assert type(after.tokenizer).__name__ == "Tokenizer"  # tokenizer.json, no transformers
        assert before.fingerprint == after.fingerprint
        assert [list(ids) for ids in before.encode_batch([text])] == [
            list(ids) for ids in after.encode_batch([text])
        ]
    with pytest.raises(ValueError, match="no such file"):
        load_tokenizer(str(cache / "gone.gguf"))


# --- FIM detected from the tokenizer --------------------------------------------------------


def test_fim_markers_are_found_in_a_gguf_tokenizer_and_only_there(ggufs: dict[str, Path]) -> None:
    qwen = gguf_tokenizer(ggufs["qwen2"])
    vocab = qwen.get_vocab()
    assert fim_tokens(qwen) == FimTokens(
        vocab["<|fim_prefix|>"], vocab["<|fim_suffix|>"], vocab["<|fim_middle|>"]
    )
    assert fim_tokens(gguf_tokenizer(ggufs["llama"])) is None  # left to right


def test_deepseek_markers_are_found_in_their_byte_level_spelling(tmp_path: Path) -> None:
    """A GGUF byte-level vocabulary, as transformers reads it, spells DeepSeek-Coder's
    markers in GPT-2's stand-ins for their bytes; they are found all the same."""
    markers = (
        "<\uff5cfim\u2581begin\uff5c>",
        "<\uff5cfim\u2581hole\uff5c>",
        "<\uff5cfim\u2581end\uff5c>",
    )
    shapes = tiny("qwen2", specials=("<\uff5cend\u2581of\u2581sentence\uff5c>", *markers))
    tokenizer = gguf_tokenizer(write_gguf(shapes, tmp_path / "deepseek.gguf"))
    assert markers[0] not in tokenizer.get_vocab()
    vocab = tokenizer.get_vocab()
    assert fim_tokens(tokenizer) == FimTokens(*(vocab[byte_level(m)] for m in markers))


@pytest.mark.slow  # two conversions in child processes, as the server runs them
def test_a_changed_file_converts_again_in_a_child_and_the_old_conversion_goes(
    tmp_path: Path, cache: Path
) -> None:
    from superposed.gguf_convert import converted_dir

    path = write_tiny(tmp_path, "llama")
    said: list[tuple[str, int | None]] = []
    first = converted_dir(gguf_model(str(path)), lambda m, p: said.append((m, p)))  # type: ignore[arg-type]
    assert (first / "config.json").is_file() and said[0][1] == 0
    assert said[-1] == (f"converting {path}: 21/21 tensors", 99)
    assert converted_dir(gguf_model(str(path))) == first  # type: ignore[arg-type]
    write_gguf(tiny("llama"), path, "Q8_0")  # the same name, other contents
    second = converted_dir(gguf_model(str(path)))  # type: ignore[arg-type]
    assert second != first and (second / "config.json").is_file()
    assert not first.exists()  # the conversion of the file's earlier contents is gone
