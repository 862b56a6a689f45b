"""bench.kernel_choices' modes: each measures one choice on the loaded default model."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from bench.fidelity import greedy
from bench.kernel_choices import (
    MATRICES,
    NEXT_TOKENS,
    PREFILL_TOKENS,
    STEP_POSITIONS,
    DynamicInt8Linear,
    agreement,
    interleaved,
    medians,
    relative_error,
)
from bench.latency import ENGINE_SOURCE, ROOT
from superposed import calibrate
from superposed.blocks import Block
from superposed.fast_runner import FastRunner
from superposed.quant import DenseLinear, Int4Linear, Int8Linear, Linear, RefinedHead, dequantized
from superposed.runner import HFRunner

Make = Callable[[torch.Tensor, torch.Tensor | None], Linear]
# kernel -> (build a linear from weight, bias; the activations' dtype)
KERNELS: dict[str, tuple[Make, torch.dtype]] = {
    "int4, bf16 activations": (Int4Linear, torch.bfloat16),
    "int8 weight-only (_weight_int8pack_mm), bf16 activations": (Int8Linear, torch.bfloat16),
    "fbgemm dynamic int8, 8-bit activations": (
        partial(DynamicInt8Linear, reduce_range=False),
        torch.float32,
    ),
    "fbgemm dynamic int8, 7-bit activations": (
        partial(DynamicInt8Linear, reduce_range=True),
        torch.float32,
    ),
    "fp32": (partial(DenseLinear, dtype=torch.float32), torch.float32),
}


def code_windows(tokenizer: Any, count: int, tokens: int) -> list[list[int]]:
    """The first ``tokens`` token ids of ``count`` of the engine's source files."""
    files = sorted((ROOT / ENGINE_SOURCE).glob("*.py"))
    windows = [tokenizer.encode(f.read_text(), add_special_tokens=False)[:tokens] for f in files]
    windows = [w for w in windows if len(w) == tokens][:count]
    if len(windows) < count:
        raise ValueError(f"{ENGINE_SOURCE} has fewer than {count} files of {tokens} tokens")
    return windows


def layer_weights(model: Any) -> list[dict[str, torch.Tensor]]:
    """Each layer's fp32 weights, fused as the fast runner fuses them."""
    out = []
    for layer in model.model.layers:
        a, m = layer.self_attn, layer.mlp
        out.append(
            {
                "qkv": torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]),
                "out": a.o_proj.weight,
                "gate_up": torch.cat([m.gate_proj.weight, m.up_proj.weight]),
                "down": m.down_proj.weight,
            }
        )
    return [{k: w.detach().float().contiguous() for k, w in d.items()} for d in out]


def activations(model: Any, ids: list[int]) -> list[dict[str, torch.Tensor]]:
    """Each layer's inputs to its four matmuls in a forward of ``ids``: [T, K] fp32."""
    inputs = {"qkv": "self_attn.q_proj", "out": "self_attn.o_proj", "gate_up": "mlp.gate_proj"}
    inputs["down"] = "mlp.down_proj"
    got: list[dict[str, torch.Tensor]] = [{} for _ in model.model.layers]
    hooks = []
    for i, layer in enumerate(model.model.layers):
        for name, path in inputs.items():

            def keep(_m: Any, inp: Any, _out: Any, i: int = i, name: str = name) -> None:
                got[i][name] = inp[0].detach().reshape(-1, inp[0].shape[-1]).float()

            hooks.append(layer.get_submodule(path).register_forward_hook(keep))
    try:
        with torch.inference_mode():
            model(torch.tensor([ids]))
    finally:
        for h in hooks:
            h.remove()
    return got


def matmuls(loaded: Any, rounds: int, prompts: int) -> dict[str, Any]:
    """Per kernel: one row through all layers' matmuls (median ms), and its worst layer's
    relative error per matrix against fp32 on a 256-token forward's activations."""
    weights = layer_weights(loaded.model)
    acts = activations(loaded.model, code_windows(loaded.tokenizer, 1, PREFILL_TOKENS)[0])
    rows = {k: torch.randn(1, k) for k in {w.shape[1] for lw in weights for w in lw.values()}}
    runs: dict[str, Callable[[], object]] = {}
    errors: dict[str, dict[str, float]] = {}
    with torch.inference_mode():
        for kernel, (make, dtype) in KERNELS.items():
            built = []
            worst = dict.fromkeys(MATRICES, 0.0)
            for lw, la in zip(weights, acts, strict=True):
                for name, w in lw.items():
                    linear = make(w, None)
                    x = la[name]
                    err = relative_error(linear(x.to(dtype)), x @ w.t())
                    worst[name] = max(worst[name], err)
                    built.append((linear, rows[w.shape[1]].to(dtype)))
            errors[kernel] = {k: round(v, 4) for k, v in worst.items()}
            runs[kernel] = partial(_through, built)
        ms = medians(interleaved(runs, rounds))
    return {k: {"ms": ms[k], "error": errors[k]} for k in KERNELS}


