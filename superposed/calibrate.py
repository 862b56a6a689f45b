"""Which decode kernels and how many threads suit this CPU, measured once (issue 39).

A decode step of a small model reads every weight once, so its speed depends on how fast
this CPU's kernels unpack and multiply them, and on how many cores it has free: int4 and int8
weight-only matmuls, and 1..min(affinity cores, MAX_THREADS) threads, differ from one CPU to
the next (AVX2, AVX-512, AMX), not from one model to the next. So the calibration times
every matmul of a decode step of the model's shapes (all layers: one layer's weights stay
in the caches, and a step streams them all from memory, where int4 reads half int8's
bytes) on weights made in the kernels' packed layout, for each candidate, interleaved, and
keeps the choice on disk with the model cache, keyed by the CPU's flags, its cores and
torch's version. Once per CPU, bounded by the climb and BUDGET_S (below); what it cost
and chose on this project's machine is in ``bench/results/cpu_anchor.md``, measured in
the same run as the steps it chose between (``python -m bench.cpu_anchor``).
The KV cache's dtype is measured apart (quant.kv_dtype). ``precision`` and
``threads`` settings force either choice.

The policy (``choose``) keeps today's choice, int4 on one thread, unless another candidate is
faster by more than MARGIN: a new machine gets what was measured, a noisy measurement does
not move a default for a few percent. On a shared machine two threads' timings move with
whatever else runs, so the thread count measured depends on the moment, and ``threads``
stays 1 by default (0 asks for the calibrated counts). The int4 and int8 timings behind
the choice are cpu_anchor.md's calibration line; why int8 loses on AVX2 and AVX-512 is
``bench/results/kernel_choices.md``.

Prefill and decode get a thread count each: a decode step streams the weights (memory
bound: a second core adds bandwidth only while the first one's kernel is compute bound, as
int4's is on AVX2), a prefill multiplies dense matrices (compute bound: cores add FLOPs).
So the prefill's count is timed apart, on one layer's dense matmuls of PREFILL_ROWS rows
(``time_prefill``), and each count is the fewest threads within MARGIN of its phase's
fastest (``fewest_threads``). Thread counts are tried upwards and the climb stops at the
first count that does not save MARGIN over the best so far (a laptop's 8 cores cost what
the counts up to its best cost, not all 8), and at BUDGET_S.
"""

from __future__ import annotations

import dataclasses
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
from superposed.quant import INT4_GROUP, prefill_dtype, usable_cores

log = logging.getLogger(__name__)

CANDIDATES = ("int4", "int8")  # the CPU decode precisions the quality tests hold to int4's bar
DEFAULT = ("int4", 1)  # today's choice, kept unless another is faster by MARGIN
MAX_THREADS = 8  # a decode step of a small model gains little beyond
MARGIN = 0.1  # another choice must save more than this share of the default's time
# Below this many ms a step the timings are the calls' overhead, not the kernels (a tiny
# test model's: under 0.1 ms, which flipped int4/int8 from run to run): keep the default.
MIN_MS = 0.5
REPEATS = 2  # timings per candidate and round (the best counts)
ROUNDS = 2  # rounds over all candidates
PREFILL_ROWS = 128  # the rows of the prefill timing's matmuls (a chunk's compute-bound kind)
# Thread counts past this much measuring are not tried (a busy machine's timings stretch:
# the first calibration here took 7-15 s while tests ran); the counts measured still choose.
BUDGET_S = 2.0
VERSION = 2  # of the calibration's method: a change measures again


@dataclass(frozen=True)
class Calibration:
    """The kernels and threads chosen for this CPU, and the timings they were chosen by."""

    precision: str
    threads: int  # a decode step's
    ms: dict[str, float]  # "precision@threads" -> ms of a step's matmuls, one row
    prefill_threads: int = 1  # a prefill's (its forwards of many tokens)
    prefill_ms: dict[str, float] = dataclasses.field(default_factory=dict)  # "threads" -> ms


def thread_counts(cores: int | None = None) -> list[int]:
    """1..min(cores, MAX_THREADS); cores: those this process may run on (affinity)."""
    cores = usable_cores() if cores is None else cores
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


def fewest_threads(ms: dict[int, float]) -> int:
    """The fewest threads whose time is within MARGIN of the fastest (the cores are the
    user's: a count that saves a few percent is not worth them)."""
    best = min(ms.values())
    return min(t for t, v in ms.items() if v <= best * (1 + MARGIN))


