"""Which weights a forward of n new tokens runs on, and how long a prefill's forwards are.

A decode step reads every weight once for one row, so it is bound by the weights' bytes and
the quantized (int8/int4) kernels win there; a long prefill is bound by the matmuls, and on
the CPU the int4 kernels lose to dense ones from a few dozen rows on. So a runner with
quantized decode weights runs its longer forwards on dense ones. ``PrefillPlan.choose``
picks one of three ways, each used by the product:

- ``shared``: fp32 and bf16 runners; their decode weights are already dense.
- ``dequantized`` (the default for int8/int4, i.e. the default on a CPU): each layer's
  decode weights de-quantized as a forward reaches it and freed after it (DequantizedBlocks:
  a few MB at a time; where a core is spare, the next layer's on it meanwhile). It keeps
  the server within issue 14's memory target (bench/results/footprint.md: no prefill copy,
  649 MiB at the peak of a 1,500-token prefill) at some prefill speed
  (bench/results/kernels.md: 256 tokens 242 ms against 181 ms with a copy).
- ``copy`` (the ``prefillCopy`` setting): a dense copy of all the layers beside the decode
  ones (200 MB more on the default model), for the fastest prefill (kernels.md: 128 tokens
  91 ms against 152; bench/results/lsp_latency_prefill_copy.md, the server with it).

The dense weights are bf16 where the CPU's bf16 matmuls are fast (AVX-512 BF16 or AMX:
kernels.md's bf16 F.linear) and fp32 where they are emulated (AVX2: 43x slower,
bench/results/prefill_dtype.md); quant.prefill_dtype probes which.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import overload

import torch

from superposed.blocks import Block
from superposed.options import QUANTIZED
from superposed.quant import Linear, dequantized, prefill_dtype, usable_cores

# A typed word, a warm-up chunk's tail: forwards of up to this many new tokens run on the
# decode weights in every plan, and through the compiled step where there is one. The int
# kernels beat bf16 for a few rows (bench/results/kernels.md: one row through the 30 layers,
# int4 4.67 ms, bf16 14.72); bf16's dense matmuls win once a forward has many more rows (no
# committed result says at how many).
TYPED_TOKENS = 4
CHUNK = 512  # tokens per prefill forward: bounds the activations' memory
# ... with the layers de-quantized per forward: fewer, longer forwards de-quantize less often
# (SDPA's CPU kernel holds no [T, L] attention matrix, masked or causal); longer forwards
# hold more activations at once, so the chunk stops where a longer one stopped gaining (a
# choice made by one unsaved measurement: no committed result compares chunk sizes).
DEQUANTIZED_CHUNK = 1024
# De-quantizing every layer costs a fixed time whatever the length, and the int4 kernels cost
# more per token than the de-quantized forward, so they win on short prompts and lose on long
# ones; the crossing is where this is set (``python -m bench.kernels --prefill-tokens 64 96``
# timed lengths on either side; the committed kernels.md has 128, 256 and 1,500 tokens; the
# script is in history: bench/results/README.md).
DEQUANTIZED_DECODE_TOKENS = 80
# A forward of up to this many tokens (a first window, a jump's) has the next layer
# de-quantized on a spare core meanwhile (DequantizedBlocks.__iter__); a longer one (a
# warm-up's chunks, in the background) one layer after another, as before: the layer held
# ahead adds to the peak, which a long prefill's activations already bring to the 650 MiB
# target (bench/results/footprint.md: 649 MiB at a 1,500-token prefill).
AHEAD_TOKENS = 256


@dataclass
class Weights:
    """All layers' weights in one precision, and the output head."""

    blocks: Sequence[Block]
    norm: torch.Tensor  # [H] fp32
    lm_head: Linear  # H -> V


