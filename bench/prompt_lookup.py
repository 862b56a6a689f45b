"""llama.cpp's own speculation beside the product's drafts: bench/cpu_anchor.py's
``--prompt-lookup N...`` (issue 54 item 5).

Two workloads, each from a cold cache: 1 greedy draft and 3 drafts of 24 tokens after the
256-token prompt of code the run's other requests read (bench.latency.code_context: code
repeats itself, which is where prompt lookup helps). Each runs, interleaved with the rest of
the round, on:

- the product (``Engine.complete``: greedy for 1 draft, superposed for 3);
- llama.cpp through the product's runner (superposed/llama_cpp_runner.py): the 3 drafts are
  3 sequences sharing the prompt's cells, one 3-row batch a token;
- llama.cpp through llama-cpp-python's own loop (``Llama.generate``), plain, and with its
  prompt-lookup speculation (``LlamaPromptLookupDecoding(num_pred_tokens=N)``, its default
  2-gram match): a draft's next tokens copied from where its last tokens occurred before,
  checked in one forward, the longest greedy prefix kept. llama.cpp has no superposition:
  there the 3 drafts are 3 generations one after another, each from one of the prompt's 3
  best first tokens, each reusing the prompt's cells (llama-cpp-python's prefix match).

Every llama.cpp draft is greedy from the same prompt ids; ``same_drafts`` counts the drafts
prompt lookup made identical to the plain loop's. They may differ at a near-tie: a forward over
several positions (prompt lookup's check) computes logits a little apart from one position's,
and the second of the 3 drafts on this prompt reaches a tie that the two decide differently.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench.measure import medians
from bench.tables import table
from superposed.api import Engine
from superposed.llama_cpp_runner import import_llama
from superposed.types import DecodeConfig

TOKENS = 24  # a draft's tokens
WORKLOADS = {"1 draft x 24, cold 256": 1, "3 drafts x 24, cold 256": 3}  # name -> drafts
DECODE = ": after the prefill"  # a workload's key for its ms after the prompt's prefill
FORWARDS = ": forwards"  # ... for the forwards its drafts ran after the prefill
RUNNER = "llama.cpp"  # the product's llama.cpp runner, as bench/cpu_anchor.py names it
GENERATE = "llama.cpp generate"  # llama-cpp-python's Llama.generate, plain
LOOKUP = "llama.cpp prompt lookup"  # ... with LlamaPromptLookupDecoding, before its N
CONTEXT = 512  # positions of a Llama context: the prompt, a draft and its proposals


def greedy_rows(runner: Any, first: torch.Tensor, k: int, tokens: int) -> list[list[int]]:
    """k greedy drafts of ``tokens`` tokens after a prefill whose logits were ``first`` [V]:
    the k best first tokens each a row of their own, then one k-row step of ids a token."""
    runner.expand(k)
    drafts = [[int(t)] for t in torch.topk(first, k).indices]
    for _ in range(1, tokens):
        logits = runner.score(torch.tensor([[d[-1]] for d in drafts]))  # [k, 1, V]
        for draft, row in zip(drafts, logits[:, 0], strict=True):
            draft.append(int(row.argmax()))
    return drafts


def product_sample(engine: Engine, text: str) -> dict[str, float]:
    """One sample of each workload on the product, from a cold cache."""
    out: dict[str, float] = {}
    for key, k in WORKLOADS.items():
        engine.runner.rewind(0)
        cfg = DecodeConfig(k=k, max_new_tokens=TOKENS, seed=0)
        start = time.perf_counter()
        done = engine.complete(text, "greedy" if k == 1 else "superposed", cfg)
        out[key] = (time.perf_counter() - start) * 1e3
        out[key + DECODE] = done.timing_ms["steps"]
        out[key + FORWARDS] = done.timing_ms["forwards"]
    engine.runner.rewind(0)
    return out


def runner_sample(runner: Any, ids: list[int]) -> dict[str, float]:
    """One sample of each workload on llama.cpp through the product's runner: a draft a
    sequence, the drafts one batch a token."""
    out: dict[str, float] = {}
    for key, k in WORKLOADS.items():
        runner.rewind(0)
        start = time.perf_counter()
        first = runner.prefill(ids)  # [V]
        prefilled = time.perf_counter()
        greedy_rows(runner, first, k, TOKENS)
        end = time.perf_counter()
        out |= {key: (end - start) * 1e3, key + DECODE: (end - prefilled) * 1e3}
        out[key + FORWARDS] = TOKENS - 1  # one batch a token after the first
    runner.rewind(0)
    return out


class LlamaGenerate:
    """llama.cpp through llama-cpp-python's generation loop (``Llama.generate``), plain or
    with its prompt-lookup speculation; counts the forwards (``Llama.eval`` calls) it runs."""

    def __init__(self, gguf: Path, num_pred_tokens: int | None) -> None:
        ll = self.ll = import_llama()
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        draft = None
        if num_pred_tokens is not None:
            draft = LlamaPromptLookupDecoding(num_pred_tokens=num_pred_tokens)
        self.label = GENERATE if draft is None else f"{LOOKUP} {num_pred_tokens}"
        # logits_all with a draft model: llama-cpp-python checks proposals against every
        # position's logits (it sets the flag itself; given here, its scores array holds them)
        self.llm = ll.Llama(
            model_path=str(gguf), n_ctx=CONTEXT, n_batch=CONTEXT, n_threads=1,
            n_threads_batch=1, logits_all=draft is not None, draft_model=draft, verbose=False,
        )  # fmt: skip
        self.forwards = 0
        self.drafts_made: list[list[int]] = []  # every sample's drafts, for same_drafts
        evaluate = self.llm.eval

        def counted(tokens: list[int]) -> None:  # Llama.generate calls self.eval per forward
            self.forwards += 1
            evaluate(tokens)

        self.llm.eval = counted

    def set_threads(self, threads: int) -> None:
        self.ll.llama_set_n_threads(self.llm.ctx, threads, threads)

    def prefill(self, ids: list[int]) -> torch.Tensor:
        """``ids`` from a cold cache -> the last position's logits [V]. Only that position's
        are computed, as the plain loop does: with a draft model llama-cpp-python computes
        every prompt position's, which nothing reads, and the prefill would cost more with the
        speculation than without for no reason of llama.cpp's."""
        llm = self.llm
        llm.reset()
        every, llm._logits_all = llm._logits_all, False
        try:
            llm.eval(ids)
        finally:
            llm._logits_all = every
        pointer = self.ll.llama_get_logits_ith(llm.ctx, -1)
        return torch.from_numpy(np.ctypeslib.as_array(pointer, (llm.n_vocab(),)).copy())

    def drafts(self, ids: list[int], first: torch.Tensor, k: int) -> list[list[int]]:
        """k greedy drafts of TOKENS tokens, one generation after another, each from one of
        ``first``'s k best tokens (the prompt's cells reused: its prefix match)."""
        out = []
        for token in torch.topk(first, k).indices.tolist():
            draft = [int(token)]
            steps = self.llm.generate([*ids, draft[0]], top_k=1, temp=0.0, repeat_penalty=1.0)
            while len(draft) < TOKENS:
                draft.append(int(next(steps)))
            steps.close()
            out.append(draft)
        return out

    def sample(self, ids: list[int]) -> dict[str, float]:
        """One sample of each workload, each from a cold cache."""
        out: dict[str, float] = {}
        for key, k in WORKLOADS.items():
            start = time.perf_counter()
            first = self.prefill(ids)
            prefilled, self.forwards = time.perf_counter(), 0
            drafts = self.drafts(ids, first, k)
            end = time.perf_counter()
            out |= {key: (end - start) * 1e3, key + DECODE: (end - prefilled) * 1e3}
            out[key + FORWARDS] = self.forwards
            self.drafts_made += drafts
        return out

    def close(self) -> None:
        self.llm.close()


