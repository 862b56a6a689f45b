"""What branching superposed drafts into rows (DecodeConfig.branch, superposed/rows.py) costs.

On the default CPU runner (Engine.load's, one thread, eager steps: compile off), side by
side in one run, interleaved round by round so the machine's noise falls on all alike:

- medians of the 1-row step, the 3-row step (rows: one per draft) and the superposed k=3
  step (one mixed input), each after the same prompt;
- request time (Engine.complete, no n-gram store) at line starts of this repository's own
  files, branch "off" against "split" and "first", and their ratios.

    flock /tmp/bench.lock python -m bench.branch_cost      # bench/results/branch_cost.json
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from bench.measure import RESULTS, ROOT, Stamp, write_json

OUT = RESULTS / "branch_cost.json"
FILES = ("superposed/rows.py", "superposed/verify.py", "superposed/hypotheses.py")
PROMPT_CHARS = 1500  # of the file before a timed request's cursor
STEPS = 8  # steps timed per round and kind, from the same prompt


def prompts(engine: Any, per_file: int) -> list[Any]:
    """Line-start cursors spread over FILES: the prompt before each."""
    out = []
    for name in FILES:
        lines = (ROOT / name).read_text().split("\n")
        for i in range(1, per_file + 1):
            before = "\n".join(lines[: len(lines) * i // (per_file + 1)]) + "\n"
            out.append(engine.prompt(before[-PROMPT_CHARS:], 24))
    return out


def step_ms(engine: Any, prompt: Any, kind: str) -> list[float]:
    """STEPS timed steps of one kind after ``prompt``; the cache is rewound after."""
    import torch

    from superposed.hypotheses import Hypothesis
    from superposed.superposed import superposed_step

    runner = engine.runner
    runner.rewind(0)
    logits = runner.prefill(prompt.ids)
    length = runner.length
    tokens = logits.topk(3).indices.tolist()
    hyps = [Hypothesis(tokens=[t], score=-float(i)) for i, t in enumerate(tokens)]
    ms = []
    try:
        if kind == "rows3":
            runner.expand(3)
        for _ in range(STEPS):
            start = time.perf_counter()
            if kind == "superposed3":
                superposed_step(runner, hyps)
            else:
                rows = 3 if kind == "rows3" else 1
                runner.step(runner.embed(torch.tensor([tokens[:rows]]).T))  # [B, 1, H]
            ms.append((time.perf_counter() - start) * 1e3)
    finally:
        runner.rewind(length)
    return ms


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from superposed.api import Engine
    from superposed.types import DecodeConfig

    began = time.perf_counter()
    stamp = Stamp(args.model)
    engine = Engine.load(args.model, threads=1, compile="off")
    stamp.runner = type(engine.runner).__name__ + " " + str(getattr(engine.runner, "precision", ""))
    cases = prompts(engine, args.per_file)
    steps: dict[str, list[float]] = {"rows1": [], "rows3": [], "superposed3": []}
    requests: dict[str, list[float]] = {"off": [], "split": [], "first": []}
    with torch.inference_mode():
        for prompt in cases:
            for kind in steps:
                steps[kind] += step_ms(engine, prompt, kind)
            engine.runner.rewind(0)
            engine.complete(prompt, cfg=DecodeConfig())  # the prompt's prefill, not timed
            for branch in requests:
                start = time.perf_counter()
                engine.complete(prompt, cfg=DecodeConfig(branch=branch))
                requests[branch].append((time.perf_counter() - start) * 1e3)
    step_p50 = {k: statistics.median(v) for k, v in steps.items()}
    request_p50 = {k: statistics.median(v) for k, v in requests.items()}
    result = {
        "stamp": stamp.finish(began),
        "prompts": len(cases),
        "step_ms_p50": step_p50,
        "step_ratio_to_rows1": {k: v / step_p50["rows1"] for k, v in step_p50.items()},
        "request_ms_p50": request_p50,
        "request_ratio_to_off": {k: v / request_p50["off"] for k, v in request_p50.items()},
    }
    for kind, value in step_p50.items():
        print(f"step {kind:12s} p50 {value:7.1f} ms  x{value / step_p50['rows1']:.2f}")
    for branch, value in request_p50.items():
        print(f"request branch={branch:6s} p50 {value:7.1f} ms  x{value / request_p50['off']:.2f}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--per-file", type=int, default=4, help="cursors per file")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    from pathlib import Path

    write_json(Path(args.out), run(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
