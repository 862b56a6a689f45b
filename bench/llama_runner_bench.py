"""The llama.cpp runner (superposed/llama_cpp_runner.py) beside the fast runner, through the
product's engine, one thread, interleaved in one run (issue 39).

Both are ``ModelRunner``s driven the same way: a 1-row step, a superposed k=3 step (one row
fed a mix of three token embeddings) and a 3-row step at 512 positions, and 3 drafts x 24
tokens from ``Engine.complete`` (superposed) after a cold 256-token prompt. Beside the
timings, how far llama.cpp's drafts agree with the fast runner's at int4 (the CPU default)
and fp32 (the reference): draft positions the same, token for token, until the first
difference, and teacher-forced over 64 positions of code: the best next token the same and
the logits' largest difference. Needs the ``llama`` extra (``make bench-llama``).

    flock /tmp/bench.lock .venv/bin/python -m bench.llama_runner_bench --rounds 3
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.latency import code_context
from bench.measure import RESULTS, Stamp, write_json
from bench.tables import table
from superposed.api import Engine
from superposed.runner import ModelRunner
from superposed.types import DecodeConfig

POSITIONS = 512  # the cache's filled length for the step timings
STEPS = ("step b1", "superposed k=3 step", "step b3")
REQUEST = "3 drafts x 24, cold 256"
MIX = (0.5, 0.3, 0.2)  # the superposed step's weights on the last three tokens' embeddings
RUNNERS = {"fast int4": ("fast", "int4"), "llama.cpp": ("llama.cpp", "auto")}
PROMPTS = [  # the agreement's prompts (tests/test_llama_cpp_runner.py's and the 256 tokens)
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "import os\nimport sys\n\ndef main(argv):\n    path = os.path.join(",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n",
    "    with open(filename) as f:\n        lines = f.",
]
NOTE = (
    "Measured on a shared 2-core machine while other processes ran (other engineers' tests): "
    "medians of interleaved samples, compare within the run only."
)


def _ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def step_ms(runner: ModelRunner, ids: list[int], key: str) -> float:
    """ms of one step of kind ``key`` after POSITIONS positions, then rewound."""
    embeds = runner.embed(torch.tensor([ids[POSITIONS - 3 : POSITIONS]]))  # [1, 3, H]
    rows = 3 if key == "step b3" else 1
    if key == "superposed k=3 step":
        x = (embeds * torch.tensor(MIX)[:, None]).sum(1, keepdim=True)  # [1, 1, H]
    else:
        x = embeds[:, -1:].expand(rows, 1, -1).contiguous()  # [rows, 1, H]
    runner.expand(rows)
    ms = _ms(functools.partial(runner.step, x))
    runner.rewind(POSITIONS)
    return ms


def drafts_ms(engine: Engine, text: str) -> float:
    """ms of 3 superposed drafts x 24 tokens from a cold cache after ``text``."""
    engine.runner.rewind(0)
    cfg = DecodeConfig(k=3, max_new_tokens=24, seed=0)
    return _ms(lambda: engine.complete(text, "superposed", cfg))


def agreement(a: Engine, b: Engine, texts: list[str]) -> dict[str, int]:
    """Draft positions where ``a``'s superposed drafts equal ``b``'s, up to the first
    difference of each draft, and the drafts equal whole."""
    same = total = whole = drafts = 0
    cfg = DecodeConfig(k=3, max_new_tokens=24, seed=0)
    for text in texts:
        for engine in (a, b):
            engine.runner.rewind(0)
        ours = [d.token_ids for d in a.complete(text, "superposed", cfg).drafts]
        theirs = [d.token_ids for d in b.complete(text, "superposed", cfg).drafts]
        for x, y in zip(ours, theirs, strict=True):
            pairs = enumerate(zip(x, y, strict=False))
            prefix = next((i for i, (s, t) in pairs if s != t), min(len(x), len(y)))
            same, total = same + prefix, total + max(len(x), len(y))
            whole, drafts = whole + (x == y), drafts + 1
    return {"same_positions": same, "positions": total, "same_drafts": whole, "drafts": drafts}


def next_token_agreement(
    a: Engine, b: Engine, ids: list[int], start: int, n: int
) -> dict[str, float]:
    """Teacher-forced: after each of ids[:start+1] .. ids[:start+n], whether ``a``'s and
    ``b``'s best next tokens are the same, and their logits' largest |difference|."""
    same, worst = 0, 0.0
    for engine in (a, b):
        engine.runner.rewind(0)
    for i in range(start, start + n):
        new = ids[: i + 1] if i == start else ids[i : i + 1]
        x, y = a.runner.prefill(new), b.runner.prefill(new)
        same, worst = same + int(x.argmax() == y.argmax()), max(worst, float((x - y).abs().max()))
    return {"same": same, "positions": n, "max_abs_logit_diff": round(worst, 3)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    stamp = Stamp(model="smollm2-135m", torch_threads=1)
    engines = {
        label: Engine.load(runner=kind, precision=precision, threads=1)
        for label, (kind, precision) in RUNNERS.items()
    }
    tokenizer = engines["fast int4"].tokenizer
    ids = tokenizer.encode(code_context(tokenizer, 600), add_special_tokens=False)
    text = code_context(tokenizer, 256)
    samples: dict[str, dict[str, list[float]]] = {label: {} for label in engines}
    for _ in range(args.rounds):
        for engine in engines.values():
            engine.runner.rewind(0)
            engine.runner.prefill(ids[:POSITIONS])
        for key in STEPS:
            for _ in range(args.steps):  # interleaved step by step
                for label, engine in engines.items():
                    samples[label].setdefault(key, []).append(step_ms(engine.runner, ids, key))
        for label, engine in engines.items():
            samples[label].setdefault(REQUEST, []).append(drafts_ms(engine, text))
    medians = {
        label: {key: round(statistics.median(v[1:] or v), 1) for key, v in per.items()}
        for label, per in samples.items()
    }  # the first sample warms up
    texts = [*PROMPTS, text]
    llama, others = engines["llama.cpp"], {"fast int4": engines.pop("fast int4")}
    others["fast fp32"] = Engine.load(runner="fast", precision="fp32", threads=1)
    agree = {label: agreement(llama, other, texts) for label, other in others.items()}
    forced = {label: next_token_agreement(llama, o, ids, 256, 64) for label, o in others.items()}
    return {
        "stamp": stamp.finish(started),
        "note": NOTE,
        "positions": POSITIONS,
        "rounds": args.rounds,
        "median_ms": medians,
        "agreement": agree,
        "next_token": forced,
    }


def report(data: dict[str, Any]) -> str:
    """The result as markdown: the timings side by side, then the drafts' agreement."""
    m = data["median_ms"]
    fast, llama = m["fast int4"], m["llama.cpp"]
    rows = [
        [key, f"{fast[key]:,.1f}", f"{llama[key]:,.1f}", f"{fast[key] / llama[key]:.2f}x"]
        for key in (*STEPS, REQUEST)
    ]
    timings = table(["ms, 1 thread", "fast runner int4", "llama.cpp runner", "fast / llama"], rows)
    agree = [
        [
            f"llama.cpp vs {other}",
            f"{a['same_positions']} of {a['positions']}",
            f"{a['same_drafts']} of {a['drafts']}",
        ]
        for other, a in data["agreement"].items()
    ]
    agreement_table = table(
        ["superposed k=3 x 24", "positions the same", "drafts the same", "next token (forced)"],
        [
            [*row, "{same} of {positions}, logits within {max_abs_logit_diff}".format(**forced)]
            for row, forced in zip(agree, data["next_token"].values(), strict=True)
        ],
    )
    stamp = data["stamp"]
    return (
        f"{timings}\n\n{agreement_table}\n\n"
        "Drafts: positions the same up to each draft's first difference. Next token: "
        "teacher-forced over 64 positions of code after 256, the best next token the same, "
        "and the logits' largest difference over the whole vocabulary (the int4 head is "
        "coarse outside its best tokens, quant.RefinedHead). "
        f"Steps at {data['positions']} positions, medians of {data['rounds']} rounds; "
        f"{data['note']} Commit {stamp['commit']}, {stamp['date']}, {stamp['machine']}.\n"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8, help="steps of each kind a round")
    parser.add_argument("--out", default=str(RESULTS / "llama_cpp_runner"))
    args = parser.parse_args(argv)
    data = run(args)
    write_json(Path(args.out + ".json"), data)
    text = report(data)
    Path(args.out + ".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