def generators(gguf: Path, num_pred_tokens: Iterable[int]) -> list[LlamaGenerate]:
    """Llama.generate plain, then with prompt lookup of each ``num_pred_tokens``."""
    return [LlamaGenerate(gguf, n) for n in (None, *num_pred_tokens)]


def summary(
    samples: dict[str, dict[str, list[float]]],
    on_llama: list[LlamaGenerate],
    num_pred_tokens: list[int],
    skipped: str | None,
) -> dict[str, Any]:
    """The results' ``prompt_lookup`` entry: medians of each row's samples (the first left
    out), and whether every llama.cpp way drafted what Llama.generate drafted plainly."""
    plain = on_llama[0].drafts_made if on_llama else []
    return {
        "num_pred_tokens": num_pred_tokens,
        "max_ngram_size": 2,  # LlamaPromptLookupDecoding's default
        "llama_cpp": skipped or "measured",
        "median_ms": {name: medians(per, warm_up=True) for name, per in samples.items()},
        "same_drafts": {g.label: identical(g.drafts_made, plain) for g in on_llama[1:]},
    }


def identical(drafts: list[list[int]], plain: list[list[int]]) -> list[int]:
    """[drafts equal, token for token, to the plain loop's at the same place; drafts]."""
    return [sum(a == b for a, b in zip(drafts, plain, strict=True)), len(plain)]


