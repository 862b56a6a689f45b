"""What the quality benchmarks share: the standard-library split, metrics, bootstrap, stamps.

The next-line protocol splits one CPython standard library (one version only: versions share
most lines, so mixing them leaks test lines into the index) by a hash of each file's top-level
package directory (a top-level module is its own unit): 10% test, 5% validation (for tuning
alpha and tau), 85% indexed. Whole packages stay on one side, so the index never holds a
sibling module of a held-out file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
DATA = ROOT / "bench" / "data"
STDLIB = Path("/root/.pyenv/versions/3.11.7/lib/python3.11")
SPLIT_SALT = "superposed-lsp-split-v1"  # the fixed seed of the split
TEST_BUCKETS = range(0, 10)  # of 100: 10% of the package directories
VALIDATION_BUCKETS = range(10, 15)  # 5%: tuning only, never indexed, never reported as test
SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "__pycache__"}
# Generated code, not written by people: the codec tables of encodings/ (gencodec.py output).
GENERATED_UNITS = {"encodings"}
MAX_FILE_BYTES = 400_000  # generated data tables, not code


# ----- the split ------------------------------------------------------------------------------


def stdlib_root() -> Path:
    """The one standard library the benchmarks read (BENCH_STDLIB overrides the default)."""
    return Path(os.environ.get("BENCH_STDLIB", STDLIB))


def split_unit(rel: Path) -> str:
    """The unit the split hashes: the top-level package directory, or the top-level module."""
    return rel.parts[0]


def bucket(unit: str, salt: str = SPLIT_SALT) -> int:
    """A stable bucket 0..99 for a unit (sha256, not Python's salted hash)."""
    return int(hashlib.sha256(f"{salt}:{unit}".encode()).hexdigest(), 16) % 100


def part_of(rel: Path) -> str:
    """'test', 'validation' or 'train' for a file path relative to the library root."""
    b = bucket(split_unit(rel))
    if b in TEST_BUCKETS:
        return "test"
    if b in VALIDATION_BUCKETS:
        return "validation"
    return "train"


def is_source(rel: Path) -> bool:
    """A non-test Python module of the library."""
    return (
        rel.suffix == ".py"
        and not SKIP_DIRS.intersection(rel.parts[:-1])
        and not rel.name.startswith("test_")
        and not rel.parts[0].startswith("config-")
        and rel.parts[0] not in GENERATED_UNITS
    )


def library_files(root: Path) -> dict[str, list[Path]]:
    """The library's source files (relative paths, sorted) in each part of the split."""
    parts: dict[str, list[Path]] = {"train": [], "validation": [], "test": []}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if is_source(rel) and path.stat().st_size <= MAX_FILE_BYTES:
            parts[part_of(rel)].append(rel)
    return parts


def read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


# ----- next-line tasks ------------------------------------------------------------------------


@dataclass(frozen=True)
class LineTask:
    """Complete one line: the cursor sits after the line's indentation (as an editor leaves it)."""

    source: str  # file (relative path) or item id
    line: int  # 0-based line number
    prompt: str  # all text before the cursor
    target: str  # the rest of the line, without its newline and trailing whitespace


def line_tasks(name: str, text: str) -> list[LineTask]:
    """Every non-blank line after the first of a file, as a task."""
    lines = text.splitlines(keepends=True)
    tasks: list[LineTask] = []
    offset = len(lines[0]) if lines else 0
    for i in range(1, len(lines)):
        line = lines[i]
        body = line.rstrip()
        target = body.lstrip()
        if target:
            indent = body[: len(body) - len(target)]
            tasks.append(LineTask(name, i, text[:offset] + indent, target))
        offset += len(line)
    return tasks


def sample_tasks(files: Mapping[str, str], n: int, seed: int = 0) -> list[LineTask]:
    """n tasks drawn without replacement, in a fixed shuffled order: a smaller n is a prefix."""
    every = [t for name in sorted(files) for t in line_tasks(name, files[name])]
    random.Random(seed).shuffle(every)
    return every[:n]


# ----- metrics --------------------------------------------------------------------------------


def normalize(text: str) -> str:
    """Whitespace-normalised text: runs of whitespace become one space, ends stripped."""
    return " ".join(text.split())


def exact_match(drafts: Sequence[str], target: str) -> bool:
    """Does any draft equal the target, whitespace-normalised?"""
    want = normalize(target)
    return any(normalize(d) == want for d in drafts)


def edit_similarity(a: str, b: str) -> float:
    """1 - Levenshtein(a, b) / max(len a, len b); 1 for two empty strings."""
    from rapidfuzz.distance import Levenshtein

    return float(Levenshtein.normalized_similarity(a, b))


def chars_saved(draft: str, target: str) -> float:
    """The share of the target's characters a draft types correctly before it first differs."""
    n = 0
    for x, y in zip(draft, target, strict=False):
        if x != y:
            break
        n += 1
    return n / len(target) if target else 0.0


def line_metrics(drafts: Sequence[str], target: str) -> dict[str, float]:
    """Exact match, edit similarity and characters saved at 1 (first draft) and at k (best)."""
    drafts = [d.rstrip() for d in drafts]
    first = drafts[:1] or [""]
    return {
        "em1": float(exact_match(first, target)),
        "emk": float(exact_match(drafts, target)),
        "es1": edit_similarity(first[0], target),
        "esk": max((edit_similarity(d, target) for d in drafts), default=0.0),
        "cs1": chars_saved(first[0], target),
        "csk": max((chars_saved(d, target) for d in drafts), default=0.0),
        "empty": float(not first[0].strip()),
        "empty_any": float(any(not d.strip() for d in drafts) or not drafts),
    }


def distinct_ratio(tokens: Sequence[Any], n: int) -> float:
    """Unique n-grams / all n-grams of one sequence (1: no repetition); nan if too short."""
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(set(grams)) / len(grams) if grams else float("nan")


def self_bleu(drafts: Sequence[str]) -> float:
    """Mean sentence BLEU (0..100) of each draft against the other drafts: high = alike."""
    from sacrebleu.metrics import BLEU

    if len(drafts) < 2:
        return float("nan")
    bleu = BLEU(effective_order=True, tokenize="13a")
    scores = [
        bleu.sentence_score(d, [o for j, o in enumerate(drafts) if j != i]).score
        for i, d in enumerate(drafts)
    ]
    return float(np.mean(scores))


# ----- confidence intervals -------------------------------------------------------------------


def bootstrap_ci(
    values: Sequence[float], n_boot: int = 2000, seed: int = 0, level: float = 0.95
) -> dict[str, float]:
    """Mean and percentile bootstrap interval over items (nan items are dropped)."""
    x = np.asarray(values, dtype=np.float64)
    x = x[~np.isnan(x)]
    if len(x) == 0:
        return {"mean": float("nan"), "lo": float("nan"), "hi": float("nan"), "n": 0}
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(n_boot, len(x)))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return {"mean": float(x.mean()), "lo": float(lo), "hi": float(hi), "n": int(len(x))}


