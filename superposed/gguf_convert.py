"""A user's GGUF file converted once into a plain transformers folder in the model cache.

The folder holds the config, the tokenizer and the weights de-quantized to fp32 in
safetensors shards, which ``model.load_model`` reads like any local model (the fast runner
one tensor at a time). The conversion streams: transformers' own GGUF load
(``from_pretrained(gguf_file=...)``, what the embedded models' conversion uses) holds every
de-quantized tensor at once, then the model, then its copy; here each tensor is
de-quantized, put in transformers' layout by transformers' own processor for the
architecture (llama.cpp's permuted q/k rows back, Gemma's 1 + w norms back to w), and
written to a shard of at most SHARD_BYTES, so the peak is about a shard and a tensor
(bench/results/own_model.md measures both). tests/test_own_model.py holds the result to
from_pretrained's weights, tensor for tensor.

The conversion runs in a child process, as the embedded models' does: the GGUF reader maps
the file, and a damaged file (or one that shrinks while it is read) kills the child, not the
server. The child says how far it got on stdout ("tensors DONE TOTAL", for the editor's
progress), and a problem the user must fix as its stderr's last line ("error: ...", exit 2).
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from superposed import model_cache
from superposed.own_model import (
    OLLAMA,
    GgufModel,
    OwnModelError,
    content_key,
    conversions_dir,
    converted_folder,
)

log = logging.getLogger(__name__)

# A message for the editor and a percentage (None: unknown) while a model gets ready.
Progress = Callable[[str, int | None], None]

SHARD_BYTES = 512 * 2**20  # the fp32 bytes of one safetensors shard, at most (or one tensor)
DEQUANTIZE_BYTES = 32 * 2**20  # fp32 output de-quantized at a time (dequantized)
REPORT_STEP = 5  # percent of the tensors between two progress messages
FAILED = 2  # the child's exit status for a problem the user must fix (stderr's last line says)
# GGUF architectures whose blocks the fast runner implements (a Mistral file says "llama").
FAST_ARCHITECTURES = ("llama", "qwen2", "gemma3")


def gb(size: float) -> str:
    """A size in bytes for a message: GB with one decimal, MB under a GB, kB under a MB."""
    if size >= 1e9:
        return f"{size / 1e9:.1f} GB"
    return f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.0f} kB"


# --- in the server: run the conversion once -----------------------------------------------


def converted_dir(model: GgufModel, progress: Progress | None = None) -> Path:
    """``model``'s file as a transformers folder in the model cache, converted the first
    time (in a child process; ``progress`` hears how far it got) and found after."""
    key = content_key(model.path)
    target = converted_folder(model, key)
    if model_cache.usable(target):  # a damaged one is removed and converted again
        return target
    say = progress or (lambda message, percent: None)
    target.parent.mkdir(parents=True, exist_ok=True)
    log.info("converting %s (%s) once into %s", model.name, model.path, target)
    say(f"converting {model.name} once into the model cache", 0)
    command = [sys.executable, "-m", "superposed.gguf_convert", str(model.path), str(target)]
    with tempfile.TemporaryFile("w+") as errors:
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=errors, stdin=subprocess.DEVNULL, text=True
        ) as child:
            assert child.stdout is not None
            said = -REPORT_STEP
            for line in child.stdout:
                said = _report(line, model.name, say, said)
        errors.seek(0)
        tail = errors.read().strip().splitlines()[-5:]
    if child.returncode == FAILED and tail and tail[-1].startswith("error: "):
        raise OwnModelError(_about(model, tail[-1].removeprefix("error: ")))
    if child.returncode != 0 or not (target / "config.json").is_file():
        raise OwnModelError(
            _about(
                model,
                f"converting it into {target} failed (exit {child.returncode}): "
                f"{' '.join(tail) or 'no message'}. Check the disk space there",
            )
        )
    _remove_stale(model, target)
    return target


def _report(line: str, name: str, say: Progress, said: int) -> int:
    """The child's "tensors DONE TOTAL" line as a progress message, where its percentage
    moved by REPORT_STEP since the one ``said`` last, or it is the last; returns the last
    percentage said."""
    parts = line.split()
    if len(parts) != 3 or parts[0] != "tensors" or not (parts[1] + parts[2]).isdigit():
        return said
    done, total = int(parts[1]), max(1, int(parts[2]))
    percent = min(99, 100 * done // total)
    if percent < said + REPORT_STEP and done < total:  # the last tensor is always said
        return said
    say(f"converting {name}: {done}/{total} tensors", percent)
    return percent


def _about(model: GgufModel, problem: str) -> str:
    """The message for a problem with ``model``'s file: which file, and how to fetch it again."""
    where = f"model {model.name!r}" + ("" if str(model.path) == model.name else f" ({model.path})")
    if model.name.startswith(OLLAMA) and "damaged" in problem:
        problem += f" (`ollama pull {model.name.removeprefix(OLLAMA)}` fetches it again)"
    return f"{where}: {problem}"


