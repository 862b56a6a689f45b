"""The quantized linear layers, and the private aten kernels they rely on (pinned torch)."""

from __future__ import annotations

import pytest
import torch

from superposed import quant
from superposed.quant import (
    INT4_GROUP,
    DenseLinear,
    Int4Linear,
    Int8Linear,
    RefinedHead,
    dequantized,
    int4_fits,
    int4_unpack_block,
    quantize,
    unpack_int4,
)


def _weight(n: int = 64, k: int = 96, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, k, generator=torch.Generator().manual_seed(seed))


def _as_matrix(layer: Int8Linear | Int4Linear, k: int) -> torch.Tensor:
    """The [N, K] matrix the layer multiplies by, read off by feeding it the identity."""
    return layer(torch.eye(k)).float().T


def _bf16_ulp(x: torch.Tensor) -> torch.Tensor:
    """One unit in the last place of bf16 at |x| (8 bits of mantissa)."""
    return x.abs().clamp(min=1e-30) * 2.0**-7


def test_int8_weights_within_half_a_step_of_the_original() -> None:
    w = _weight()
    layer = Int8Linear(w, None)
    step = w.abs().amax(dim=1, keepdim=True) / 127  # one quantization step per output row
    error = (_as_matrix(layer, w.shape[1]) - w).abs()
    assert (error <= step / 2 + _bf16_ulp(w) + step * 2.0**-7).all()
    assert layer.qweight.dtype == torch.int8


def test_int4_weights_within_half_a_step_of_their_group() -> None:
    w = _weight()
    layer = Int4Linear(w, None)
    groups = w.reshape(w.shape[0], -1, INT4_GROUP)
    step = (groups.amax(-1, keepdim=True) - groups.amin(-1, keepdim=True)) / 15
    bound = (step / 2 + step * 2.0**-6).expand_as(groups).reshape_as(w) + 2 * _bf16_ulp(w)
    error = (_as_matrix(layer, w.shape[1]) - w).abs()
    assert (error <= bound).all()
    # Coarser than int8: the bound above is not trivially loose.
    assert error.max() > (w.abs().amax() / 127)


@pytest.mark.parametrize("cls", [Int8Linear, Int4Linear])
def test_quantized_matmul_is_the_linear_map_of_its_matrix(cls: type) -> None:
    """The kernel computes x @ W^T (plus bias) for the one matrix W it holds, for any batch."""
    generator = torch.Generator().manual_seed(2)  # unseeded, bf16 rounding crossed atol at times
    w, bias = _weight(), torch.randn(64, generator=generator)
    layer = cls(w, bias)
    matrix = _as_matrix(cls(w, None), w.shape[1])
    x = torch.randn(2, 5, w.shape[1], generator=generator)
    expected = x.bfloat16().float() @ matrix.T + bias.bfloat16().float()
    out = layer(x)
    assert out.shape == (2, 5, 64) and out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), expected, atol=0.05, rtol=0.02)


def test_int4_needs_groups_and_16_outputs_else_int8() -> None:
    assert int4_fits(_weight(64, 96))
    assert not int4_fits(_weight(64, 40))  # K not a multiple of the group
    assert not int4_fits(_weight(8, 64))  # N not a multiple of 16
    with pytest.raises(ValueError):
        Int4Linear(_weight(8, 64), None)
    assert isinstance(quantize(_weight(8, 64), None, "int4"), Int8Linear)
    assert isinstance(quantize(_weight(), None, "int4"), Int4Linear)


def test_dense_precisions_and_unknown() -> None:
    w = _weight()
    x = torch.randn(3, 96)
    fp32 = quantize(w, None, "fp32")
    assert isinstance(fp32, DenseLinear)
    torch.testing.assert_close(fp32(x), x @ w.T)
    assert quantize(w, None, "bf16")(x).dtype == torch.bfloat16
    with pytest.raises(ValueError):
        quantize(w, None, "int3")


def test_refined_head_is_exact_on_its_best_tokens_and_int4_elsewhere() -> None:
    vocab, hidden = 512, 64
    w, bias = _weight(vocab, hidden, seed=1), torch.randn(vocab)
    x = torch.randn(3, hidden)
    head = RefinedHead(w, bias, refine=16)
    exact = x @ w.T + bias  # [3, V]
    coarse = Int4Linear(w, bias)(x).float()
    logits = head(x)
    assert logits.dtype == torch.float32 and logits.shape == (3, vocab)
    best = coarse.topk(16, dim=-1).indices
    torch.testing.assert_close(logits.gather(-1, best), exact.gather(-1, best))
    assert (logits.argmax(-1) == exact.argmax(-1)).all()
    rest = torch.ones_like(logits, dtype=torch.bool).scatter(-1, best, False)
    torch.testing.assert_close(logits[rest], coarse[rest])
    assert (logits[rest] != exact[rest]).any()  # the tail really is the int4 approximation


