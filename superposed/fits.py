"""Whether a model's weights fit the memory this machine has free, said before they are read.

A user's own model may be ten times the embedded one's size, and a load that runs out of
memory takes the editor's machine down with it: the size is said up front, and a model that
cannot fit is refused with the numbers. What a runner keeps is its own copy of the weights
in the decode precision (fast_runner.py): int4 layers about 0.625 bytes a parameter (4 bits,
and a bf16 scale and zero for every INT4_GROUP of 32), int8 about 1, bf16 2, fp32 4; a
quantized runner keeps its embedding in bf16 and adds an int4 copy of the head
(quant.RefinedHead). The transformers runner keeps every parameter in the load's dtype.
The KV cache and the activations are left out (tens of MB for the small models): a model
refused does not fit; one taken may still be tight.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from superposed.gguf_convert import gb
from superposed.options import QUANTIZED
from superposed.types import EngineError

BYTES = {"fp32": 4.0, "bf16": 2.0, "int8": 1.0, "int4": 0.625}  # a weight's bytes, a precision's
EMBEDDING_BYTES = 2.0  # a quantized runner's embedding rows are bf16


class ModelTooBig(EngineError):
    """The model's weights need more memory than the machine has free."""


@dataclass(frozen=True)
class Footprint:
    """A model's weights as a runner keeps them, against the memory free for them."""

    parameters: int
    resident: int  # bytes the runner's weights take, about
    how: str  # in which precision, in words
    free: int | None  # bytes free on the device (None: unknown)

    def fits(self) -> bool:
        return self.free is None or self.resident <= self.free

    def sentence(self) -> str:
        """ "0.49B parameters, about 0.6 GB of weights in int4 (embedding bf16), 12.3 GB free"."""
        free = "free memory unknown" if self.free is None else f"{gb(self.free)} free"
        count = self.parameters
        count_words = f"{count / 1e9:.2f}B" if count >= 1e8 else f"{count / 1e6:.1f}M"
        return f"{count_words} parameters, about {gb(self.resident)} of weights {self.how}, {free}"


def resident_bytes(model: Any, kind: str, precision: str, dtype: torch.dtype) -> tuple[int, str]:
    """(bytes, in words how) that runner ``kind`` ("hf" or "fast") keeps of ``model``'s
    weights (a skeleton on the meta device will do: only the shapes are read)."""
    total = sum(p.numel() for p in model.parameters())  # a tied head counts once
    if kind == "hf":
        size = torch.empty(0, dtype=dtype).element_size()
        return total * size, f"in {str(dtype).removeprefix('torch.')}"
    embedding = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    head_weight = None if head is None else head.weight
    tied = head_weight is embedding
    rest = total - embedding.numel() - (0 if tied or head_weight is None else head_weight.numel())
    per = BYTES[precision]
    if precision not in QUANTIZED:
        return int(total * per), f"in {precision}"
    size = rest * per + embedding.numel() * EMBEDDING_BYTES
    if head_weight is not None:  # the int4 copy, and an untied head's own bf16 rows
        size += head_weight.numel() * (BYTES["int4"] + (0 if tied else EMBEDDING_BYTES))
    return int(size), f"in {precision} (embedding bf16)"


def free_bytes(device: torch.device) -> int | None:
    """Memory free for new weights on ``device``: a GPU's free memory, else the system's
    available memory (None where it cannot be read)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except (ImportError, OSError):
        return None


def footprint(
    model: Any, kind: str, precision: str, dtype: torch.dtype, device: torch.device
) -> Footprint:
    """The footprint of ``model`` on runner ``kind`` in ``precision`` (fast) or ``dtype`` (hf)."""
    resident, how = resident_bytes(model, kind, precision, dtype)
    parameters = sum(p.numel() for p in model.parameters())
    return Footprint(parameters, resident, how, free_bytes(device))


def check_fits(name: str, size: Footprint) -> None:
    """ModelTooBig, with the numbers and what to do, where ``size`` does not fit."""
    if not size.fits():
        raise ModelTooBig(
            f"model {name!r} does not fit: {size.sentence()}. Pick a smaller model, close "
            "other programs, or use precision int4 (the smallest)"
        )
