"""The Gemma 3 fast runner (fast_gemma.py) against the transformers runner on a tiny random
Gemma 3: a local layer whose window (8) the scripts run well past, and a global one."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from superposed.fast_gemma import GemmaRunner
from superposed.hypotheses import Hypothesis
from superposed.runner import HFRunner
from superposed.runner_choice import make_runner
from superposed.superposed import superposed_input
from tests.runner_harness import VOCAB, ids, script

WINDOW = 8


def tiny_gemma(seed: int = 0, **overrides: Any) -> Any:
    """A 3-layer random Gemma 3 (local, global, local) with random norm weights: Gemma's norms
    scale by (1 + weight) and start at weight 0, which would hide a runner that forgot the 1."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(seed)
    config = Gemma3TextConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        query_pre_attn_scalar=32,  # a scale other than head_dim ** -0.5
        sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        **overrides,
    )
    model = Gemma3ForCausalLM(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.normal_(0, 0.5)
    return model


@pytest.fixture(scope="module")
def gemma() -> Any:
    torch.set_num_threads(1)
    return tiny_gemma()


def test_fp32_matches_the_reference_runner_call_for_call(gemma: Any) -> None:
    reference, fast = HFRunner(gemma), GemmaRunner(gemma, "fp32")
    expected = script(reference)
    for want, got in zip(expected, script(fast), strict=True):
        assert got.dtype == torch.float32 and got.shape == want.shape
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert fast.cached_ids == reference.cached_ids == ids(63)
    assert fast.length == reference.length == 63
    # The scripts run past the local window: a runner that ignored it would not match.
    opened = copy.deepcopy(gemma)
    opened.config.sliding_window = 1024
    wide = script(GemmaRunner(opened, "fp32"))
    assert max((w - e).abs().max().item() for w, e in zip(wide, expected, strict=True)) > 0.01


def test_the_pure_step_matches_the_reference_runner_call_for_call(gemma: Any) -> None:
    """The function compiled.py exports, installed for every batch size (no compiling)."""
    reference, fast = HFRunner(gemma), GemmaRunner(gemma, "fp32")
    fast.compiled_steps = {rows: fast.pure_step for rows in (1, 2, 3, 4)}
    for want, got in zip(script(reference), script(fast), strict=True):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert fast.compiled_calls > 0


def test_a_long_prompt_in_chunks_matches_the_reference() -> None:
    """700 tokens: two prefill chunks, the second starting far past the local window."""
    model = tiny_gemma(seed=3)
    reference, fast = HFRunner(model), GemmaRunner(model, "fp32")
    tokens = ids(700, seed=2)
    torch.testing.assert_close(
        fast.prefill(tokens), reference.prefill(tokens), atol=1e-4, rtol=1e-4
    )
    fast.expand(3)
    reference.expand(3)
    rows = torch.arange(3)[:, None]
    torch.testing.assert_close(
        fast.step(fast.embed(rows)), reference.step(reference.embed(rows)), atol=1e-4, rtol=1e-4
    )


@pytest.mark.parametrize(("precision", "atol"), [("bf16", 0.05), ("int8", 0.3), ("int4", 0.3)])
def test_lower_precisions_stay_close_to_the_reference(
    gemma: Any, precision: str, atol: float
) -> None:
    """The exact weights' prefill (prefill_copy): on this random model, whose logits are
    nearly flat, the int4 weights' prefill (the default) keeps the argmax at 7 of 14 positions;
    the real model's guard is tests/test_fast_runner_quality.py."""
    expected = script(HFRunner(gemma))
    got = script(GemmaRunner(gemma, precision, prefill_copy=True))
    for e, g in zip(expected, got, strict=True):
        assert (g - e).abs().max() < atol
    same = [(e.argmax(-1) == g.argmax(-1)) for e, g in zip(expected, got, strict=True)]
    assert sum(int(s.sum()) for s in same) / sum(s.numel() for s in same) >= 0.8


@pytest.mark.parametrize("precision", ["int4"])
def test_the_dequantized_prefill_matches_the_quantized_kernels(gemma: Any, precision: str) -> None:
    """The default prefill (layers de-quantized as it runs) computes what the decode kernels
    compute on every row, local and global layers."""
    dequantizing, kernels = GemmaRunner(gemma, precision), GemmaRunner(gemma, precision)
    kernels.plan.dense = kernels.decode_weights
    dequantizing.plan.decode_tokens = 4  # 70 tokens through the de-quantized layers
    tokens = ids(70)
    torch.testing.assert_close(
        dequantizing.prefill(tokens), kernels.prefill(tokens), atol=0.015, rtol=0
    )  # measured 0.009; the bf16 copy of the original weights: 0.125


def test_superposition_mixes_the_scaled_embeddings_the_first_block_receives(gemma: Any) -> None:
    fast = GemmaRunner(gemma, "fp32")
    tokens = torch.tensor([[5, 9, 300]])
    scaled = gemma.get_input_embeddings()(tokens)  # what the first block receives
    assert not torch.allclose(scaled, gemma.get_input_embeddings().weight[tokens])  # scaled
    torch.testing.assert_close(fast.embed(tokens), scaled)
    # The superposed decoder's input is the gamma-weighted sum of those scaled embeddings,
    # and a step on it gives the reference runner's logits for the same mixture.
    hyps = [Hypothesis([5], -0.1), Hypothesis([9], -1.0), Hypothesis([300], -2.5)]
    mixed = superposed_input(fast, hyps)  # [1, 1, H]
    gamma = torch.softmax(torch.tensor([-0.1, -1.0, -2.5], dtype=torch.float64), 0).float()
    torch.testing.assert_close(mixed[0, 0], (gamma[:, None] * scaled[0]).sum(0))
    reference = HFRunner(gemma)
    prompt = ids(12)
    fast.prefill(prompt)
    reference.prefill(prompt)
    torch.testing.assert_close(
        fast.step(mixed), reference.step(superposed_input(reference, hyps)), atol=1e-4, rtol=1e-4
    )


def test_make_runner_picks_the_gemma_runner_and_falls_back_for_what_it_lacks(gemma: Any) -> None:
    assert isinstance(make_runner(gemma, "auto", "fp32"), GemmaRunner)
    capped = tiny_gemma(final_logit_softcapping=30.0)
    assert "final_logit_softcapping" in (GemmaRunner.unsupported(capped) or "")
    assert isinstance(make_runner(capped, "auto"), HFRunner)