def report_parts(
    data: dict[str, Any], precision: str, kernels: dict[str, dict[str, float]] | None = None
) -> list[str]:
    """The prompt-lookup section: a table a workload, the product's ``precision`` over
    llama.cpp's fastest way at each thread count, and what a check forward cost (beside
    ``kernels``: the run's kernel rows, llama.cpp's prefill and one-row step among them)."""
    medians_ = data["median_ms"]
    parts = [
        "llama.cpp's own speculation beside the product (`--prompt-lookup`, issue 54 item 5): "
        "the same cold 256-token prompt of code, the same token ids, greedy drafts of 24 "
        "tokens, interleaved with the rows above. The product: greedy for 1 draft, superposed "
        "for 3. `llama.cpp`: the product's llama.cpp runner, 3 drafts as 3 sequences sharing "
        "the prompt's cells, one batch a token. `llama.cpp generate`: llama-cpp-python's own "
        "loop (`Llama.generate`), the 3 drafts one generation after another, each from one of "
        "the prompt's 3 best first tokens and reusing the prompt's cells. `llama.cpp prompt "
        "lookup N`: the same with `LlamaPromptLookupDecoding(num_pred_tokens=N)` (a 2-gram "
        "match in what it has read proposes up to N tokens, one forward checks them). Tokens/s "
        "counts the drafts' tokens (24, or 72) over the whole request, prefill included; "
        "forwards: those run after the prefill."
    ]
    if data["llama_cpp"] != "measured":
        parts.append(f"llama.cpp's prompt lookup: {data['llama_cpp']}.")
    for key, k in WORKLOADS.items():
        rows = [_row(name, per, key, k) for name, per in medians_.items() if key in per]
        parts += [
            f"{key}:",
            table(
                ["way @threads", "ms", "tokens/s", "ms after the prefill", "forwards"],
                rows,
                "lrrrr",
            ),
        ]
    if data["llama_cpp"] == "measured":
        parts.append(_versus(medians_, precision))
        if (costs := _check_costs(medians_, kernels or {})) is not None:
            parts.append(costs)
        same = data["same_drafts"]
        parts.append(
            "Prompt lookup's drafts identical, token for token, to `Llama.generate`'s plain "
            "greedy ones: "
            + ", ".join(f"{label} {n} of {total}" for label, (n, total) in same.items())
            + " (greedy either way; a draft that differs took the other side of a near-tie, "
            "where a forward over several positions computes logits a little apart from one "
            "position's)."
        )
    return parts


def _row(name: str, per: dict[str, float], key: str, drafts: int) -> list[Any]:
    ms = per[key]
    tokens_per_second = f"{drafts * TOKENS * 1e3 / ms:.1f}"
    return [name, ms, tokens_per_second, per[key + DECODE], f"{per[key + FORWARDS]:.0f}"]


def _check_costs(
    medians_: dict[str, dict[str, float]], kernels: dict[str, dict[str, float]]
) -> str | None:
    """Per thread count: llama.cpp's prefill per token and one-row step (the kernel rows),
    and the ms per forward after the prefill of 1 draft, plain and with prompt lookup."""
    key = next(iter(WORKLOADS))
    said = []
    for name, per in kernels.items():
        label, threads = name.rsplit(" @", 1)
        if label != RUNNER or "prefill 256" not in per or "step b1" not in per:
            continue
        ways = [
            f"{'plain' if other.startswith(GENERATE) else other.rsplit(' @', 1)[0]} "
            f"{row[key + DECODE] / row[key + FORWARDS]:.0f} ms a forward, "
            f"{row[key + FORWARDS]:.0f} forwards"
            for other, row in medians_.items()
            if other.endswith(f" @{threads}") and other.startswith((GENERATE, LOOKUP))
        ]
        said.append(
            f"at {threads} thread(s) its prefill took {per['prefill 256'] / 256:.1f} ms a token "
            f"in a batch, a one-row step {per['step b1']:.1f} ms; after the prefill of 1 draft: "
            + ", ".join(ways)
        )
    if not said:
        return None
    return (
        "What prompt lookup's checks cost llama.cpp here (a check is one forward over the "
        "draft's last token and the proposed ones): " + "; ".join(said) + "."
    )


def _versus(medians_: dict[str, dict[str, float]], precision: str) -> str:
    """The product's ``precision`` over llama.cpp's fastest way, per workload and thread
    count: the whole request, and its part after the prefill."""
    said = []
    for name, ours in medians_.items():
        label, threads = name.rsplit(" @", 1)
        if label != precision:
            continue
        for key in WORKLOADS:
            parts = []
            for part, words in ((key, ""), (key + DECODE, "after the prefill ")):
                theirs = {
                    other.rsplit(" @", 1)[0]: per[part]
                    for other, per in medians_.items()
                    if other.endswith(f" @{threads}") and other.startswith(RUNNER) and part in per
                }
                if theirs:
                    best = min(theirs, key=lambda way: theirs[way])
                    parts.append(
                        f"{words}{ours[part] / theirs[best]:.2f}x ({best}, {theirs[best]:,.0f} ms)"
                    )
            if parts:
                said.append(f"{key} at {threads} thread(s): " + ", ".join(parts))
    return (
        f"The product ({precision}) over llama.cpp's fastest way at the same thread count "
        "(below 1: the product is faster): " + "; ".join(said) + "."
    )


def round_samples(
    products: dict[str, Engine],
    runner: Any,
    on_llama: list[LlamaGenerate],
    threads: int,
    text: str,
    ids: list[int],
) -> dict[str, dict[str, float]]:
    """One sample of each workload on every row, in turn: the product's kernel sets
    (``text``, which they tokenize to ``ids``), the product's llama.cpp runner where there is
    one, and Llama.generate plain and with prompt lookup (each at ``threads``)."""
    out = {label: product_sample(engine, text) for label, engine in products.items()}
    if runner is not None:
        out[RUNNER] = runner_sample(runner, ids)
    for generator in on_llama:
        generator.set_threads(threads)
        out[generator.label] = generator.sample(ids)
    return out
