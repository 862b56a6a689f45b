"""Loading a model's tokenizer without loading the model: what index-repo and the stores need.

A folder with a tokenizer.json loads through ``tokenizers`` alone (no torch import).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from superposed import model_cache
from superposed.embedded import cache_dir, embedded
from superposed.own_model import GgufModel, OwnModelError, converted_folder, gguf_model


def converts_first(model: str) -> bool:
    """Whether loading ``model``'s tokenizer converts the model first: an embedded model not
    yet in the cache (tens of seconds, once per machine), which a caller can say beforehand."""
    named = embedded(model)
    return (
        named is not None
        and not (cache_dir() / "models" / named.folder / "tokenizer.json").is_file()
    )


def load_tokenizer(model: str) -> Any:
    """The tokenizer of an embedded model, a GGUF file or an Ollama model, a local model
    folder or a hub id.

    An embedded model not yet converted is converted first (``model.embedded_model_dir``);
    a GGUF file not yet converted gives the tokenizer its metadata describes (the one its
    conversion saves). Raises OSError or ValueError when nothing can be loaded
    (own_model.OwnModelError, a ValueError too, for a GGUF file that cannot be used).
    """
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    try:
        own = gguf_model(model)
        if own is not None:
            return _gguf_tokenizer(own)
    except OwnModelError as err:
        raise ValueError(str(err)) from err
    named = embedded(model)
    folder = cache_dir() / "models" / named.folder if named is not None else Path(model)
    if named is not None and not model_cache.usable(folder):  # a damaged one is converted again
        from superposed.model import embedded_model_dir  # converts the model once

        folder = embedded_model_dir(named)
    if (folder / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(folder / "tokenizer.json"))
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model)


def _gguf_tokenizer(model: GgufModel) -> Any:
    """The converted folder's tokenizer.json, or (not converted yet) the GGUF's own."""
    folder = converted_folder(model)
    if model_cache.usable(folder):  # else (not converted yet, or damaged) the GGUF's own
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(folder / "tokenizer.json"))
    from superposed.gguf_convert import gguf_tokenizer

    try:
        return gguf_tokenizer(model.path)
    except OwnModelError as err:  # say which model
        raise OwnModelError(f"model {model.name!r}: {err}") from err