def layer_shapes(config: Any) -> list[tuple[int, int]]:
    """A Llama-family decode step's fused matmuls [N, K]: q/k/v, out, gate/up, down of
    every layer."""
    hidden = int(config.hidden_size)
    heads = int(config.num_attention_heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(config, "head_dim", None) or hidden // heads)
    inter = int(config.intermediate_size)
    layer = [
        ((heads + 2 * kv_heads) * head_dim, hidden),
        (hidden, heads * head_dim),
        (2 * inter, hidden),
        (hidden, inter),
    ]
    return layer * int(config.num_hidden_layers)


def _random_matmul(n: int, k: int, precision: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The decode kernel of ``precision`` (quant.Int4Linear's or Int8Linear's aten op) on
    weights [N, K] made in its packed layout directly, of one repeated byte: the integer
    values do not change the kernel's time, and packing real ones took most of a second a
    layer here (making random ones, seconds for the model). Filled, not left as allocated:
    untouched pages all read the kernel's one zero page, from the caches (int8 measured
    2.5x faster so)."""
    if precision == "int4" and n % 16 == 0 and k % INT4_GROUP == 0:  # else int8 (quantize)
        packed = torch.full((n, k // 2), 0x5A, dtype=torch.uint8)
        zeros = torch.full((k // INT4_GROUP, n, 2), 0.01, dtype=torch.bfloat16)
        return lambda x: torch.ops.aten._weight_int4pack_mm_for_cpu(x, packed, INT4_GROUP, zeros)
    q = torch.full((n, k), 0x5A, dtype=torch.int8)
    scale = torch.full((n,), 0.01, dtype=torch.bfloat16)
    return lambda x: torch._weight_int8pack_mm(x, q, scale)


@functools.lru_cache(maxsize=len(CANDIDATES))
def _random_layers(
    shapes: tuple[tuple[int, int], ...], precision: str
) -> tuple[list[Callable[[torch.Tensor], torch.Tensor]], list[torch.Tensor]]:
    """Every matmul of a decode step (``shapes``: all layers') on random weights in
    ``precision``, and a bf16 input row for each; built once per precision. All layers, not
    one: one layer's weights stay in the CPU's caches, and a step streams them all from
    memory (int4 half int8's bytes)."""
    generator = torch.Generator().manual_seed(0)
    matmuls = [_random_matmul(n, k, precision) for n, k in shapes]
    return matmuls, [torch.randn(1, k, generator=generator).bfloat16() for _, k in shapes]


def time_matmuls(shapes: list[tuple[int, int]], precision: str, threads: int) -> float:
    """The best ms of REPEATS timings of the matmuls of ``shapes`` for one row, in
    ``precision`` on ``threads`` threads (random weights). The best, not the median:
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


def time_prefill(shapes: list[tuple[int, int]], threads: int) -> float:
    """The best ms of REPEATS timings of one layer's matmuls (the first four of ``shapes``)
    for PREFILL_ROWS rows on dense weights in ``prefill_dtype()`` (what a prefill runs on:
    prefill.py), on ``threads`` threads. One layer is enough: a prefill's matmuls are
    compute bound, its weights read once for many rows."""
    dtype = prefill_dtype()
    generator = torch.Generator().manual_seed(0)
    layer = [
        (torch.randn(PREFILL_ROWS, k, generator=generator).to(dtype), torch.randn(n, k).to(dtype))
        for n, k in shapes[:4]
    ]
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for x, w in layer:
            torch.nn.functional.linear(x, w)  # the first call sets up the kernel
        times = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            for x, w in layer:
                torch.nn.functional.linear(x, w)
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
    prefill_timer: Callable[[list[tuple[int, int]], int], float] = time_prefill,
    clock: Callable[[], float] = time.perf_counter,
) -> Calibration:
    """Time every candidate at each thread count ROUNDS times, interleaved (precision by
    precision, the prefill's matmuls beside them, then again), keeping each one's best:
    another process's burst then slows every candidate alike instead of one.

    The counts go upwards; the climb stops after a count whose decode and prefill timings
    both saved no more than MARGIN over the best so far, or once BUDGET_S has passed
    (``clock``: seconds)."""
    start = clock()
    ms: dict[tuple[str, int], float] = {}
    prefill: dict[int, float] = {}
    for t in counts:
        for _ in range(ROUNDS):
            for p in CANDIDATES:
                ms[(p, t)] = min(ms.get((p, t), float("inf")), timer(shapes, p, t))
            prefill[t] = min(prefill.get(t, float("inf")), prefill_timer(shapes, t))
        if (t > counts[0] and not _gained(ms, prefill, t)) or clock() - start > BUDGET_S:
            break
    _random_layers.cache_clear()  # the random weights go with the measurement
    precision, threads = choose(ms)
    return Calibration(
        precision,
        threads,
        {f"{p}@{t}": round(v, 3) for (p, t), v in ms.items()},
        fewest_threads(prefill),
        {str(t): round(v, 3) for t, v in prefill.items()},
    )


def _gained(ms: dict[tuple[str, int], float], prefill: dict[int, float], t: int) -> bool:
    """Whether ``t`` threads saved more than MARGIN over fewer, for decode or prefill."""
    fewer = [c for c in prefill if c < t]
    decode_before = min(v for (_, c), v in ms.items() if c < t)
    decode_now = min(v for (_, c), v in ms.items() if c == t)
    prefill_before = min(prefill[c] for c in fewer)
    return decode_now < decode_before * (1 - MARGIN) or prefill[t] < prefill_before * (1 - MARGIN)


@functools.cache
def calibrated(config_json: str, directory: Path | None = None) -> Calibration:
    """The calibration for a model of ``config_json``'s shapes: from the cache directory
    where this CPU was measured before, else measured now and saved there."""
    from transformers import PretrainedConfig

    config = PretrainedConfig.from_dict(json.loads(config_json))
    shapes, counts = layer_shapes(config), thread_counts()
    path = (directory or cache_dir()) / "calibration" / f"{cpu_key(shapes, counts)}.json"
    try:
        text = path.read_text()
    except OSError:
        text = None  # not measured here yet
    if text is not None:
        saved, problem = read_calibration(text, max(counts))
        if saved is not None:
            return saved
        log.warning("ignored the calibration %s (%s): measuring again", path, problem)
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


def read_calibration(text: str, max_threads: int) -> tuple[Calibration | None, str]:
    """A saved calibration, checked field by field, or None and what is wrong with it.

    The file is a hint, not an order: it is obeyed as written, so a damaged or hand-edited
    one (issue 51) took the server down: ``"threads": 2.5`` or ``"2"`` raised in
    ``set_num_threads``, ``100000`` crashed libgomp with SIGSEGV at every start, and an
    unknown precision kept the model from loading at all. ``max_threads``: the most this
    CPU's calibration may choose (thread_counts)."""
    try:
        data = json.loads(text)
    except ValueError as error:
        return None, f"not JSON: {error}"
    if not isinstance(data, dict):
        return None, "not a JSON object"
    fields = {field.name for field in dataclasses.fields(Calibration)}
    if unknown := sorted(set(data) - fields):
        return None, f"unknown fields {unknown}"
    problems = [
        _one_of("precision", data.get("precision"), CANDIDATES),
        _count("threads", data.get("threads"), max_threads),
        _count("prefill_threads", data.get("prefill_threads", 1), max_threads),
        _timings("ms", data.get("ms")),
        _timings("prefill_ms", data.get("prefill_ms", {})),
    ]
    if problem := next((p for p in problems if p), None):
        return None, problem
    return Calibration(**data), ""


def _one_of(name: str, value: Any, allowed: tuple[str, ...]) -> str | None:
    return None if value in allowed else f"{name} {value!r} is not one of {', '.join(allowed)}"


def _count(name: str, value: Any, most: int) -> str | None:
    """A thread count: a whole number (not a bool, not a string) in 1..most."""
    if type(value) is int and 1 <= value <= most:
        return None
    return f"{name} {value!r} is not a whole number in 1..{most}"


def _timings(name: str, value: Any) -> str | None:
    """A {name: milliseconds} table of finite non-negative numbers."""
    if isinstance(value, dict) and all(
        isinstance(k, str) and type(v) in (int, float) and 0 <= v < float("inf")
        for k, v in value.items()
    ):
        return None
    return f"{name} {value!r} is not a table of milliseconds"