def paired_diff_ci(a: Sequence[float], b: Sequence[float], **kw: Any) -> dict[str, float]:
    """Bootstrap interval of mean(a - b) over the same items (pairs with a nan are dropped)."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return bootstrap_ci(list(d), **kw)


# ----- methods --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """One decoding configuration under test."""

    name: str
    method: str
    k: int = 3
    alpha: float = 0.54
    temperature: float = 0.06
    store: str | None = None  # key into the n-gram sources; None: no n-grams (alpha 0)
    heal: bool = True


def main_specs(k: int, alpha: float, tau: float) -> list[Spec]:
    """The methods compared everywhere."""
    return [
        Spec(f"superposed k={k} + store", "superposed", k, alpha, tau, "codebase"),
        Spec(f"superposed k={k}, alpha=0", "superposed", k, 0.0, tau),
        Spec("greedy", "greedy", 1),
        Spec(f"nucleus k={k}", "nucleus", k),
        Spec(f"beam k={k}", "beam", k),
    ]


class TimedSource:
    """Wraps an n-gram source and adds up the seconds its lookups take."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.seconds = 0.0
        self.calls = 0

    @property
    def orders(self) -> tuple[int, ...]:
        return tuple(self.source.orders)

    def probabilities(self, contexts: Sequence[Sequence[int]], candidates: np.ndarray) -> Any:
        start = time.perf_counter()
        try:
            return self.source.probabilities(contexts, candidates)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1


