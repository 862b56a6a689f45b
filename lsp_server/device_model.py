"""The default model by device (issue 25): Gemma 3 270M on CUDA where a device run measured
its request there faster than the CPU default's, SmolLM2-135M everywhere else.

Why: on a GPU, Gemma 3 270M may cost what SmolLM2 costs on a CPU, with better drafts (the
models section of docs/benchmarks.md: +3.8 edit-similarity points on the replay). The rule:
Gemma on CUDA if its measured request p50 there is under the CPU default's (SmolLM2, int4,
one thread) for the same request. The numbers come from the device script (bench/gpu.py),
committed as ``bench/results/gpu-models.json``; without that file (or with a malformed one,
or without Gemma installed) the default stays SmolLM2, and on a CPU it always does.

Only the default follows the device: a ``model`` the user sets is kept as it is.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from superposed.embedded import DEFAULT_MODEL, GEMMA3

log = logging.getLogger(__name__)

# The device script's measurements (SUPERPOSED_GPU_MODELS overrides the path).
GPU_MODELS = Path(__file__).resolve().parents[1] / "bench" / "results" / "gpu-models.json"
GPU_MODELS_ENV = "SUPERPOSED_GPU_MODELS"


@dataclass(frozen=True)
class RequestTimes:
    """What the rule compares: request p50s (ms) of the same request, measured in one run."""

    gemma_cuda_ms: float  # Gemma 3 270M on the GPU, bf16 with CUDA graphs
    cpu_default_ms: float  # the CPU default: SmolLM2-135M, int4, one thread


def cuda_default(times: RequestTimes | None) -> str:
    """The default model on CUDA for these measurements (None: none were made)."""
    if times is not None and times.gemma_cuda_ms < times.cpu_default_ms:
        return GEMMA3.name
    return DEFAULT_MODEL


def read_times(path: Path) -> RequestTimes | None:
    """The rule's numbers from a device results file (bench/gpu.py's gpu-models.json);
    None where there is none, or it lacks them (logged)."""
    if not path.is_file():
        return None
    try:
        measured = json.loads(path.read_text())
        if measured.get("dry_run"):  # bench.gpu --device cpu: a test of the script, no numbers
            raise ValueError("a dry run's file")
        p50 = measured["request_p50_ms"]
        return RequestTimes(float(p50[GEMMA3.name]["cuda"]), float(p50[DEFAULT_MODEL]["cpu"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        log.warning("ignoring the device measurements in %s (%r): default model kept", path, err)
        return None


def _on_cuda(device: str) -> bool:
    if device not in ("auto", "cuda") and not device.startswith("cuda:"):
        return False
    import torch

    return bool(torch.cuda.is_available())


def device_default_model(device: str, path: Path | None = None) -> str:
    """The default model for the ``device`` setting (auto | cpu | cuda | mps | cuda:N)."""
    if not _on_cuda(device):
        return DEFAULT_MODEL
    path = path or Path(os.environ.get(GPU_MODELS_ENV) or GPU_MODELS)
    chosen = cuda_default(read_times(path))
    if chosen == GEMMA3.name and importlib.util.find_spec(GEMMA3.package) is None:
        log.info("Gemma 3 270M would be the default on this GPU but is not installed")
        return DEFAULT_MODEL
    if chosen != DEFAULT_MODEL:
        log.info("default model on CUDA: %s (measured faster than the CPU default: %s)",
                 chosen, path)  # fmt: skip
    return chosen
