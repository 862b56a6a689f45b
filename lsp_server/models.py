"""Building the server's Engine: the configured model, or a tiny random one for fast tests.

The model name ``tiny-random`` (or the environment variable ``SUPERPOSED_TEST_TINY_MODEL=1``,
which overrides any configured model) gives a 2-layer Llama with random weights and the
default model's real tokenizer: its drafts are meaningless text, but every code path of the
server (prompting, healing, decoding, n-gram re-scoring, cancellation) runs for real in a
fraction of a second. Under the environment variable the drafts are not judged for whether
they parse (``wellFormed``): random weights draft word salad, which it would drop whole, and
the editors' tests over this model need drafts to show.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import torch

from lsp_server.device_model import device_default_model
from lsp_server.settings import ModelSettings
from superposed.api import Engine
from superposed.gguf_convert import Progress
from superposed.model import LoadedModel, default_model_dir, resolve_device
from superposed.own_model import is_own_model
from superposed.types import EngineError
from superposed.vocab import Vocab

log = logging.getLogger(__name__)

TINY_MODEL = "tiny-random"
TINY_ENV = "SUPERPOSED_TEST_TINY_MODEL"


def tiny_requested(model: str) -> bool:
    return model == TINY_MODEL or os.environ.get(TINY_ENV) == "1"


def testing_tiny() -> bool:
    """Whether this process serves the tiny random model for tests (its environment
    variable): its drafts are noise, not code to judge."""
    return os.environ.get(TINY_ENV) == "1"


# The tiny models' shape: 2 layers, grouped-query attention (4 query heads, 2 key/value heads).
TINY_SHAPE: dict[str, Any] = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)


def tiny_llama(vocab_size: int, seed: int = 0, max_positions: int = 2048) -> Any:
    """A randomly initialised 2-layer Llama (about 3M parameters with SmolLM2's vocabulary)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=vocab_size, max_position_embeddings=max_positions, **TINY_SHAPE)
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()


@torch.no_grad()
def tiny_engine(device: str = "cpu", seed: int = 0) -> Engine:
    """A random 2-layer Llama over the default tokenizer (deterministic for a seed)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    torch_device = resolve_device(device)
    model = tiny_llama(len(tokenizer), seed).to(torch_device)
    loaded = LoadedModel(
        name=TINY_MODEL,
        model=model,
        tokenizer=tokenizer,
        vocab=Vocab.from_tokenizer(tokenizer),
        device=torch_device,
        dtype=torch.float32,
    )
    return Engine(loaded)


def load_store_tokenizer(settings: ModelSettings) -> Any:
    """The model's tokenizer alone, as the stores count with it (index-repo's loader: a
    tokenizer.json loads in a fraction of a second, without the model or torch)."""
    from superposed.embedded import DEFAULT_MODEL
    from superposed.tokenizer import load_tokenizer

    return load_tokenizer(DEFAULT_MODEL if tiny_requested(settings.model) else settings.model)


def load_engine(settings: ModelSettings, progress: Progress | None = None) -> Engine:
    """The engine for the model settings (see the module docstring for ``tiny-random``).

    A GGUF file or an Ollama model that cannot be used (a damaged file, a missing model, one
    too big for the memory free) leaves the server on the default model, the reason its
    first notice (``Engine.notices``)."""
    if tiny_requested(settings.model):
        return tiny_engine("cpu" if settings.device == "auto" else settings.device)
    try:
        return _engine(settings.model, settings, progress)
    except EngineError as err:
        if not is_own_model(settings.model):
            raise
        default = device_default_model(settings.device)
        log.warning("model %s did not load (%s): loading %s instead", settings.model, err, default)
        engine = _engine(default, settings, progress)
        engine.notices.insert(0, f"{err}. The default model {default} runs instead.")
        return engine


def _engine(model: str, settings: ModelSettings, progress: Progress | None) -> Engine:
    return Engine.load(
        model,
        settings.device,
        settings.dtype,
        threads=settings.threads,
        runner=settings.runner,
        precision=settings.precision,
        compile=settings.compile,
        prefill_copy=settings.prefill_copy,
        progress=progress,
    )
