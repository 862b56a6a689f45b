"""Running the decoding methods under test on prompts, and the cached n-gram stores they read."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.measure import Stamp


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


def spec_key(spec: Mapping[str, Any]) -> str:
    """A recorded spec's role, the same in every run whatever its label: "store" (superposed with
    the codebase store), "nostore" (superposed, alpha 0), or the method ("greedy", "beam", ...)."""
    if spec["method"] != "superposed":
        return str(spec["method"])
    return "store" if spec["store"] is not None else "nostore"


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
    from superposed.types import DecodeConfig, StopCondition

    cfg = DecodeConfig(
        k=spec.k, max_new_tokens=max_new_tokens, alpha=spec.alpha, temperature=spec.temperature
    )
    source = TimedSource(sources[spec.store]) if spec.store is not None else None
    start = time.perf_counter()
    prompt = engine.prompt(text, max_new_tokens, spec.heal, max_prompt_tokens)
    prompt_ms = (time.perf_counter() - start) * 1e3  # counted in the total, as it always was
    out = engine.complete(
        prompt, spec.method, cfg=cfg, ngram=source, stop=StopCondition(single_line=single_line)
    )
    return Run(
        drafts=[d.text for d in out.drafts],
        token_ids=[list(d.token_ids) for d in out.drafts],
        total_ms=out.timing_ms["total"] + prompt_ms,
        lookup_ms=source.seconds * 1e3 if source else 0.0,
        prompt_tokens=out.prompt_tokens,
    )


def warm_cache(engine: Any, text: str, max_new_tokens: int, max_prompt_tokens: int | None) -> None:
    """Prefill the prompt once, so every method's timing is its decode with the prompt cached
    (an editor's steady state while typing), not whichever method happened to run first."""
    from superposed.runner import prefill_reusing_cache

    prompt = engine.prompt(text, max_new_tokens, True, max_prompt_tokens)
    with torch_inference():
        prefill_reusing_cache(engine.runner, prompt.ids)


@contextmanager
def torch_inference() -> Iterator[None]:
    import torch

    with torch.inference_mode():
        yield


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


def describe_runner(engine: Any) -> str:
    """The runner class and its precision, e.g. 'FastRunner int4'."""
    runner = engine.runner
    return f"{type(runner).__name__} {getattr(runner, 'precision', '')}".strip()


COMPILE_TIMEOUT_S = 1200  # to build a missing compiled step (one to three minutes each)


def fast_runner(loaded: Any, variant: str, rows: Sequence[int] = (1,)) -> Any:
    """A FastRunner for ``variant``: a precision, "<precision>-compiled", which steps
    ``rows``-row batches through the compiled step (built first if it is not cached), or
    "<precision>-graphs", which replays CUDA graphs (superposed/cuda_graph.py)."""
    from superposed.compiled import BackgroundCompiler, builder_command
    from superposed.runner_choice import fast_runner_class

    precision = variant.removesuffix("-compiled").removesuffix("-graphs")
    if variant.endswith("-graphs"):  # CUDA graphs; on a CPU their bookkeeping alone (dry runs)
        from superposed.cuda_graph import GraphRunner, eager_capture

        static = fast_runner_class(loaded.model)(loaded.model, precision, static_cache=True)
        return GraphRunner(static, None if static.device.type == "cuda" else eager_capture)
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
    from superposed.api import Engine

    engine = Engine.load(threads=args.threads, runner=args.runner)
    return engine, Stamp(model=engine.name, runner=describe_runner(engine))
