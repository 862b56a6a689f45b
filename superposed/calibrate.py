"""Which decode kernels and how many threads suit this CPU, measured once (issue 39).

A decode step of a small model reads every weight once, so its speed depends on how fast
this CPU's kernels unpack and multiply them, and on how many cores it has free: int4 and int8
weight-only matmuls, and 1..min(affinity cores, MAX_THREADS) threads, differ from one CPU to
the next (AVX2, AVX-512, AMX), not from one model to the next. So the calibration times a
decode step's matmuls for a layer of the model's shapes, with random weights, for each
candidate, and keeps the choice on disk with the model cache, keyed by the CPU's flags, its
cores and torch's version: once per CPU, about a second (packing the random int4 weights is
most of it; 1-5 s on this project's shared 2-core machine while other tests ran). One
layer's weights stay in the CPU's caches, so this times the kernels' arithmetic, not the
memory traffic of a whole step, which favours int4 (half int8's bytes): MARGIN keeps int4
unless int8's arithmetic is clearly faster. The KV cache's dtype is measured apart
(quant.kv_dtype). ``precision`` and ``threads`` settings force either choice.

The policy (``choose``) keeps today's choice, int4 on one thread, unless another candidate is
faster by more than MARGIN: a new machine gets what was measured, a noisy measurement does
not move a default for a few percent. On this project's shared 2-core AMD EPYC (AVX-512
with BF16, no AMX) int4 and int8 timed within noise of each other (0.23-0.51 ms a layer),
so it keeps int4; two threads timed anywhere from 0.6x to 500x one thread's time while
other processes ran, so its thread count depends on the moment, and ``threads`` stays 1 by
default (0 asks for the calibrated count).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from superposed.model import cache_dir
from superposed.quant import Linear, quantize

log = logging.getLogger(__name__)

CANDIDATES = ("int4", "int8")  # the CPU decode precisions the quality tests hold to int4's bar
DEFAULT = ("int4", 1)  # today's choice, kept unless another is faster by MARGIN
MAX_THREADS = 8  # a decode step of a small model gains little beyond
MARGIN = 0.1  # another choice must save more than this share of the default's time
# Below this many ms a layer the timings are the calls' overhead, not the kernels (a tiny
# test model's: 0.03-0.06 ms, which flipped int4/int8 from run to run): keep the default.
MIN_MS = 0.1
LAYERS = 1  # layers of random weights timed per candidate
REPEATS = 9  # timings per candidate (the best counts)
VERSION = 1  # of the calibration's method: a change measures again


@dataclass(frozen=True)
class Calibration:
    """The kernels and threads chosen for this CPU, and the timings they were chosen by."""

    precision: str
    threads: int
    ms: dict[str, float]  # "precision@threads" -> ms of LAYERS layers' matmuls, one row


def thread_counts(cores: int | None = None) -> list[int]:
    """1..min(cores, MAX_THREADS); cores: those this process may run on (affinity)."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        cores = cores or os.cpu_count() or 1
    return list(range(1, min(cores, MAX_THREADS) + 1))


def choose(ms: dict[tuple[str, int], float]) -> tuple[str, int]:
    """The (precision, threads) to use from the timings of each: the fastest, unless it
    saves no more than MARGIN of the default's time or the default took under MIN_MS (then
    the default, where it was timed);
    among choices within MARGIN of the fastest, the fewest threads (they are the user's)."""
    best = min(ms.values())
    if DEFAULT in ms and (ms[DEFAULT] < MIN_MS or ms[DEFAULT] <= best * (1 + MARGIN)):
        return DEFAULT
    near = [choice for choice, t in ms.items() if t <= best * (1 + MARGIN)]
    return min(near, key=lambda c: (c[1], ms[c]))


def layer_shapes(config: Any) -> list[tuple[int, int]]:
    """A Llama-family layer's fused matmuls [N, K]: q/k/v, out, gate/up, down."""
    hidden = int(config.hidden_size)
    heads = int(config.num_attention_heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(config, "head_dim", None) or hidden // heads)
    inter = int(config.intermediate_size)
    return [
        ((heads + 2 * kv_heads) * head_dim, hidden),
        (hidden, heads * head_dim),
        (2 * inter, hidden),
        (hidden, inter),
    ]


@functools.lru_cache(maxsize=len(CANDIDATES))
def _random_layers(
    shapes: tuple[tuple[int, int], ...], precision: str
) -> tuple[list[Linear], list[torch.Tensor]]:
    """LAYERS layers of ``shapes`` with random weights in ``precision``, and an input row
    for each matmul; built once per precision (int4's packing took most of a second here)."""
    generator = torch.Generator().manual_seed(0)
    every = list(shapes) * LAYERS
    linears = [
        quantize(torch.randn(n, k, generator=generator) * 0.02, None, precision) for n, k in every
    ]
    return linears, [torch.randn(1, k, generator=generator) for _, k in every]


def time_matmuls(shapes: list[tuple[int, int]], precision: str, threads: int) -> float:
    """The best ms of REPEATS timings of LAYERS layers of matmuls of ``shapes`` for one
    row, in ``precision`` on ``threads`` threads (random weights). The best, not the median:
    on a shared machine a median moved with the other processes (two threads once 0.19 ms,
    once 160 ms), and which kernel is faster should not."""
    linears, inputs = _random_layers(tuple(shapes), precision)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for linear, x in zip(linears, inputs, strict=True):
            linear(x)  # the first call sets up the kernel
        times = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            for linear, x in zip(linears, inputs, strict=True):
                linear(x)
            times.append((time.perf_counter() - start) * 1e3)
    finally:
        torch.set_num_threads(previous)
    return min(times)


def cpu_key(shapes: list[tuple[int, int]], counts: list[int]) -> str:
    """What a calibration depends on: the CPU's flags, the cores offered, torch, the shapes."""
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "model name")):
                flags += line
    except OSError:
        flags = platform.processor()
    text = f"{VERSION} {flags} {counts} {torch.__version__} {shapes}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def measure(
    shapes: list[tuple[int, int]],
    counts: list[int],
    timer: Callable[[list[tuple[int, int]], str, int], float] = time_matmuls,
) -> Calibration:
    """Time every candidate, interleaved (precision by precision at each thread count)."""
    ms = {(p, t): timer(shapes, p, t) for t in counts for p in CANDIDATES}
    _random_layers.cache_clear()  # the random weights go with the measurement
    precision, threads = choose(ms)
    return Calibration(precision, threads, {f"{p}@{t}": round(v, 3) for (p, t), v in ms.items()})


@functools.cache
def calibrated(config_json: str, directory: Path | None = None) -> Calibration:
    """The calibration for a model of ``config_json``'s shapes: from the cache directory
    where this CPU was measured before, else measured now and saved there."""
    from transformers import PretrainedConfig

    config = PretrainedConfig.from_dict(json.loads(config_json))
    shapes, counts = layer_shapes(config), thread_counts()
    path = (directory or cache_dir()) / "calibration" / f"{cpu_key(shapes, counts)}.json"
    try:
        return Calibration(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        pass  # not measured here yet (or an unreadable file: measured again)
    start = time.perf_counter()
    result = measure(shapes, counts)
    log.info(
        "calibrated the decode kernels in %.0f ms: %s on %d thread(s) (%s)",
        (time.perf_counter() - start) * 1e3,
        result.precision,
        result.threads,
        result.ms,
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        partial.write_text(json.dumps(asdict(result)))
        partial.replace(path)
    except OSError as error:  # a read-only cache: measured again next time
        log.warning("could not save the calibration to %s: %s", path, error)
    return result
