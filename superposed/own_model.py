"""The model the user already has: a GGUF file by its path, or an Ollama model by its name.

Besides an embedded model's name or a transformers folder, the ``model`` setting takes

- a GGUF file's path (``~/models/qwen2.5-coder-1.5b-instruct-q8_0.gguf``), as llama.vscode,
  minuet-ai.nvim, twinny and Continue take one, and
- ``ollama:NAME[:TAG]`` (``ollama:qwen2.5-coder:1.5b``): the GGUF file Ollama keeps for that
  model, found through its manifest under Ollama's models folder (``OLLAMA_MODELS``, or the
  platform's default), read only: Ollama need not run, and nothing is downloaded.

Either is converted once into the model cache (superposed/gguf_convert.py), in a folder
keyed by the file's content (``content_key``): its size, its mtime and a hash of its header
and of samples spread over it, so a 1 GB file is not hashed on every start, and a changed
file converts again. Torch-free: the tokenizer loader and index-repo use it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from superposed.embedded import cache_dir
from superposed.types import EngineError

OLLAMA = "ollama:"  # the prefix of an Ollama model's name in the settings
GGUF_MAGIC = b"GGUF"  # the first four bytes of every GGUF file
OLLAMA_REGISTRY = "registry.ollama.ai"  # a name without a host is this registry's
OLLAMA_LIBRARY = "library"  # ... and without a namespace, this namespace's
OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"  # the manifest layer of the GGUF
OLLAMA_ADAPTER_LAYER = "application/vnd.ollama.image.adapter"  # a LoRA on top: not applied
HEADER_BYTES = 2**20  # hashed whole: the metadata (and most of the tokenizer) of a small file
SAMPLES = 8  # blocks hashed across the rest of the file
SAMPLE_BYTES = 64 * 2**10


class OwnModelError(EngineError):
    """The GGUF file or Ollama model the settings name cannot be used; the message says why
    and what to do."""


@dataclass(frozen=True)
class GgufModel:
    """A model the user has as a GGUF file."""

    name: str  # what the settings say: the path as written, or ollama:NAME:TAG
    path: Path  # the file (for Ollama, the blob its manifest names)


def is_own_model(name: str) -> bool:
    """Whether the setting names a GGUF file or an Ollama model (without looking at the disk
    for an Ollama name; a path without the .gguf suffix counts when the file starts as one)."""
    if name.startswith(OLLAMA) or name.lower().endswith(".gguf"):
        return True
    path = Path(name).expanduser()
    return path.is_file() and _starts_as_gguf(path)


def gguf_model(name: str) -> GgufModel | None:
    """The GGUF file that setting ``name`` names; None for any other name (an embedded model,
    a folder, a hub id). OwnModelError where it names one that is not there."""
    if not is_own_model(name):
        return None
    if name.startswith(OLLAMA):
        return GgufModel(name, ollama_blob(name.removeprefix(OLLAMA)))
    path = Path(name).expanduser()
    if not path.is_file():
        raise OwnModelError(f"model {name!r}: there is no such file; give the path of a GGUF file")
    if not _starts_as_gguf(path):
        raise OwnModelError(
            f"model {name!r} is not a GGUF file (it does not start with 'GGUF'): give the "
            "path of a .gguf file, as llama.cpp and Ollama use them"
        )
    return GgufModel(name, path.resolve())


def _starts_as_gguf(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(len(GGUF_MAGIC)) == GGUF_MAGIC
    except OSError:
        return False


# --- Ollama ------------------------------------------------------------------------------


def ollama_models_dir() -> Path:
    """Where Ollama keeps its models: ``OLLAMA_MODELS``, else ~/.ollama/models (the Linux
    service's /usr/share/ollama/.ollama/models where only that one exists)."""
    if override := os.environ.get("OLLAMA_MODELS"):
        return Path(override).expanduser()
    home = Path.home() / ".ollama" / "models"
    service = Path("/usr/share/ollama/.ollama/models")
    if sys.platform.startswith("linux") and not home.is_dir() and service.is_dir():
        return service
    return home


def ollama_manifest(reference: str, models: Path) -> Path:
    """The manifest file of ``reference`` ([HOST/][NAMESPACE/]MODEL[:TAG], as ``ollama pull``
    takes it) under the ``models`` folder."""
    path, tag = reference, "latest"
    if ":" in reference.rsplit("/", 1)[-1]:
        path, tag = reference.rsplit(":", 1)
    parts = [p for p in path.split("/") if p]
    if not parts or any(p in (".", "..") for p in [*parts, tag]) or len(parts) > 3:
        raise OwnModelError(
            f"model 'ollama:{reference}' is not an Ollama model name: use ollama:NAME[:TAG], "
            "e.g. ollama:qwen2.5-coder:1.5b"
        )
    if len(parts) == 1:
        parts.insert(0, OLLAMA_LIBRARY)
    if len(parts) == 2:
        parts.insert(0, OLLAMA_REGISTRY)
    return models.joinpath("manifests", *parts, tag or "latest")


def ollama_blob(reference: str, models: Path | None = None) -> Path:
    """The GGUF blob of Ollama model ``reference``, through its manifest (read only)."""
    models = models or ollama_models_dir()
    manifest = ollama_manifest(reference, models)
    if not manifest.is_file():
        raise OwnModelError(
            f"Ollama model {reference!r} is not in {models} (no {manifest}): run "
            f"`ollama pull {reference}`, or set OLLAMA_MODELS to the folder Ollama keeps its "
            "models in"
        )
    try:
        layers = json.loads(manifest.read_text())["layers"]
        kinds = {layer["mediaType"]: layer["digest"] for layer in layers}
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise OwnModelError(
            f"the Ollama manifest {manifest} cannot be read ({err}): run `ollama pull {reference}`"
        ) from err
    if OLLAMA_ADAPTER_LAYER in kinds:
        raise OwnModelError(
            f"Ollama model {reference!r} adds a LoRA adapter to its base model, which is not "
            "applied here: use the base model's name"
        )
    digest = kinds.get(OLLAMA_MODEL_LAYER)
    if not isinstance(digest, str) or not re.fullmatch(r"sha256[:-][0-9a-f]{64}", digest):
        raise OwnModelError(
            f"the Ollama manifest {manifest} names no model file: run `ollama pull {reference}`"
        )
    blob = models / "blobs" / digest.replace(":", "-")
    if not blob.is_file():
        raise OwnModelError(
            f"Ollama model {reference!r}: its file {blob} is missing: run `ollama pull {reference}`"
        )
    return blob


# --- the converted folder ------------------------------------------------------------------


def content_key(path: Path) -> str:
    """16 hex digits that change when the file does: a hash of its size, its mtime, its
    first HEADER_BYTES (the metadata) and SAMPLES blocks spread over the rest. About 1.5 MB
    read, whatever the file's size."""
    stat = path.stat()
    digest = hashlib.sha256(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
    with open(path, "rb") as handle:
        digest.update(handle.read(HEADER_BYTES))
        for i in range(1, SAMPLES + 1):
            handle.seek(stat.st_size * i // (SAMPLES + 1))
            digest.update(handle.read(SAMPLE_BYTES))
    return digest.hexdigest()[:16]


def _slug(name: str) -> str:
    """A folder name's part for a model name: letters, digits, dots, dashes."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-.")[:80] or "model"


def conversions_dir() -> Path:
    """Where converted GGUF files live: <cache>/models/gguf."""
    return cache_dir() / "models" / "gguf"


def converted_folder(model: GgufModel, key: str | None = None) -> Path:
    """The folder ``model``'s file converts into: named after the setting (so that the
    ``fim`` setting's name checks see it) and the file's ``content_key``."""
    stem = model.name.removeprefix(OLLAMA) if model.name.startswith(OLLAMA) else model.path.stem
    return conversions_dir() / f"{_slug(stem)}-{key or content_key(model.path)}"
