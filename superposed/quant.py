"""Weight-only quantized linear layers for the fast runner: bf16 activations, int8 or int4 weights.

Decoding one token reads every weight once, so on a CPU a decode step costs about the bytes
of the weights: 4-bit weights are read 4x faster than bf16 ones. The matmuls are PyTorch's own
CPU kernels (``torch._weight_int8pack_mm``, ``torch.ops.aten._weight_int4pack_mm_for_cpu``).

Why not torchao: torchao 0.18 (the release for torch 2.13) dropped its CPU int4 layout
("opaque"; only CUDA layouts remain) and its int8 weight-only tensor ran a 576x1536 matmul
6.6x slower than ``_weight_int8pack_mm`` here (653 vs 99 us, one thread). Both aten ops are
private: torch is pinned (==2.13.0) and tests/test_fast_runner_quant.py checks them against
a plain dequantized matmul, so an upgrade that changes them fails loudly.

Why not int8 activations (fbgemm's dynamic linear, ``torch.ops.quantized.linear_dynamic``):
its one-row matmuls are the fastest, but one scale for a whole activation row is not
faithful on this model, and torch.export does not trace it. Measured on the AVX2 path, one
thread, per-channel weight scales (bench/results/kernel_choices.md, ``python -m
bench.kernel_choices``): the 30 layers' matmuls took 11.4 ms with 7-bit activations against
16.7 for int4. AVX2 has no VNNI, and fbgemm's u8 x s8 products (vpmaddubsw) saturate int16
unless the activations keep 7 bits (``reduce_range``): with 8 bits, teacher-forced greedy
agreement with the reference was 0.0, with 7 bits 0.65, against 0.99 for int4. The rest is
the activations' outliers: one scale for the whole input of down_proj (silu(gate) * up) left
its outputs 0.50 off (relative norm, the worst layer, 256 rows) where int4 weights are 0.003
off; with down_proj in int4 and the others dynamic, agreement 0.81. The eager step gained
about 8% (35.2 against 38.1 ms): not enough for a kernel that changes the drafts. A 256-token
prefill through it (int8 prefill) ran 1.5x faster than the dense fp32 one (941 against
1,436 ms) and left the next 12 greedy tokens' agreement with the dense prefill's at 0.71:
prefills stay dense.
"""

from __future__ import annotations

import functools
import os
import time
from typing import Protocol

import torch
import torch.nn.functional as F

INT4_GROUP = 32  # weights per int4 scale/zero pair
_INT4_N_MULTIPLE = 16  # the CPU int4 packing needs output features divisible by 16
# A CPU whose bf16 matmul takes more than this many times the fp32 one's time emulates bf16:
# its long prefills run on fp32 weights (prefill_dtype). With AVX-512 BF16 or AMX bf16 is the
# faster one; on AVX2 it measured 45x slower.
BF16_SLOWER_AT_MOST = 2.0
_QUANTIZE_ROWS = 4096  # rows quantized at a time (a multiple of the packing's row block)


class Linear(Protocol):
    """x [..., K] -> [..., N]; x may be any float dtype, the output has ``out_dtype``."""

    out_dtype: torch.dtype

    def __call__(self, x: torch.Tensor) -> torch.Tensor: ...


class DenseLinear:
    """A plain linear layer with its weight in ``dtype`` (fp32 or bf16).

    One row (a batch-1 decode step) goes through ``torch.mv``: for bf16 weights this CPU's
    mv streams them at about 10 GB/s against 6 GB/s for ``F.linear`` (bench/results/kernels.md).
    """

    def __init__(
        self,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        dtype: torch.dtype,
        keep_layout: bool = False,
    ) -> None:
        """keep_layout: use ``weight`` as it lies, not copied into rows; for many rows (a
        prefill) F.linear multiplies by a transposed view as fast as by [N, K] rows."""
        weight = weight.detach().to(dtype)  # [N, K]
        self.weight = weight if keep_layout else weight.contiguous()
        self.bias = None if bias is None else bias.detach().to(dtype)
        self.out_dtype = dtype

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(self.out_dtype)
        if x.numel() != x.shape[-1]:
            return F.linear(x, self.weight, self.bias)
        out = torch.mv(self.weight, x.reshape(-1))  # [N]
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], out.shape[0])