@dataclass
class Run:
    """The drafts of one spec on one prompt, with timings."""

    drafts: list[str]
    token_ids: list[list[int]]
    total_ms: float
    lookup_ms: float = 0.0
    prompt_tokens: int = 0


def run_spec(
    engine: Any,
    spec: Spec,
    text: str,
    sources: Mapping[str, Any],
    max_new_tokens: int = 10,
    single_line: bool = True,
    max_prompt_tokens: int | None = 512,
) -> Run:
    """Complete ``text`` with one spec (the prompt's cached prefix is reused)."""
    from lsp_server.engine.types import DecodeConfig, StopCondition

    cfg = DecodeConfig(
        k=spec.k, max_new_tokens=max_new_tokens, alpha=spec.alpha, temperature=spec.temperature
    )
    source = TimedSource(sources[spec.store]) if spec.store is not None else None
    out = engine.complete(
        text,
        spec.method,
        cfg=cfg,
        ngram=source,
        stop=StopCondition(single_line=single_line),
        heal=spec.heal,
        max_prompt_tokens=max_prompt_tokens,
    )
    return Run(
        drafts=[d.text for d in out.drafts],
        token_ids=[list(d.token_ids) for d in out.drafts],
        total_ms=out.timing_ms["total"],
        lookup_ms=source.seconds * 1e3 if source else 0.0,
        prompt_tokens=out.prompt_tokens,
    )


def warm_cache(engine: Any, text: str, max_new_tokens: int, max_prompt_tokens: int | None) -> None:
    """Prefill the prompt once, so every method's timing is its decode with the prompt cached
    (an editor's steady state while typing), not whichever method happened to run first."""
    from lsp_server.engine.runner import prefill_reusing_cache

    prompt = engine.prompt(text, max_new_tokens, True, max_prompt_tokens)
    with torch_inference():
        prefill_reusing_cache(engine.runner, prompt.ids)


@contextmanager
def torch_inference() -> Iterator[None]:
    import torch

    with torch.inference_mode():
        yield


# ----- n-gram stores --------------------------------------------------------------------------


def store_dir() -> Path:
    """Where built benchmark stores are cached between runs (outside the repository)."""
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "superposed-lsp" / "bench"


def build_store(
    name: str, tokenizer: Any, items: Sequence[tuple[str, str]], base: Path | None = None
) -> tuple[Any, dict[str, Any]]:
    """Open (building or updating) the cached store ``name`` holding exactly ``items``.

    ``base``: an existing store file to start from (copied), so a store that extends another
    only indexes the extra files. Returns the store and its stats with the build time.
    """
    import shutil

    from ngram_db.store import NgramStore

    path = store_dir() / f"{name}.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    if base is not None and not path.exists():
        shutil.copyfile(base, path)
    start = time.perf_counter()
    store = NgramStore.open(path, tokenizer)
    wanted = {k for k, _ in items}
    stale = [p for p in store.file_hashes() if p not in wanted]
    for p in stale:
        store.remove_file(p)
    changed = store.update_files(list(items))
    store.checkpoint()
    seconds = time.perf_counter() - start
    stats = store.stats()
    stats.update(
        {"build_seconds": seconds, "files_indexed_now": changed, "files_removed_now": len(stale)}
    )
    if changed:
        stats["tokens_per_second"] = stats["tokens"] / seconds if base is None else None
    return store, stats