def _remove_stale(model: GgufModel, current: Path) -> None:
    """Drop the conversions of earlier contents of the same file (it changed since)."""
    for folder in conversions_dir().iterdir():
        if folder == current or not (folder / "source.json").is_file():
            continue
        try:
            stale = json.loads((folder / "source.json").read_text()).get("path") == str(model.path)
        except (OSError, ValueError, AttributeError):
            continue
        if stale:
            log.info("removing %s: %s changed since it was converted", folder, model.path)
            shutil.rmtree(folder, ignore_errors=True)


# --- in the child: the conversion ---------------------------------------------------------


def open_gguf(path: Path) -> Any:
    """The file's GGUF reader (metadata parsed, tensors mapped), or OwnModelError saying it is
    damaged or truncated."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(path)
        size = path.stat().st_size
        end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    except (ValueError, OSError, IndexError, KeyError, UnicodeDecodeError) as err:
        raise OwnModelError(
            f"the file is damaged or truncated ({type(err).__name__}: {err}): download it again"
        ) from err
    if not reader.tensors or end > size:
        raise OwnModelError(
            f"the file is truncated: its tensors need {end:,} bytes and it holds {size:,} "
            "(an interrupted download?): download it again"
        )
    return reader


def architecture(reader: Any) -> str:
    """The file's general.architecture."""
    field = reader.fields.get("general.architecture")
    if field is None:
        raise OwnModelError("the file names no architecture (general.architecture): not a model")
    return str(field.contents())


def readable_architectures() -> list[str]:
    """The GGUF architectures transformers' GGUF loader turns into models, tensor by tensor."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    return sorted(set(GGUF_SUPPORTED_ARCHITECTURES) - {"general", "tokenizer"})


def check_architecture(name: str) -> None:
    """OwnModelError naming ``name`` when neither runner can load models of it."""
    readable = readable_architectures()
    if name not in readable:
        raise OwnModelError(
            f"its architecture {name!r} is one neither the fast runner "
            f"({', '.join(FAST_ARCHITECTURES)}) nor transformers' GGUF reader "
            f"({', '.join(readable)}) can load: pick a model of one of these"
        )


def check_disk(reader: Any, folder: Path) -> None:
    """OwnModelError when ``folder``'s disk lacks room for the fp32 weights."""
    dense = sum(int(t.n_elements) * 4 for t in reader.tensors)
    free = shutil.disk_usage(folder).free
    if dense > free:
        raise OwnModelError(
            f"its weights take {gb(dense)} once converted, and {folder} has {gb(free)} free: "
            "free some space, or set SUPERPOSED_CACHE_DIR to a disk with room"
        )


@contextlib.contextmanager
def gguf_named(path: Path) -> Iterator[tuple[str, str]]:
    """(folder, file name) through which transformers reads ``path`` as a ``.gguf`` file (an
    Ollama blob has no suffix: a link to it in a temporary folder has one)."""
    if path.suffix.lower() == ".gguf":
        yield str(path.parent), path.name
        return
    with tempfile.TemporaryDirectory(prefix="superposed-gguf-") as folder:
        (Path(folder) / "model.gguf").symlink_to(path)
        yield folder, "model.gguf"


def gguf_tokenizer(path: Path) -> Any:
    """The tokenizer a GGUF file describes in its metadata (tokenizer.ggml.*), as
    transformers builds it; OwnModelError where it cannot."""
    from transformers import AutoTokenizer

    with gguf_named(path) as (folder, name):
        try:
            return AutoTokenizer.from_pretrained(folder, gguf_file=name)
        except (ValueError, KeyError, OSError) as err:
            raise OwnModelError(f"its tokenizer cannot be read ({err})") from err


