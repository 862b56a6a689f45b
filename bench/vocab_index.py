"""Token healing's vocabulary index on each embedded model: build time, memory, and the cost
of a heal constraint (the mask of tokens a draft may start with) on the request path.

Gemma 3's vocabulary is 5.3x SmolLM2's (262,144 tokens against 49,152), and a broad heal
prefix such as b" " (the cursor after "x = ") is extended by half of it. The mask used to be
built from a Python list of those ids on every decode step that still owed healed bytes;
it is now one slice of a sorted id tensor, cached per prefix, and the whitespace runs are
computed at load (``Vocab.warm``), with their id tuples (which the memory's candidates
check). Both ways are timed here side by side, interleaved, medians of ``--runs``, one
thread; "cached" is what a request pays once a prefix was seen (or warmed).

    python -m bench.vocab_index
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import time
import tracemalloc
from functools import partial
from typing import Any

import torch

from bench.measure import Stamp, median_ms
from bench.pipeline import Benchmark, run
from bench.tables import table
from superposed.embedded import EMBEDDED, EmbeddedModel
from superposed.vocab import Vocab

# Heal prefixes as requests meet them: whitespace after an indentation or "x = ", a newline,
# the start of a name (a broad one, "s", and narrower ones).
PREFIXES = (b" ", b"    ", b"        ", b"\n", b"s", b"re", b"self", b"(")


def list_built_mask(vocab: Vocab, prefix: bytes, size: int) -> torch.Tensor:
    """The mask as it was built before: from the Python tuple of consistent ids."""
    mask = torch.zeros(size, dtype=torch.bool)
    ids = [i for i in vocab.consistent_ids(prefix) if i < size]
    mask[torch.tensor(ids, dtype=torch.long)] = True
    return mask


def build_cost(tokenizer: Any, runs: int) -> dict[str, float]:
    """Vocab.from_tokenizer: median seconds; retained and peak Python memory (one build)."""
    seconds = statistics.median(
        median_ms(lambda: Vocab.from_tokenizer(tokenizer), 1) / 1e3 for _ in range(runs)
    )
    gc.collect()
    tracemalloc.start()
    vocab = Vocab.from_tokenizer(tokenizer)
    retained, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del vocab
    return {"s": round(seconds, 2), "retained MB": round(retained / 1e6, 1),
            "peak MB": round(peak / 1e6, 1)}  # fmt: skip


def prefix_costs(vocab: Vocab, size: int, runs: int) -> dict[str, dict[str, Any]]:
    """Per prefix: ms for the list-built mask (before), the tensor mask uncached and cached."""
    cpu = torch.device("cpu")
    out: dict[str, dict[str, Any]] = {}
    for prefix in PREFIXES:
        vocab.consistent_ids(prefix)  # both ways start from a cached id tuple / index
        assert torch.equal(list_built_mask(vocab, prefix, size),
                           vocab.consistent_mask(prefix, size, cpu))  # fmt: skip
        before, cold, cached, ids_cold = [], [], [], []

        def uncached(p: bytes = prefix) -> None:
            Vocab.consistent_mask.cache_clear()
            vocab.consistent_mask(p, size, cpu)

        def ids_uncached(p: bytes = prefix) -> None:
            Vocab.consistent_ids.cache_clear()
            vocab.consistent_ids(p)

        for _ in range(runs):  # interleaved: all three see the same machine load
            before.append(median_ms(partial(list_built_mask, vocab, prefix, size), 1))
            cold.append(median_ms(uncached, 1))
            vocab.consistent_mask(prefix, size, cpu)
            cached.append(median_ms(partial(vocab.consistent_mask, prefix, size, cpu), 1))
            ids_cold.append(median_ms(ids_uncached, 1))
        b, c = statistics.median(before), statistics.median(cold)
        out[repr(prefix)] = {
            "ids": len(vocab.consistent_ids(prefix)),
            "ids uncached ms": round(statistics.median(ids_cold), 3),
            "list-built ms": round(b, 3),
            "tensor ms": round(c, 3),
            "cached ms": round(statistics.median(cached), 4),
            "list / tensor": round(b / c, 1),
        }
    return out


def measure(model: EmbeddedModel, runs: int) -> dict[str, Any]:
    from transformers import AutoTokenizer

    from superposed.model import embedded_model_dir

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir(model))
    vocab = Vocab.from_tokenizer(tokenizer)
    size = len(vocab)
    Vocab.consistent_mask.cache_clear()
    Vocab.consistent_ids.cache_clear()
    start = time.perf_counter()
    vocab.warm(size, torch.device("cpu"))
    warm_s = time.perf_counter() - start
    return {
        "vocabulary": size,
        "build": build_cost(tokenizer, max(3, runs // 5)),
        "warm at load s": round(warm_s, 3),
        "prefixes": prefix_costs(vocab, size, runs),
    }


def tables(results: dict[str, Any]) -> list[str]:
    builds = [
        [name, r["vocabulary"], b["s"], b["retained MB"], b["peak MB"], r["warm at load s"]]
        for name, r in results["models"].items()
        for b in [r["build"]]
    ]
    heals = [
        [
            name,
            f"`{prefix}`",
            p["ids"],
            p["ids uncached ms"],
            p["list-built ms"],
            p["tensor ms"],
            f"{p['list / tensor']}x",
            p["cached ms"],
        ]
        for name, r in results["models"].items()
        for prefix, p in r["prefixes"].items()
    ]
    return [
        table(
            ["model", "vocabulary", "Vocab build s", "retained MB", "peak MB", "warm at load s"],
            builds,
            "lrrrrr",
        ),
        "",
        table(
            [
                "model",
                "heal prefix",
                "ids allowed",
                "id tuple ms, uncached",
                "list-built mask ms (before)",
                "tensor mask ms",
                "ratio",
                "cached ms",
            ],
            heals,
            "llrrrrrr",
        ),
    ]


def measure_models(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    """Each installed embedded model's index build and prefix lookups, on one thread."""
    torch.set_num_threads(1)
    stamp = Stamp(model=", ".join(EMBEDDED))
    installed = [m for m in EMBEDDED.values() if importlib.util.find_spec(m.package) is not None]
    return {"models": {m.name: measure(m, args.runs) for m in installed}, "runs": args.runs}, stamp


def markdown(results: dict[str, Any]) -> str:
    """vocab_index.md: the stamp line and the tables."""
    s, runs = results["stamp"], results["runs"]
    lines = [
        "# Token healing's vocabulary index (bench/vocab_index.py)",
        "",
        f"`{s['command']}`: {s['date']}, commit {s['commit']}, {s['machine']}, 1 thread, "
        f"medians of {runs} (build: of {max(3, runs // 5)}), load {s['load_start']} "
        f"at start, {s['load_end']} at end.",
        "",
        *tables(results),
    ]
    return "\n".join(lines) + "\n"


BENCH = Benchmark(
    "vocab_index",
    __doc__.splitlines()[0],
    options=lambda parser: parser.add_argument("--runs", type=int, default=21),
    markdown=markdown,
)


def main(argv: list[str] | None = None) -> None:
    run(BENCH, measure_models, lambda results: [markdown(results).rstrip("\n")], argv)


if __name__ == "__main__":
    main()
