"""A converted model in the model cache, checked before it is used (issue 51: caches are hints).

The first load converts an embedded model's or the user's GGUF into a transformers folder in
the user's cache (model.py, gguf_convert.py); later loads only read it. A folder damaged
since (a disk that filled, a copy cut short, an edit by hand) was obeyed as written: a
truncated ``model.safetensors`` raised SafetensorError at every start and the server stayed
"loading" for ever. So a folder is read once, cheaply, before it is used (the JSON files
parse, each safetensors header opens, which checks the file's size against the header), and
a folder that fails is logged, removed and converted again.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

INDEX = "model.safetensors.index.json"
WEIGHTS = "model.safetensors"


def problem(folder: Path) -> str | None:
    """What is wrong with the converted model ``folder`` (None: it reads)."""
    from safetensors import SafetensorError, safe_open

    try:
        config = json.loads((folder / "config.json").read_text())
        if not isinstance(config, dict) or not isinstance(config.get("model_type"), str):
            return "config.json names no model_type"
        json.loads((folder / "tokenizer.json").read_text())  # what the stores count with
        for name in ("tokenizer_config.json", "generation_config.json"):
            if (folder / name).exists():
                json.loads((folder / name).read_text())  # what from_pretrained reads
        for weights in _weight_files(folder):
            with safe_open(weights, framework="numpy"):  # numpy: no torch for index-repo
                pass  # the header parses and the file is as long as it says
    except (OSError, ValueError, SafetensorError) as error:
        return f"{type(error).__name__}: {error}"
    return None


def _weight_files(folder: Path) -> set[Path]:
    """The safetensors files of ``folder`` (one, or the shards its index names)."""
    if (folder / INDEX).exists():
        index = json.loads((folder / INDEX).read_text())
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            raise ValueError(f"{INDEX} has no weight_map")
        return {folder / str(file) for file in weight_map.values()}
    return {folder / WEIGHTS}  # a missing file: OSError


def usable(folder: Path) -> bool:
    """Whether the converted model ``folder`` is there and reads; one that is there and does
    not is logged and removed, to be converted again."""
    if not folder.exists():
        return False
    if (why := problem(folder)) is None:
        return True
    log.warning("the model cache %s is damaged (%s): converting the model again", folder, why)
    discard(folder)
    return False


def discard(folder: Path) -> None:
    """Remove ``folder``: renamed aside first, so that no reader meets it half removed."""
    aside = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".damaged-"))
    try:
        folder.rename(aside / folder.name)
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(aside, ignore_errors=True)


@contextmanager
def publishing(target: Path) -> Iterator[Path]:
    """A scratch folder beside ``target`` to write a converted model into, renamed to
    ``target`` when the block ends: a concurrent first load never sees half a folder, and
    where another process published first, its folder stands."""
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    try:
        yield tmp
        try:
            tmp.rename(target)
        except OSError:  # another process finished first
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
