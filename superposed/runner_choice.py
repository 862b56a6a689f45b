"""Which runner serves a model: the transformers one, or the fast runner of its architecture.

Kept apart from the runners themselves so that none of them imports another's sibling:
fast_gemma.py builds on fast_runner.py, and this module picks between them.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from superposed.calibrate import calibrated
from superposed.fast_gemma import GEMMA_MODEL_TYPES, GemmaRunner
from superposed.fast_runner import FastRunner
from superposed.model import Checkpoint
from superposed.options import RUNNERS
from superposed.runner import HFRunner, ModelRunner
from superposed.types import EngineError

log = logging.getLogger(__name__)


def default_precision(device: torch.device, config: Any = None) -> str:
    """bf16 on a GPU, where the int kernels here do not run. On a CPU int4 (on the default
    model the most faithful after fp32: its layers were 4-bit in the GGUF it ships as), or
    int8 where the calibration for ``config``'s shapes measured it faster (calibrate.py)."""
    if device.type != "cpu":
        return "bf16"
    return "int4" if config is None else calibrated(config.to_json_string()).precision


def fast_runner_class(model: Any) -> type[FastRunner]:
    """The fast runner for ``model``'s architecture: Gemma 3's or the Llama family's."""
    if getattr(model.config, "model_type", None) in GEMMA_MODEL_TYPES:
        return GemmaRunner
    return FastRunner


def llama_cpp_runner(model: Any, checkpoint: Checkpoint | None, name: str) -> ModelRunner:
    """The llama.cpp runner on model ``name``'s GGUF (an embedded model's, or the user's own),
    with the embedding table the product converted from it (the one llama.cpp reads:
    embed(id) gives the id's logits)."""
    from superposed.llama_cpp_runner import LlamaCppRunner, gguf_for

    gguf = gguf_for(name)  # before the embedding's 113 MB: a clear error first
    weight = model.get_input_embeddings().weight
    embedding = checkpoint(weight, torch.float32) if checkpoint else weight.detach().float()
    return LlamaCppRunner(gguf, embedding, threads=torch.get_num_threads())


def make_runner(
    model: Any,
    kind: str = "auto",
    precision: str = "auto",
    checkpoint: Checkpoint | None = None,
    prefill_copy: bool = False,
    name: str = "",
) -> ModelRunner:
    """The runner for ``model``: "hf" (any causal LM), "fast" (Llama family, Gemma 3),
    "llama.cpp" (llama.cpp's kernels on model ``name``'s GGUF file: opt-in) or "auto".

    auto takes the fast runner when it supports the model and the transformers one otherwise.
    precision: fp32 | bf16 | int8 | int4, or auto (see default_precision).
    checkpoint: ``model`` is a skeleton whose weights this reads (the fast runner only).
    prefill_copy: see FastRunner.
    """
    if kind not in RUNNERS:
        raise EngineError(f"unknown runner {kind!r}: use {', '.join(RUNNERS)}")
    runner_class = fast_runner_class(model)
    if kind == "auto":
        reason = runner_class.unsupported(model)
        if reason is not None:
            log.info("using the transformers runner: %s", reason)
            kind = "hf"
    if kind == "hf":
        if checkpoint is not None:
            raise EngineError("the transformers runner needs the model with its weights")
        return HFRunner(model)
    if kind == "llama.cpp":
        return llama_cpp_runner(model, checkpoint, name)
    device = checkpoint.device if checkpoint else next(model.parameters()).device
    chosen = default_precision(device, model.config) if precision == "auto" else precision
    return runner_class(model, chosen, checkpoint=checkpoint, prefill_copy=prefill_copy)