def _through(built: list[tuple[Linear, torch.Tensor]]) -> None:
    for linear, x in built:
        linear(x)


def _replace(block: Block, make: Callable[[str, Linear], Linear]) -> Block:
    """``block`` with each of its matmuls ``make(its name, it)``."""
    new = {n: make(n, getattr(block, n)) for n in MATRICES}
    return dataclasses.replace(
        block, qkv=new["qkv"], out=new["out"], gate_up=new["gate_up"], down=new["down"]
    )


def _with_blocks(runner: FastRunner, blocks: list[Any]) -> FastRunner:
    """``runner`` stepping and prefilling on ``blocks``."""
    runner.decode_weights = dataclasses.replace(runner.decode_weights, blocks=blocks)
    runner.plan = dataclasses.replace(
        runner.plan, decode=runner.decode_weights, dense=runner.decode_weights
    )
    return runner


def _dynamic(reduce_range: bool, keep_down: bool) -> Callable[[str, Linear], Linear]:
    """name, a dense layer -> dynamic int8 (int4 for down_proj where ``keep_down``)."""

    def make(name: str, dense: Linear) -> Linear:
        assert isinstance(dense, DenseLinear)
        if keep_down and name == "down":
            return Int4Linear(dense.weight, dense.bias)
        return DynamicInt8Linear(dense.weight, dense.bias, reduce_range)

    return make


def agreement_runners(loaded: Any) -> dict[str, FastRunner]:
    """The fast runner in int4, and with its layers on dynamic int8 variants made from the
    fp32 weights (the head stays the int4 runner's)."""
    fp32 = FastRunner(loaded.model, "fp32")
    dense = [{n: getattr(b, n) for n in MATRICES} for b in fp32.decode_weights.blocks]
    del fp32
    variants = {
        "fbgemm dynamic int8, 8-bit activations": _dynamic(False, False),
        "fbgemm dynamic int8, 7-bit activations": _dynamic(True, False),
        "fbgemm dynamic int8, 7-bit, down_proj int4": _dynamic(True, True),
    }
    out = {"int4 (the product's)": FastRunner(loaded.model, "int4")}
    for name, make in variants.items():
        runner = FastRunner(loaded.model, "int4")
        blocks = [
            _replace(b, lambda n, _, d=d, make=make: make(n, d[n]))  # type: ignore[misc]
            for b, d in zip(runner.decode_weights.blocks, dense, strict=True)
        ]
        out[name] = _with_blocks(runner, blocks)
    return out


def forced_agreement(loaded: Any, rounds: int, prompts: int) -> dict[str, Any]:
    """Teacher-forced greedy agreement with HF's fp32 model over NEXT_TOKENS after each of
    ``prompts`` code windows, and each runner's eager one-row step at STEP_POSITIONS."""
    windows = code_windows(loaded.tokenizer, prompts, 128)
    runners = agreement_runners(loaded)
    with torch.inference_mode():
        hf = HFRunner(loaded.model)
        ref = [greedy(hf, w, NEXT_TOKENS) for w in windows]
        agreed = {
            name: agreement(
                [greedy(r, w, NEXT_TOKENS, f) for w, f in zip(windows, ref, strict=True)], ref
            )
            for name, r in runners.items()
        }
        ids = code_windows(loaded.tokenizer, 1, STEP_POSITIONS)[0]
        steps = {}
        for name, r in runners.items():
            r.rewind(0)
            r.prefill(ids)
            steps[name] = partial(_step, r, r.embed(torch.tensor([[ids[-1]]])))
        ms = medians(interleaved(steps, rounds * 2), 1)
    return {k: {"agreement": agreed[k], "step ms": ms[k]} for k in runners}


def _step(runner: FastRunner, x: torch.Tensor) -> None:
    runner.step(x)
    runner.rewind(STEP_POSITIONS)


def prefill(loaded: Any, rounds: int, prompts: int) -> dict[str, Any]:
    """A PREFILL_TOKENS prefill of the int4 runner on its de-quantized layers (the product's)
    and on dynamic int8 ones: median ms, and the agreement of the next NEXT_TOKENS greedy
    tokens (the text's own tokens fed) with the de-quantized prefill's."""
    runner = FastRunner(loaded.model, "int4")
    base = runner.plan
    dense = [
        _replace(b, lambda _, linear: dequantized(linear)) for b in runner.decode_weights.blocks
    ]

    def dynamic(reduce_range: bool) -> list[Any]:
        make = _dynamic(reduce_range, keep_down=False)
        return [_replace(b, make) for b in dense]

    dtype = str(dense[0].qkv.out_dtype).removeprefix("torch.")
    variants = {
        f"dense, {dtype} (the product's)": dense,
        "fbgemm dynamic int8, 8-bit activations": dynamic(False),
        "fbgemm dynamic int8, 7-bit activations": dynamic(True),
    }

    def use(blocks: list[Any]) -> None:
        runner.plan = dataclasses.replace(
            base, dense=dataclasses.replace(base.dense, blocks=blocks)
        )

    windows = code_windows(loaded.tokenizer, prompts, PREFILL_TOKENS + NEXT_TOKENS - 1)
    picks: dict[str, list[list[int]]] = {}
    with torch.inference_mode():
        for name, blocks in variants.items():
            use(blocks)
            picks[name] = [_next_tokens(runner, w) for w in windows]
        ms = medians(
            interleaved(
                {k: partial(_prefill, runner, use, b, windows[0]) for k, b in variants.items()},
                rounds,
            ),
            0,
        )
    ref = picks[next(iter(variants))]
    return {k: {"ms": ms[k], "agreement": agreement(picks[k], ref)} for k in variants}