def test_unpack_int4_undoes_the_cpu_packing() -> None:
    block = int4_unpack_block()
    assert block > 0, "this torch's int4 packing layout is unknown: the prefill cannot dequantize"
    q = torch.randint(0, 16, (192, 96), generator=torch.Generator().manual_seed(1))
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.to(torch.int32), 1)
    assert torch.equal(unpack_int4(packed, block).long(), q)


@pytest.mark.parametrize("cls", [Int8Linear, Int4Linear])
def test_dequantized_is_the_matrix_the_kernel_multiplies_by(cls: type) -> None:
    """The prefill's weights are exactly what the decode kernel computes with (bf16 values,
    in fp32 on a CPU whose bf16 matmuls are slow)."""
    generator = torch.Generator().manual_seed(1)  # unseeded, one run in three failed
    w, bias = _weight(n=128), torch.randn(128, generator=generator)
    layer = cls(w, bias)
    dense = dequantized(layer)
    assert isinstance(dense, DenseLinear) and dense.weight.dtype == quant.prefill_dtype()
    assert torch.equal(dense.weight.float(), _as_matrix(cls(w, None), w.shape[1]))
    x = torch.randn(7, w.shape[1], generator=generator)
    # the kernel rounds to bf16; fp32 weights (where bf16 is slow) do not: 0.06 seen apart
    torch.testing.assert_close(dense(x).float(), layer(x).float(), atol=0.1, rtol=0.05)


def test_dequantized_keeps_what_it_cannot_undo() -> None:
    dense = DenseLinear(_weight(), None, torch.bfloat16)
    assert dequantized(dense) is dense
    odd = Int4Linear(_weight(n=48), None)  # rows not a multiple of the packing's block
    assert dequantized(odd) is odd


def test_int4_quantized_in_blocks_of_rows_as_a_whole() -> None:
    """Int4Linear quantizes and packs a big weight (the head) a block of rows at a time: the
    result is the whole weight's."""
    w = _weight(n=4096 + 192, k=64)
    layer = Int4Linear(w, None)
    whole = Int4Linear(w[:192], None), Int4Linear(w[192:], None)
    assert torch.equal(layer.packed, torch.cat([part.packed for part in whole]))
    matrix = _as_matrix(layer, 64)
    assert torch.equal(matrix, torch.cat([_as_matrix(part, 64) for part in whole]))


@pytest.mark.parametrize("cls", [Int8Linear, Int4Linear])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_dequantized_weights_in_either_prefill_dtype_give_the_kernel_s_product(
    cls: type, dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On an AVX2-only CPU bf16 matmuls are emulated (45x slower than fp32): a 256-token
    prefill on bf16 weights took 50-77 s. There the same weights are widened to fp32."""
    monkeypatch.setattr(quant, "prefill_dtype", lambda: dtype)
    generator = torch.Generator().manual_seed(2)
    w, bias = _weight(n=128), torch.randn(128, generator=generator)
    layer = cls(w, bias)
    dense = dequantized(layer)
    assert isinstance(dense, DenseLinear) and dense.weight.dtype == dtype
    matrix = _as_matrix(cls(w, None), w.shape[1])
    assert torch.equal(dense.weight.float(), matrix)
    x = torch.randn(7, w.shape[1], generator=generator)
    exact = torch.nn.functional.linear(x, matrix, bias.to(torch.bfloat16).float())
    close = {"atol": 1e-4, "rtol": 1e-4} if dtype == torch.float32 else {"atol": 0.05, "rtol": 0.02}
    torch.testing.assert_close(dense(x).float(), exact, **close)


def test_bf16_prefills_only_where_bf16_matmuls_are_not_emulated() -> None:
    assert quant.faster_dense_dtype(bf16_s=0.117, fp32_s=0.0016) == torch.float32  # AVX2
    assert quant.faster_dense_dtype(bf16_s=0.001, fp32_s=0.0016) == torch.bfloat16  # AMX
    assert quant.faster_dense_dtype(bf16_s=0.003, fp32_s=0.0016) == torch.bfloat16
    assert quant.prefill_dtype() in (torch.bfloat16, torch.float32)