class DequantizedBlocks(Sequence[Block]):
    """Quantized blocks read as dense ones: each block read is de-quantized then (a few MB
    for a small model), so a forward that walks the layers holds one layer's dense weights at
    a time rather than a dense copy of them all."""

    def __init__(self, blocks: Sequence[Block], ahead: bool = True) -> None:
        self.blocks = blocks
        self.ahead = ahead  # the next block de-quantized on a spare core (__iter__)

    def one_after_another(self) -> DequantizedBlocks:
        """The same blocks, each de-quantized on the forward's thread as it reaches it."""
        return DequantizedBlocks(self.blocks, ahead=False)

    def __len__(self) -> int:
        return len(self.blocks)

    @overload
    def __getitem__(self, index: int) -> Block: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Block]: ...

    def __getitem__(self, index: int | slice) -> Block | Sequence[Block]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        block = self.blocks[index]
        return dataclasses.replace(
            block,
            qkv=dequantized(block.qkv),
            out=dequantized(block.out),
            gate_up=dequantized(block.gate_up),
            down=dequantized(block.down),
        )

    def __iter__(self) -> Iterator[Block]:
        """The blocks in order; where a core is spare (torch runs on fewer threads than this
        process may use), each next one de-quantized on it while the forward runs the one
        before: a layer's de-quantization is a few memory-bound elementwise ops, a quarter of
        a first window's prefill on one thread (bench/results/prefill_parts.md). Where the
        other core is busy, the forward waits for it: no slower than one after the other, as
        an OpenMP team with a preempted thread is (lsp_server/settings.py's ``threads``)."""
        spare = torch.get_num_threads() < usable_cores()
        if not (self.ahead and spare and len(self) >= 2):
            yield from (self[i] for i in range(len(self)))
            return
        ahead = _ahead().submit(self.__getitem__, 0)
        try:
            for i in range(len(self)):
                block = ahead.result()
                if i + 1 < len(self):
                    ahead = _ahead().submit(self.__getitem__, i + 1)
                yield block
        finally:  # a forward stopped early: the block under way is dropped
            ahead.cancel()


_AHEAD: ThreadPoolExecutor | None = None


def _ahead() -> ThreadPoolExecutor:
    """The thread that de-quantizes the next block (DequantizedBlocks.__iter__), made once."""
    global _AHEAD
    if _AHEAD is None:
        _AHEAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dequantize")
    return _AHEAD


@dataclass
class PrefillPlan:
    """The weights of a forward by its number of new tokens, and a prefill's chunk size.

    The head (one row per sequence) is always the decode weights' (``weights``' lm_head is
    the decode one): a second dense head would be as large as the layers on Gemma 3.
    """

    decode: Weights
    dense: Weights  # what a forward of more than ``decode_tokens`` new tokens runs on
    decode_tokens: int  # forwards of up to this many new tokens run on ``decode``
    chunk: int  # a prefill runs in forwards of at most this many tokens
    # torch's threads for a prefill of more than ``decode_tokens`` tokens (the calibration's
    # prefill count, calibrate.py); None: the caller's, as for decode steps.
    threads: int | None = None

    def weights(self, tokens: int) -> Weights:
        """The weights a forward of ``tokens`` new positions runs on: past ``AHEAD_TOKENS``,
        de-quantized one block after another."""
        if tokens <= self.decode_tokens:
            return self.decode
        if tokens > AHEAD_TOKENS and isinstance(self.dense.blocks, DequantizedBlocks):
            return dataclasses.replace(self.dense, blocks=self.dense.blocks.one_after_another())
        return self.dense

    @contextlib.contextmanager
    def threading(self, tokens: int) -> Iterator[None]:
        """torch's threads set to ``threads`` while a prefill of ``tokens`` runs, where it
        runs on the dense weights (compute bound: calibrate.py times the phases apart); the
        caller's count again afterwards."""
        previous = torch.get_num_threads()
        wanted = self.threads if tokens > self.decode_tokens else None
        if wanted is None or wanted == previous:
            yield
            return
        torch.set_num_threads(wanted)
        try:
            yield
        finally:
            torch.set_num_threads(previous)

    @classmethod
    def choose(
        cls, decode: Weights, precision: str, copy: bool, build: Callable[[str], Weights]
    ) -> PrefillPlan:
        """The plan for ``decode`` weights in ``precision`` (see the module docstring);
        ``copy``: the prefill copy; build(precision) builds the layers in ``precision``
        around the decode head."""
        if precision not in QUANTIZED:
            return cls(decode, decode, TYPED_TOKENS, CHUNK)
        if copy:
            dense = build("bf16" if prefill_dtype() == torch.bfloat16 else "fp32")
            return cls(decode, dense, TYPED_TOKENS, CHUNK)
        blocks = DequantizedBlocks(decode.blocks)
        dense = dataclasses.replace(decode, blocks=blocks)
        return cls(decode, dense, DEQUANTIZED_DECODE_TOKENS, DEQUANTIZED_CHUNK)