class Int8Linear:
    """Symmetric per-output-channel int8 weights; bf16 activations and output."""

    out_dtype = torch.bfloat16

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        w = weight.detach().float()  # [N, K]
        scale = w.abs().amax(dim=1).clamp(min=1e-8) / 127  # [N]
        self.qweight = torch.round(w / scale[:, None]).clamp(-128, 127).to(torch.int8)  # [N, K]
        self.scale = scale.to(torch.bfloat16)  # [N]
        self.bias = None if bias is None else bias.detach().to(torch.bfloat16)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1]).to(torch.bfloat16)  # [M, K]
        out = torch._weight_int8pack_mm(flat, self.qweight, self.scale)  # [M, N]
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], out.shape[-1])

    def dequantized(self) -> DenseLinear:
        """The same weights in bf16, as the kernel sees them (in ``prefill_dtype()``)."""
        weight = self.qweight.float() * self.scale.float()[:, None]  # [N, K]
        return DenseLinear(weight.to(torch.bfloat16), self.bias, prefill_dtype())


def int4_fits(weight: torch.Tensor, group: int = INT4_GROUP) -> bool:
    """Whether the CPU int4 kernel takes this weight's shape [N, K]."""
    n, k = weight.shape
    return k % group == 0 and n % _INT4_N_MULTIPLE == 0


