"""Loading a model's tokenizer without loading the model: what index-repo and the stores need.

A folder with a tokenizer.json loads through ``tokenizers`` alone (no torch import).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from superposed.embedded import cache_dir, embedded


def load_tokenizer(model: str) -> Any:
    """The tokenizer of an embedded model, a local model folder or a hub id.

    An embedded model not yet converted is converted first (``model.embedded_model_dir``).
    Raises OSError or ValueError when nothing can be loaded.
    """
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    named = embedded(model)
    folder = cache_dir() / "models" / named.folder if named is not None else Path(model)
    if named is not None and not (folder / "tokenizer.json").is_file():
        from superposed.model import embedded_model_dir  # converts the model once

        folder = embedded_model_dir(named)
    if (folder / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(folder / "tokenizer.json"))
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model)