def _next_tokens(runner: FastRunner, window: list[int]) -> list[int]:
    runner.rewind(0)
    logits = runner.prefill(window[:PREFILL_TOKENS])
    out = [int(logits.argmax())]
    for t in window[PREFILL_TOKENS:]:
        out.append(int(runner.step(runner.embed(torch.tensor([[t]])))[0].argmax()))
    return out


def _prefill(
    runner: FastRunner, use: Callable[[list[Any]], None], blocks: list[Any], w: list[int]
) -> None:
    use(blocks)
    runner.rewind(0)
    runner.prefill(w[:PREFILL_TOKENS])


def head(loaded: Any, rounds: int, prompts: int) -> dict[str, Any]:
    """The output head's options for one row: relative error against fp32, how many of the
    reference's top 8 the kernel's top 8 keep, median ms."""
    w = loaded.model.get_output_embeddings().weight.detach().float().contiguous()  # [V, H]
    x = acts_row(loaded)  # [1, H]
    ref = x @ w.t()  # [1, V]
    fp16 = torch.ops.quantized.linear_prepack_fp16(w, None)
    options: dict[str, Callable[[], torch.Tensor]] = {}
    for kernel, (make, dtype) in KERNELS.items():
        linear = make(w, None)
        options[kernel] = partial(linear, x.to(dtype))
    refined = RefinedHead(w, None)
    options["int4, its best 64 rows recomputed in fp32 (the product's: RefinedHead)"] = partial(
        refined, x
    )
    options["fbgemm fp16 weights"] = partial(torch.ops.quantized.linear_dynamic_fp16, x, fp16)
    top = set(ref[0].topk(8).indices.tolist())
    out = {}
    with torch.inference_mode():
        for name, fn in options.items():
            got = fn().float()
            kept = len(set(got[0].topk(8).indices.tolist()) & top)
            out[name] = {"error": round(relative_error(got, ref), 4), "top 8 kept": kept}
        ms = medians(interleaved(options, rounds))
    return {k: v | {"ms": ms[k]} for k, v in out.items()}


def acts_row(loaded: Any) -> torch.Tensor:
    """The final hidden state (after the norm) of a code window's last position: [1, H]."""
    ids = code_windows(loaded.tokenizer, 1, PREFILL_TOKENS)[0]
    with torch.inference_mode():
        out = loaded.model(torch.tensor([ids]), output_hidden_states=True)
    return out.hidden_states[-1][0, -1:].float()


def threads(loaded: Any, rounds: int, prompts: int) -> dict[str, Any]:
    """calibrate's timings at 1 and 2 threads, interleaved, best of ``rounds``; and
    calibrate.measure's choice."""
    shapes = calibrate.layer_shapes(loaded.model.config)
    phases: dict[str, Callable[[int], float]] = {
        f"step matmuls, {p}": partial(calibrate.time_matmuls, shapes, p)
        for p in calibrate.CANDIDATES
    }
    phases["prefill matmuls"] = partial(calibrate.time_prefill, shapes)
    best: dict[str, dict[int, float]] = {k: {} for k in phases}
    for _ in range(rounds):
        for name, timer in phases.items():
            for t in (1, 2):
                best[name][t] = min(best[name].get(t, float("inf")), timer(t))
    counts = calibrate.thread_counts()
    chosen = calibrate.measure(shapes, counts)
    torch.set_num_threads(1)
    return {
        "ms": {
            k: {"1": round(v[1], 2), "2": round(v[2], 2), "2 / 1": round(v[2] / v[1], 2)}
            for k, v in best.items()
        },
        "calibration": {
            "precision": chosen.precision,
            "threads": chosen.threads,
            "prefill_threads": chosen.prefill_threads,
            "counts": sorted({int(k.split("@")[1]) for k in chosen.ms}),
            "ms": chosen.ms,
            "prefill_ms": chosen.prefill_ms,
        },
    }


MEASURES: dict[str, Callable[[Any, int, int], dict[str, Any]]] = {
    "matmuls": matmuls,
    "agreement": forced_agreement,
    "head": head,
    "prefill": prefill,
    "threads": threads,
}