class Int4Linear:
    """Asymmetric int4 weights in groups of ``group`` along K (the tinygemm format)."""

    out_dtype = torch.bfloat16

    def __init__(
        self, weight: torch.Tensor, bias: torch.Tensor | None, group: int = INT4_GROUP
    ) -> None:
        if not int4_fits(weight, group):
            raise ValueError(f"int4 needs K % {group} == 0 and N % 16 == 0, got {weight.shape}")
        n, k = weight.shape
        # In blocks of rows: a whole head's fp32 temporaries were 200 MB at load (issue 14).
        # The packing keeps each block of rows to itself (tests/test_fast_runner_quant.py).
        packed, scales_and_zeros = [], []
        for first in range(0, n, _QUANTIZE_ROWS):
            w = weight.detach()[first : first + _QUANTIZE_ROWS].float()
            rows = w.shape[0]
            groups = w.reshape(-1, group)  # [rows * K / group, group]
            low, high = groups.amin(dim=1, keepdim=True), groups.amax(dim=1, keepdim=True)
            scales = (high - low).clamp(min=1e-6) / 15
            zeros = low + scales * 8  # the kernel computes (q - 8) * scale + zero
            q = groups.sub(low).div_(scales).round_().clamp_(0, 15).to(torch.int32)
            packed.append(torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.reshape(rows, k), 1))
            scales_and_zeros.append(
                torch.cat([scales.reshape(rows, -1, 1), zeros.reshape(rows, -1, 1)], dim=2)
            )
        self.group = group
        self.packed = packed[0] if len(packed) == 1 else torch.cat(packed)
        # scales_and_zeros: [K / group, N, 2] in bf16
        self.scales_and_zeros = (
            torch.cat(scales_and_zeros).transpose(0, 1).contiguous().to(torch.bfloat16)
        )
        self.bias = None if bias is None else bias.detach().to(torch.bfloat16)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1]).to(torch.bfloat16)  # [M, K]
        out = torch.ops.aten._weight_int4pack_mm_for_cpu(
            flat, self.packed, self.group, self.scales_and_zeros
        )  # [M, N]
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], out.shape[-1])

    def dequantized(self) -> Linear:
        """The same weights in bf16, as the kernel sees them; itself where the packing's
        layout is not known (see int4_unpack_block).

        A prefill pays this for every layer (bench/results/kernels.md), so it works in the
        packing's own order: the packed bytes hold ``block`` rows K-major (the layout:
        unpack_int4), so the nibbles unpack into the transposed weight [K, N] with contiguous
        runs of block / 2 values, and the scales and zeros ([K / group, N]) apply to it
        without a transpose. All in bf16, with one rounding, as the kernel computes:
        (q - 8) * scale + zero.
        """
        n, k = self.packed.shape[0], self.packed.shape[1] * 2
        block = int4_unpack_block()
        if block == 0 or n % block:
            return self
        # q ^ 8 read as a signed nibble is q - 8; the arithmetic shifts sign-extend it.
        signed = (self.packed ^ 0x88).view(torch.int8).view(n // block, k, block // 2)
        low = torch.bitwise_left_shift(signed, 4).bitwise_right_shift_(4)  # row d of a block
        high = signed >> 4  # row d + block / 2
        transposed = torch.empty(k, n // block, 2, block // 2, dtype=torch.bfloat16)
        transposed[:, :, 0].copy_(low.transpose(0, 1))
        transposed[:, :, 1].copy_(high.transpose(0, 1))
        grouped = transposed.view(k // self.group, self.group, n)
        scales = self.scales_and_zeros[..., 0].contiguous().unsqueeze(1)  # [K / group, 1, N]
        zeros = self.scales_and_zeros[..., 1].contiguous().unsqueeze(1)
        torch.addcmul(zeros, grouped, scales, out=grouped)
        return DenseLinear(transposed.view(k, n).t(), self.bias, prefill_dtype(), keep_layout=True)


def unpack_int4(packed: torch.Tensor, block: int) -> torch.Tensor:
    """The CPU int4 packing [N, K / 2] uint8 undone -> q [N, K] uint8 in 0..15.

    The packing (_convert_weight_to_int4pack_for_cpu) stores ``block`` output rows together,
    K-major: byte [k, d] of a block holds row d's value at k in its low nibble and row
    d + block / 2's in its high one. ``block`` is the kernel's vector width (64 with AVX-512).
    """
    n, k = packed.shape[0], packed.shape[1] * 2
    blocks = packed.view(n // block, k, block // 2)
    q = torch.cat([blocks & 15, blocks >> 4], dim=2)  # [N / block, K, block]
    return q.transpose(1, 2).reshape(n, k)


_unpack_block: int | None = None


def int4_unpack_block() -> int:
    """The row block of this machine's int4 packing (unpack_int4), or 0 if none of the known
    layouts reproduces a test packing; found once, by packing known values."""
    global _unpack_block
    if _unpack_block is None:
        generator = torch.Generator().manual_seed(0)
        q = torch.randint(0, 16, (128, 64), generator=generator, dtype=torch.int32)
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
        _unpack_block = 0
        if packed.dtype == torch.uint8 and packed.shape == (128, 32):
            for block in (64, 32, 16, 128):
                if torch.equal(unpack_int4(packed, block).to(torch.int32), q):
                    _unpack_block = block
                    break
    return _unpack_block


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity, where the OS says)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
    return cores or os.cpu_count() or 1


@functools.cache
def prefill_dtype() -> torch.dtype:
    """The dtype of the weights a long prefill multiplies by: bf16 where this CPU's bf16
    matmuls are fast (AVX-512 BF16, AMX), else fp32 (the same values: bf16 widens exactly).

    Measured once per process (a few milliseconds). On an AVX2-only CPU (the AMD EPYC of
    this project's machine in December 2026) a [256, 576] x [576, 1536] bf16 matmul ran at
    1.2 GFLOP/s against 53 in fp32, and a 256-token prefill of the default model on bf16
    weights took 50-77 s against 1.3 s on fp32 ones (bench/results/prefill_dtype.md).
    """
    return faster_dense_dtype(matmul_seconds(torch.bfloat16), matmul_seconds(torch.float32))


def kv_dtype(precision: str, device: torch.device) -> torch.dtype:
    """The dtype of a runner's queries, keys and values (its KV cache): fp32 for an fp32
    runner; bf16 on a GPU; on a CPU bf16 unless its attention of one query is slower than
    fp32's (``attention_seconds``).

    Where bf16 is emulated or lacks a fast decode kernel, attending over a bf16 cache cost
    0.7-0.8 ms a layer at 512 positions (issue 39): on this project's AMD EPYC, one thread,
    the default model's 30 layers took 20.4 ms in bf16 against 3.0 ms in fp32.
    """
    if precision == "fp32":
        return torch.float32
    if device.type != "cpu":
        return torch.bfloat16
    slow = attention_seconds(torch.bfloat16) > attention_seconds(torch.float32)
    return torch.float32 if slow else torch.bfloat16


@functools.cache
def attention_seconds(dtype: torch.dtype, positions: int = 256) -> float:
    """The fastest of three one-query attentions (9 heads over 3 of 64, the default model's
    shape) over ``positions`` keys in ``dtype``, ten at a time, on one thread."""
    q = torch.randn(1, 9, 1, 64).to(dtype)
    keys, values = (torch.randn(1, 3, positions, 64).to(dtype) for _ in range(2))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        F.scaled_dot_product_attention(q, keys, values, enable_gqa=True)
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(10):
                F.scaled_dot_product_attention(q, keys, values, enable_gqa=True)
            best = min(best, time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return best


def matmul_seconds(dtype: torch.dtype, rows: int = 64, size: int = 512) -> float:
    """The fastest of three [rows, size] x [size, size] matmuls in ``dtype``, on one thread
    (the kernel's own speed: with two threads on a busy machine fp32 took 40x its time)."""
    a, b = torch.randn(rows, size).to(dtype), torch.randn(size, size).to(dtype)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a @ b  # the first call sets up the kernel
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return best


def faster_dense_dtype(bf16_s: float, fp32_s: float) -> torch.dtype:
    """bf16 unless its matmuls took over BF16_SLOWER_AT_MOST times the fp32 ones' time."""
    return torch.bfloat16 if bf16_s <= BF16_SLOWER_AT_MOST * fp32_s else torch.float32


def dequantized(linear: Linear) -> Linear:
    """``linear`` with dense weights (``prefill_dtype()``, for many rows, where dense matmuls
    beat the quantized kernels); ``linear`` itself if it has no quantized form to undo."""
    undo = getattr(linear, "dequantized", None)
    return linear if undo is None else undo()


def quantize(weight: torch.Tensor, bias: torch.Tensor | None, precision: str) -> Linear:
    """A linear layer for ``precision`` (fp32 | bf16 | int8 | int4).

    int4 falls back to int8 for a weight whose shape the int4 kernel does not take.
    """
    if precision == "fp32":
        return DenseLinear(weight, bias, torch.float32)
    if precision == "bf16":
        return DenseLinear(weight, bias, torch.bfloat16)
    if precision == "int8" or (precision == "int4" and not int4_fits(weight)):
        return Int8Linear(weight, bias)
    if precision == "int4":
        return Int4Linear(weight, bias)
    raise ValueError(f"unknown precision {precision!r}")


class RefinedHead:
    """The output head: int4 logits for the whole vocabulary, exact ones for the best tokens.

    The head is the largest matrix of a small model (49152 x 576 in SmolLM2-135M) and a
    decode step reads it whole: int4 halves that read against int8. Its int4 error (9% of the
    weights' norm on the default model) would change which token wins, so the ``refine``
    tokens with the highest int4 logits get their logits recomputed from the fp32 rows. The
    decoders look at the top tokens (argmax, top-k, nucleus); the rest only feed the softmax
    normaliser, where the int4 error is small.
    """

    out_dtype = torch.float32

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, refine: int = 64) -> None:
        self.weight = weight.detach()  # [V, H], fp32 or bf16; tied models share the embedding
        self.bias = None if bias is None else bias.detach().float()
        self.coarse = quantize(weight, bias, "int4")
        self.refine = min(refine, weight.shape[0])

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, H] -> fp32 logits [B, V]."""
        logits = self.coarse(x).float()  # [B, V]
        best = logits.topk(self.refine, dim=-1).indices  # [B, R]
        rows = self.weight[best].float()  # [B, R, H]
        exact = (rows @ x.float()[:, :, None])[..., 0]  # [B, R]
        if self.bias is not None:
            exact = exact + self.bias[best]
        return logits.scatter(-1, best, exact)