# ----- stamps and output ----------------------------------------------------------------------


def describe_runner(engine: Any) -> str:
    """The runner class and its precision, e.g. 'FastRunner int4'."""
    runner = engine.runner
    return f"{type(runner).__name__} {getattr(runner, 'precision', '')}".strip()


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "lsp_server", "ngram_db"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return out.stdout.strip() + ("+uncommitted engine/store changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def command_line() -> str:
    """How this script was run, as ``python -m bench.x ...``."""
    script = Path(sys.argv[0])
    if script.suffix == ".py" and script.resolve().is_relative_to(ROOT):
        module = ".".join(script.resolve().relative_to(ROOT).with_suffix("").parts)
        return " ".join(["python -m", module, *sys.argv[1:]])
    return " ".join(["python", *sys.argv])


@dataclass
class Stamp:
    """Where and when numbers were measured."""

    model: str
    commit: str = field(default_factory=git_commit)
    date: str = field(default_factory=lambda: time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    machine: str = field(
        default_factory=lambda: f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}"
    )
    python: str = field(default_factory=lambda: sys.version.split()[0])
    torch_threads: int = 0
    load_start: list[float] = field(default_factory=lambda: [round(x, 2) for x in os.getloadavg()])
    load_end: list[float] = field(default_factory=list)
    seconds: float = 0.0
    command: str = field(default_factory=lambda: command_line())
    runner: str = ""  # the engine's model runner (and precision), where the script records it

    def finish(self, started: float) -> dict[str, Any]:
        import torch

        self.torch_threads = torch.get_num_threads()
        self.load_end = [round(x, 2) for x in os.getloadavg()]
        self.seconds = round(time.perf_counter() - started, 1)
        return asdict(self)


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, allow_nan=True) + "\n")
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


@contextmanager
def progress(label: str, total: int) -> Iterator[Any]:
    """A tqdm bar on stderr (stdout stays for the summary lines)."""
    from tqdm import tqdm

    bar = tqdm(total=total, desc=label, file=sys.stderr, mininterval=5, leave=False)
    try:
        yield bar
    finally:
        bar.close()


def run_parser(description: str, sizes: Mapping[str, Any]) -> argparse.ArgumentParser:
    """The arguments every quality script takes: size preset, engine threads and runner, seed."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="small fixed subsets")
    parser.add_argument("--size", choices=list(sizes), default="full")
    parser.add_argument("--n", type=int, help="items (overrides the size preset)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runner", default="auto", help="engine runner: auto (as the server), hf")
    parser.add_argument("--seed", type=int, default=0)
    return parser


COMPILE_TIMEOUT_S = 1200  # to build a missing compiled step (one to three minutes each)


def fast_runner(loaded: Any, variant: str, rows: Sequence[int] = (1,)) -> Any:
    """A FastRunner for ``variant``: a precision, or "<precision>-compiled", which steps
    ``rows``-row batches through the compiled step (built first if it is not cached)."""
    from lsp_server.engine.compiled import BackgroundCompiler, builder_command
    from lsp_server.engine.fast_runner import fast_runner_class

    precision = variant.removesuffix("-compiled")
    runner = fast_runner_class(loaded.model)(loaded.model, precision)
    if variant.endswith("-compiled"):
        builder = builder_command(loaded.name, loaded.device.type, "auto", precision)
        for n in rows:
            compiler = BackgroundCompiler(runner, builder, n)
            if not compiler.wait(COMPILE_TIMEOUT_S) or not compiler.ready:
                raise SystemExit(f"no compiled step for {variant}, {n} rows: {compiler.error}")
    return runner


def load_engine(args: argparse.Namespace) -> tuple[Any, Stamp]:
    """The engine the parsed arguments ask for, and the stamp its results carry."""
    from lsp_server.engine.api import Engine

    engine = Engine.load(threads=args.threads, runner=args.runner)
    return engine, Stamp(model=engine.name, runner=describe_runner(engine))
