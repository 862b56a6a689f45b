"""The device script (issues 25, 37): everything the GPU work measures, in one run.

A lent GPU machine sees the working tree and at most 64 MiB of carried files, and reaches no
registry: the weights cannot travel. So each model runs with random weights of its exact
shape, made on the device from its config, with its real tokenizer (the speed does not
depend on the values; the quality is measured on the CPU, where the equivalence tests tie
the two paths). What travels is made here first (bench/gpu_carry.py: the shapes and the
wheels the image lacks; ``python -m bench.gpu prepare``, then ``rehearse``); then on the
device, carrying bench/results/tmp/gpu-carry, in under 8 minutes:

    sh bench/gpu.sh                    # installs the wheels, unpacks, python -m bench.gpu run

and the dry run, which takes every step on the CPU with tiny models and few repetitions
(tests/test_gpu_script.py runs it):

    python -m bench.gpu run --device cpu --out /tmp/gpu-dry

Steps, in this order, each recorded in ``gpu.json`` (a failed or timed-out step is recorded
and the next one runs; past ``--budget-s`` the rest are skipped):

1. ``tests``: the CUDA tests (tests/test_cuda.py, tests/test_cuda_graph.py);
2. ``shapes``: each model's random weights, saved as a model directory;
3. ``targets``: issue 25's targets per model: the decode step of 1 and 3 rows and the
   verify batch, eager and through CUDA graphs, after a 1,000-token prompt; requests of 24
   tokens on that prompt, cached (superposed k=3 and greedy), eager and with graphs; and the
   CPU default's request (SmolLM2 int4, one thread), for the default-model rule;
4. ``decide``: ``gpu-models.json``, the rule's numbers (lsp_server/device_model.py);
5. ``lsp``: the language server over stdio on the device: requests in freshly opened
   1,000-token files, p50 (bench/lsp_latency/client.py);
6. ``latency``: ``bench.latency`` for both shapes, eager and graphs (latency-cuda-*.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch

from bench.common import fast_runner
from bench.gpu_carry import CARRY_DIR, DEVICE_PYTHON, SHAPES_DIR, pack, prepare, rehearse
from bench.measure import ROOT
from superposed.embedded import DEFAULT_MODEL, EMBEDDED, GEMMA3

TESTS = ["tests/test_cuda.py", "tests/test_cuda_graph.py"]
PROMPT_TOKENS = 1000  # the cached prompt of the targets (issue 25)


@dataclass(frozen=True)
class Sizes:
    """How much each step repeats: the device's, or the dry run's few."""

    new_tokens: int = 24  # a request's (issue 25's target)
    steps: int = 16  # decode steps per timing
    repeats: int = 7  # timings (medians)
    requests: int = 9  # requests per case (p50)
    lsp_requests: int = 8
    latency_runs: int = 3  # bench.latency --runs
    tests_timeout_s: int = 240


DEVICE_SIZES = Sizes()
DRY_SIZES = Sizes(new_tokens=4, steps=2, repeats=1, requests=1, lsp_requests=2, latency_runs=1)


@dataclass
class Run:
    """The run's record: each step's outcome and time, saved after every step."""

    out: Path
    budget_s: float
    started: float = field(default_factory=time.perf_counter)
    record: dict[str, Any] = field(default_factory=dict)

    def step(self, name: str, work: Callable[[], Any]) -> Any:
        """Run one step; its result (JSON-able) or its error go into gpu.json."""
        elapsed = time.perf_counter() - self.started
        if elapsed > self.budget_s:
            self.record[name] = {"status": "skipped", "why": f"past the budget at {elapsed:.0f} s"}
            return None
        begin = time.perf_counter()
        try:
            result = work()
            entry: dict[str, Any] = {"status": "ok", "result": result}
        except Exception as err:  # a step's failure is a result; the next step still runs
            traceback.print_exc()
            result, entry = None, {"status": "failed", "error": f"{type(err).__name__}: {err}"}
        entry["seconds"] = round(time.perf_counter() - begin, 1)
        self.record[name] = entry
        print(f"[gpu] {name}: {entry['status']} in {entry['seconds']} s", flush=True)
        self.save()
        return result

    def save(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "gpu.json").write_text(json.dumps(self.record, indent=1, default=str) + "\n")


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


# --- shapes -----------------------------------------------------------------------------------


def tiny_shapes(into: Path) -> dict[str, Path]:
    """The dry run's shapes: a tiny Llama and a tiny Gemma 3 with a 512-token BPE."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Gemma3TextConfig, LlamaConfig, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = [(ROOT / "superposed" / name).read_text() for name in ("superposed.py", "types.py")]
    bpe.train_from_iterator(corpus, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>")
    shape: dict[str, Any] = dict(
        vocab_size=512, hidden_size=64, intermediate_size=128, num_attention_heads=4
    )
    shape.update(num_key_value_heads=2, max_position_embeddings=2048, tie_word_embeddings=True)
    configs = {
        DEFAULT_MODEL: LlamaConfig(num_hidden_layers=2, **shape),
        GEMMA3.name: Gemma3TextConfig(
            num_hidden_layers=2,
            head_dim=16,
            sliding_window=64,
            layer_types=["sliding_attention", "full_attention"],
            **shape,
        ),
    }
    out = {}
    for name, config in configs.items():
        target = into / name
        config.save_pretrained(target)
        tokenizer.save_pretrained(target)
        out[name] = target
    return out


def with_random_weights(shape: Path, into: Path, device: str) -> Path:
    """A model directory of ``shape``'s config and tokenizer, with random weights (seed 0)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    target = into / f"{shape.name}-shape-random-weights"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(shape, target)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(shape), dtype=dtype)
    model.save_pretrained(target)
    return target


# --- targets ----------------------------------------------------------------------------------


def step_ms(runner: Any, prompt: list[int], rows: int, sizes: Sizes) -> float:
    """Median ms of one decode step of ``rows`` rows after ``prompt`` (graphs warmed first)."""
    times = []
    for repeat in range(sizes.repeats + 1):
        runner.rewind(0) if repeat == 0 else runner.rewind(len(prompt))
        if repeat == 0:
            runner.prefill(prompt)
        runner.expand(rows)
        embeds = runner.embed(torch.arange(rows)[:, None])  # [R, 1, H]
        runner.step(embeds)  # the first step at this shape captures its graph
        sync()
        start = time.perf_counter()
        for _ in range(sizes.steps):
            runner.step(embeds)
        sync()
        times.append((time.perf_counter() - start) * 1e3 / sizes.steps)
    runner.rewind(len(prompt))
    return round(statistics.median(times[1:]), 3)


def verify_ms(runner: Any, prompt: list[int], sizes: Sizes) -> float:
    """Median ms of the verify batch: 3 drafts of a request's tokens scored after ``prompt``."""
    drafts = torch.arange(3 * (sizes.new_tokens + 1)).reshape(3, -1).to(runner.device)
    times = []
    for _ in range(sizes.repeats + 1):
        runner.rewind(len(prompt))
        runner.expand(3)
        sync()
        start = time.perf_counter()
        runner.score(drafts)
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    runner.rewind(len(prompt))
    return round(statistics.median(times[1:]), 3)


def request_ms(engine: Any, text: str, method: str, sizes: Sizes) -> dict[str, float]:
    """p50 ms of a request of ``sizes.new_tokens`` tokens on ``text``, its prompt cached, and of the
    engine's own split (prefill of the last token, the steps, the host's share)."""
    from superposed.types import DecodeConfig

    k = 3 if method == "superposed" else 1
    cfg = DecodeConfig(k=k, max_new_tokens=sizes.new_tokens, seed=0)
    engine.complete(text, method="greedy", cfg=DecodeConfig(k=1, max_new_tokens=1))  # cache
    engine.complete(text, method=method, cfg=cfg)  # the graphs of this request's shapes
    total, steps, prefill = [], [], []
    for _ in range(sizes.requests):
        sync()
        start = time.perf_counter()
        done = engine.complete(text, method=method, cfg=cfg)
        sync()
        total.append((time.perf_counter() - start) * 1e3)
        steps.append(done.timing_ms["steps"])
        prefill.append(done.timing_ms["prefill"])
    return {
        "p50_ms": round(statistics.median(total), 2),
        "steps_p50_ms": round(statistics.median(steps), 2),
        "prefill_p50_ms": round(statistics.median(prefill), 2),
    }


@torch.inference_mode()  # as the runners' own calls: the cache is made in it
def time_targets(name: str, model_dir: Path, device: str, sizes: Sizes) -> dict[str, Any]:
    """One model's steps and requests on ``device``, eager and with graphs."""
    from bench.latency import code_context
    from superposed.api import Engine
    from superposed.model import load_model

    loaded = load_model(str(model_dir), device)
    text = code_context(loaded.tokenizer, PROMPT_TOKENS)
    prompt = loaded.tokenizer.encode(text, add_special_tokens=False)
    out: dict[str, Any] = {"prompt_tokens": len(prompt), "device": device_name(device)}
    for variant in ("bf16", "bf16-graphs"):
        runner = fast_runner(loaded, variant)
        part: dict[str, Any] = {
            "step 1 row ms": step_ms(runner, prompt, 1, sizes),
            "step 3 rows ms": step_ms(runner, prompt, 3, sizes),
            "verify batch ms": verify_ms(runner, prompt, sizes),
        }
        engine = Engine(loaded, runner=runner)
        for method in ("superposed", "greedy"):
            part[f"{method} request"] = request_ms(engine, text, method, sizes)
        superposed, greedy = part["superposed request"], part["greedy request"]
        part["superposed / greedy"] = round(superposed["p50_ms"] / greedy["p50_ms"], 3)
        out[variant] = part
        print(f"[gpu] {name} {variant}: {json.dumps(part)}", flush=True)
        del engine, runner
    if name == DEFAULT_MODEL:  # the CPU default, for the default-model rule
        torch.set_num_threads(1)
        on_cpu = load_model(str(model_dir), "cpu")
        engine = Engine(on_cpu, runner=fast_runner(on_cpu, "int4"))
        out["cpu default (int4, 1 thread)"] = request_ms(engine, text, "superposed", sizes)
    return out


def device_name(device: str) -> str:
    return torch.cuda.get_device_name() if device == "cuda" else "cpu"


def decide(targets: dict[str, Any], out: Path, sizes: Sizes) -> dict[str, Any]:
    """gpu-models.json: each model's superposed request p50 by device, and the rule's verdict."""
    from lsp_server.device_model import RequestTimes, cuda_default

    p50: dict[str, dict[str, float]] = {}
    for name, measured in targets.items():
        p50[name] = {"cuda": measured["bf16-graphs"]["superposed request"]["p50_ms"]}
        if "cpu default (int4, 1 thread)" in measured:
            p50[name]["cpu"] = measured["cpu default (int4, 1 thread)"]["p50_ms"]
    times = RequestTimes(p50[GEMMA3.name]["cuda"], p50[DEFAULT_MODEL]["cpu"])
    result = {
        "request": f"superposed k=3, {sizes.new_tokens} new tokens, a cached "
        f"{PROMPT_TOKENS}-token prompt; cuda: bf16 with CUDA graphs; cpu: int4, one thread",
        "device": next(iter(targets.values()))["device"],
        "request_p50_ms": p50,
        "default_on_cuda": cuda_default(times),
    }
    if result["device"] == "cpu":  # the server ignores a dry run's file (device_model.py)
        result["dry_run"] = True
    (out / "gpu-models.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


# --- tests, the language server, bench.latency -------------------------------------------------

SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")


def run_tests(command: list[str], out: Path, timeout_s: float) -> dict[str, Any]:
    """Run the test command; its output in tests.txt, its summary counts returned."""
    out.mkdir(parents=True, exist_ok=True)  # the first step: nothing has made it yet
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        output, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as err:
        printed = err.stdout.decode() if isinstance(err.stdout, bytes) else err.stdout or ""
        output, code = f"{printed}\ntimed out after {timeout_s} s", -1
    (out / "tests.txt").write_text(output)
    lines = [line for line in output.splitlines() if SUMMARY.search(line)]
    counts = {kind: int(n) for n, kind in SUMMARY.findall(lines[-1])} if lines else {}
    return {"command": " ".join(command), "exit": code, "counts": counts}


def fresh_file_text(tokenizer: Any, start_line: int) -> str:
    """A Python file of about PROMPT_TOKENS tokens: lines of bench.lsp_latency's long
    source from ``start_line``, whole lines, at least PROMPT_TOKENS tokens."""
    from bench.lsp_latency import LONG_SOURCE

    lines = LONG_SOURCE.read_text().split("\n")[start_line:]
    text = ""
    for line in lines:
        text += line + "\n"
        if len(text) > 2 * PROMPT_TOKENS and len(tokenizer.encode(text)) >= PROMPT_TOKENS:
            break
    return text.rstrip("\n")


async def lsp_requests(model_dir: Path, device: str, sizes: Sizes) -> dict[str, Any]:
    """Requests in freshly opened 1,000-token files over stdio, each file new to the server."""
    import tempfile

    from lsprotocol import types
    from transformers import AutoTokenizer

    from bench.lsp_latency import Bench, server, summary

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    options: dict[str, Any] = {"model": str(model_dir), "device": device, "k": 3}
    options.update(userStore=False, compile="background" if device == "cuda" else "off")
    with tempfile.TemporaryDirectory(prefix="gpu-lsp-") as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        started = time.perf_counter()
        async with server(workspace, Path(tmp) / "data", options) as client:
            bench = Bench(client, workspace)
            await bench.wait_ready()
            ready_s = time.perf_counter() - started
            times = []
            for i in range(sizes.lsp_requests + 1):  # the first one warms up (graphs captured)
                text = fresh_file_text(tokenizer, 40 * i)
                uri = bench.open(f"fresh_{i}.py", text)
                lines = text.split("\n")
                end = types.Position(line=len(lines) - 1, character=len(lines[-1]))
                elapsed, _ = await bench.inline(uri, end)
                if i > 0:
                    times.append(elapsed)
            stats = await bench.stats()
    return {
        "server_ready_s": round(ready_s, 1),
        "decode_step": stats.get("decodeStep"),
        "settings": {k: stats["settings"][k] for k in ("firstPromptTokens", "maxPromptTokens")},
        "fresh 1,000-token file": summary(times),
    }


def latency(model_dir: Path, device: str, sizes: Sizes, out: Path) -> dict[str, Any]:
    """bench.latency for one shape, eager and with graphs, into latency-cuda-<shape>.*"""
    from bench import latency as bench_latency

    target = out / f"latency-{'cuda' if device == 'cuda' else 'dry'}-{model_dir.name}"
    argv = ["--threads", "1", "--runners", "fast-bf16", "fast-bf16-graphs"]
    argv += ["--model", str(model_dir), "--device", device, "--runs", str(sizes.latency_runs)]
    bench_latency.main([*argv, "--out", str(target)])
    saved = json.loads(target.with_suffix(".json").read_text())
    return {"out": target.name, "steps": {r: v["steps"] for r, v in
                                          saved["threads"]["1"]["runners"].items()}}  # fmt: skip


# --- the run ----------------------------------------------------------------------------------

OPTIONAL_STEPS = ("tests", "lsp", "latency")  # shapes, targets and decide always run


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every step of the module docstring, within the budget; the record (gpu.json)."""
    device, out = args.device, args.out
    sizes = DEVICE_SIZES if device == "cuda" else DRY_SIZES
    state = Run(out, args.budget_s)
    state.record["meta"] = {"device": device_name(device), "torch": torch.__version__,
                            "argv": sys.argv[1:], "steps": list(args.steps)}  # fmt: skip
    work = out / "models"
    if "tests" in args.steps:
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS]
        state.step("tests", lambda: run_tests(command, out, sizes.tests_timeout_s))
    shapes: Path = args.shapes or SHAPES_DIR
    if device == "cpu" and args.shapes is None:
        shapes = work / "tiny"
        tiny_shapes(shapes)

    def random_weights() -> dict[str, Path]:
        return {name: with_random_weights(shapes / name, work, device) for name in EMBEDDED}

    dirs: dict[str, Path] = state.step("shapes", random_weights) or {}
    targets: dict[str, Any] = {}
    for name, model_dir in dirs.items():
        measured = state.step(
            f"targets {name}", partial(time_targets, name, model_dir, device, sizes)
        )
        if measured is not None:
            targets[name] = measured
    if len(targets) == len(EMBEDDED):
        state.step("decide", lambda: decide(targets, out, sizes))
    if "lsp" in args.steps and DEFAULT_MODEL in dirs:
        state.step("lsp", lambda: asyncio.run(lsp_requests(dirs[DEFAULT_MODEL], device, sizes)))
    if "latency" in args.steps:
        for name, model_dir in dirs.items():
            state.step(f"latency {name}", partial(latency, model_dir, device, sizes, out))
    state.record["meta"]["seconds"] = round(time.perf_counter() - state.started, 1)
    state.save()
    shutil.rmtree(work, ignore_errors=True)  # the random weights: not results
    return state.record


def failed_steps(record: dict[str, Any]) -> list[str]:
    """The steps that failed, the tests step included when its tests did (it ran, but red)."""
    return [
        name
        for name, entry in record.items()
        if entry.get("status") == "failed"
        or (isinstance(entry.get("result"), dict) and entry["result"].get("exit", 0) != 0)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="configs and tokenizers for the device")
    prep.add_argument("--into", type=Path, default=SHAPES_DIR)
    prep.add_argument("--carry", type=Path, default=CARRY_DIR, help="what travels (packed)")
    prep.add_argument("--python", default=DEVICE_PYTHON, help="the wheels' python version")
    sub.add_parser("rehearse", help="gpu.sh on the CPU in a venv of the image's packages")
    go = sub.add_parser("run", help="every step (on the device), or the dry run (--device cpu)")
    go.add_argument("--out", type=Path, required=True, help="results directory ($OUT)")
    go.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    go.add_argument("--shapes", type=Path, help="prepare's output (default: bench/results/tmp/"
                    "gpu-shapes; the dry run: tiny ones)")  # fmt: skip
    go.add_argument("--budget-s", type=float, default=360.0, help="no step starts after this")
    go.add_argument("--steps", nargs="*", choices=OPTIONAL_STEPS, default=list(OPTIONAL_STEPS),
                    help="the optional steps (shapes, targets, decide always run)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.command == "prepare":
        for name, path in prepare(args.into).items():
            print(name, path, sum(p.stat().st_size for p in path.iterdir()) // 2**20, "MiB")
        size = pack(args.into, args.carry, args.python)
        print(f"{args.carry}: {size / 2**20:.1f} MiB to carry")
        return 0
    if args.command == "rehearse":
        prepare(SHAPES_DIR)
        return rehearse(SHAPES_DIR)
    record = run(args)
    failed = failed_steps(record)
    print("[gpu] done:", json.dumps({"failed": failed, **record["meta"]}), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
