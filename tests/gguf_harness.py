"""What the tests of the user's own model share: tiny random GGUF files of each architecture
(bench/gguf_models.py writes them, no download), an Ollama models folder faked around one of
them, a damaged copy, and conversions done in this process (the server's own conversion runs
a child process: tests/e2e/test_lsp_own_model.py takes that path)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from bench.gguf_models import TINY, write_gguf
from superposed.gguf_convert import convert
from superposed.own_model import GgufModel, converted_folder, gguf_model

ARCHITECTURES = tuple(TINY)  # qwen2 (biases, FIM tokens), llama, gemma3, qwen3


def write_tiny(folder: Path, arch: str, quant: str = "F32") -> Path:
    """The tiny ``arch`` model as ``folder``/tiny-<arch>.gguf."""
    folder.mkdir(parents=True, exist_ok=True)
    return write_gguf(TINY[arch], folder / f"tiny-{arch}.gguf", quant)


def fake_ollama(models: Path, gguf: Path, name: str = "tiny-coder", tag: str = "1b") -> Path:
    """An Ollama models folder holding ``gguf`` as model ``name:tag`` (manifest and blob,
    laid out as ``ollama pull`` leaves them); returns the blob."""
    data = gguf.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    blob = models / "blobs" / f"sha256-{digest}"
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(data)
    manifest = models / "manifests" / "registry.ollama.ai" / "library" / name / tag
    manifest.parent.mkdir(parents=True, exist_ok=True)
    layers = [
        {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}"},
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "0" * 64},
    ]
    config = {"mediaType": "application/vnd.docker.container.image.v1+json"}
    manifest.write_text(json.dumps({"schemaVersion": 2, "config": config, "layers": layers}))
    return blob


def truncated_copy(gguf: Path, target: Path, cut: int = 100) -> Path:
    """``gguf`` without its last ``cut`` bytes (an interrupted download)."""
    target.write_bytes(gguf.read_bytes()[:-cut])
    return target


def convert_here(model: str) -> Path:
    """Convert model ``model`` (a GGUF path, ollama:NAME) into its cache folder, in this
    process; the folder (the cache directory is the caller's SUPERPOSED_CACHE_DIR)."""
    own = gguf_model(model)
    assert own is not None
    return convert_model(own)


def convert_model(own: GgufModel) -> Path:
    target = converted_folder(own)
    if not (target / "config.json").is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        convert(own.path, target, lambda done, total: None)
    return target