class Shards:
    """safetensors files of about SHARD_BYTES each, and the index naming each tensor's file."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.pending: dict[str, Any] = {}
        self.pending_bytes = 0
        self.weight_map: dict[str, str] = {}
        self.total = 0

    def add(self, name: str, tensor: Any) -> None:
        size = tensor.numel() * tensor.element_size()
        if self.pending_bytes + size > SHARD_BYTES:  # written first: never a shard and a half
            self.flush()
        self.pending[name] = tensor.contiguous()
        self.pending_bytes += size

    def flush(self) -> None:
        from safetensors.torch import save_file

        if not self.pending:
            return
        file = f"model-{len(set(self.weight_map.values())) + 1:05d}.safetensors"
        save_file(self.pending, str(self.folder / file), metadata={"format": "pt"})
        self.weight_map |= dict.fromkeys(self.pending, file)
        self.total += self.pending_bytes
        self.pending, self.pending_bytes = {}, 0

    def close(self) -> dict[str, str]:
        """Write what is left and the index; the tensor name -> file map."""
        self.flush()
        index = {"metadata": {"total_size": self.total}, "weight_map": self.weight_map}
        (self.folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
        return self.weight_map


def dequantized(tensor: Any) -> Any:
    """A GGUF tensor's values in fp32 [rows, ...], de-quantized DEQUANTIZE_BYTES of output at a
    time into one array: gguf's de-quantization holds a few full-size temporaries of the
    tensor it is given (the embedding's are the largest, 545 MB each for Qwen2.5-Coder-0.5B)."""
    import numpy as np
    from gguf import dequantize

    data = tensor.data  # the file's bytes, mapped: [rows, bytes a row] where quantized
    if data.ndim < 2:
        return np.array(dequantize(data, tensor.tensor_type), dtype=np.float32)
    first = dequantize(data[:1], tensor.tensor_type)
    out = np.empty((data.shape[0], *first.shape[1:]), dtype=np.float32)
    step = max(1, DEQUANTIZE_BYTES // max(1, first.nbytes))
    for start in range(0, data.shape[0], step):
        out[start : start + step] = dequantize(data[start : start + step], tensor.tensor_type)
    return out


def write_weights(
    reader: Any, arch: str, config: Any, folder: Path, report: Callable[[int, int], None]
) -> None:
    """Every tensor of ``reader`` de-quantized, in transformers' names and layout, into fp32
    shards in ``folder``; OwnModelError where the model's parameters are not all there."""
    import numpy as np
    import torch
    from accelerate import init_empty_weights
    from transformers import AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import (
        TENSOR_PROCESSORS,
        TensorProcessor,
        get_gguf_hf_weights_map,
    )

    try:
        with init_empty_weights():
            skeleton = AutoModelForCausalLM.from_config(config)
        skeleton.tie_weights()  # a tied head is the embedding: no tensor of its own
    except ValueError as err:  # e.g. an encoder-decoder: no causal LM class
        raise OwnModelError(
            f"its architecture {arch!r} is not a causal language model ({err})"
        ) from err
    processor = TENSOR_PROCESSORS.get(arch, TensorProcessor)(config=config.to_dict())
    names = get_gguf_hf_weights_map(skeleton, processor)
    parsed: dict[str, Any] = {"tensors": {}}  # where processors that merge tensors (MoE) put them
    shards = Shards(folder)
    for done, tensor in enumerate(reader.tensors, 1):
        result = processor.process(
            weights=dequantized(tensor),
            name=tensor.name,
            tensor_key_mapping=names,
            parsed_parameters=parsed,
        )
        if result.name in names:
            weights = np.ascontiguousarray(result.weights, dtype=np.float32)
            if not (weights.flags.owndata and weights.flags.writeable):  # a view of the file
                weights = weights.copy()
            shards.add(names[result.name], torch.from_numpy(weights))
        report(done, len(reader.tensors))
    for name, merged in parsed["tensors"].items():
        shards.add(name, merged.float())
    written = shards.close()
    missing = sorted({name for name, _ in skeleton.named_parameters()} - set(written))
    if missing:
        raise OwnModelError(
            f"the file lacks {len(missing)} of the model's tensors ({', '.join(missing[:3])}): "
            "it is damaged, or not a complete model"
        )


def convert(gguf: Path, target: Path, report: Callable[[int, int], None]) -> None:
    """Write GGUF file ``gguf`` as the transformers folder ``target`` (config, tokenizer, fp32
    safetensors shards, and source.json saying which file it came from)."""
    from transformers import AutoConfig

    reader = open_gguf(gguf)
    arch = architecture(reader)
    check_architecture(arch)
    check_disk(reader, target.parent)
    tokenizer = gguf_tokenizer(gguf)
    with gguf_named(gguf) as (folder, name):
        config = AutoConfig.from_pretrained(folder, gguf_file=name)
    config.dtype = "float32"
    with model_cache.publishing(target) as tmp:
        write_weights(reader, arch, config, tmp, report)
        config.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        source = {"path": str(gguf), "key": content_key(gguf), "architecture": arch}
        (tmp / "source.json").write_text(json.dumps(source, indent=1))


def main(argv: list[str]) -> int:
    """The child: python -m superposed.gguf_convert GGUF TARGET."""
    gguf, target = Path(argv[0]), Path(argv[1])
    try:
        convert(gguf, target, lambda done, total: print(f"tensors {done} {total}", flush=True))
    except OwnModelError as err:
        print(f"error: {err}", file=sys.stderr)
        return FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
