"""The engine's front door: text before the cursor in, k drafts and timings out."""

from __future__ import annotations

import importlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any, cast

import torch

from superposed.calibrate import calibrated
from superposed.compiled import BackgroundCompiler, builder_command, unsupported_reason
from superposed.cuda_graph import GraphRunner
from superposed.cuda_graph import unsupported_reason as graphs_unsupported
from superposed.embedded import DEFAULT_MODEL
from superposed.fast_runner import FastRunner
from superposed.fim import FimTokens, build_fim_prompt
from superposed.fits import check_fits, footprint
from superposed.gguf_convert import Progress
from superposed.model import (
    LoadedModel,
    compact_loading,
    give_back_freed_memory,
    load_model,
    set_threads,
)
from superposed.ngram import MatchSource, NgramSource
from superposed.options import COMPILE_MODES, METHOD_TABLE, METHODS
from superposed.prompt import Prompt, build_prompt
from superposed.request import DecodeRequest, Method, Plan
from superposed.runner import HFRunner, ModelRunner, reusable_prefix
from superposed.runner_choice import default_precision, fast_runner_class, make_runner
from superposed.types import CancelCheck, DecodeConfig, Draft, EngineError, StopCondition

log = logging.getLogger(__name__)


def find_method(name: str) -> Method:
    """The decoding function registered as ``name`` (options.METHOD_TABLE)."""
    if name not in METHOD_TABLE:
        raise EngineError(f"unknown method {name!r}: use one of {', '.join(METHODS)}")
    module, function = METHOD_TABLE[name].function.split(":")
    return cast(Method, getattr(importlib.import_module(module), function))


def slower_notice(name: str, reason: str) -> str:
    """The notice for a model the fast runner does not implement."""
    return (
        f"model {name} runs on the transformers runner, slower than the fast one, which "
        f"implements Llama, Mistral, Qwen2 and Gemma 3 ({reason})"
    )


def _check_size(
    loaded: LoadedModel, kind: str, precision: str, name: str, progress: Progress | None
) -> None:
    """Say the weights' size against the free memory; ModelTooBig where they cannot fit."""
    runs_on = "hf" if kind == "hf" else "fast"
    if precision == "auto" and runs_on == "fast":
        precision = default_precision(loaded.device, loaded.model.config)
    size = footprint(loaded.model, runs_on, precision, loaded.dtype, loaded.device)
    log.info("model %s: %s", name, size.sentence())
    if progress is not None:
        progress(f"loading {name}: {size.sentence()}", None)
    check_fits(name, size)


class PrefillClock:
    """A runner seen through a clock on ``prefill``: how much of a request was prompt work;
    and a count of its decode forwards (``step``, ``step_mixture``: one per decoding step, the
    cost issue 54 item 1 holds against the tokens the shown drafts hold)."""

    def __init__(self, runner: ModelRunner) -> None:
        self.runner = runner
        self.seconds = 0.0
        self.forwards = 0

    def prefill(self, ids: list[int]) -> torch.Tensor:
        start = time.perf_counter()
        try:
            return self.runner.prefill(ids)
        finally:
            self.seconds += time.perf_counter() - start

    def step(self, embeds: torch.Tensor) -> torch.Tensor:
        self.forwards += 1
        return self.runner.step(embeds)

    def __getattr__(self, name: str) -> Any:  # everything else is the runner's own
        found = getattr(self.runner, name)
        if name != "step_mixture":
            return found

        def counted(*args: Any) -> Any:
            self.forwards += 1
            return found(*args)

        return counted


@dataclass
class Completion:
    """The drafts of one request (text starts at the cursor), with where the time went."""

    drafts: list[Draft]
    timing_ms: dict[str, float] = field(default_factory=dict)
    prompt_tokens: int = 0
    reused_tokens: int = 0
    cut: bool = False  # the drafts stopped at the plan's deadline, as far as they got


class Engine:
    """A loaded model, its runner (and KV cache) and vocabulary. Not thread-safe."""

    def __init__(self, loaded: LoadedModel, runner: ModelRunner | None = None) -> None:
        self.loaded = loaded
        self.tokenizer = loaded.tokenizer
        self.vocab = loaded.vocab
        self.name = loaded.name
        self.runner: ModelRunner = runner if runner is not None else HFRunner(loaded.model)
        self.max_context = self.runner.max_context
        self.vocab.warm(self.runner.vocab_size, self.runner.device)  # heal masks, at load
        self.compiler: BackgroundCompiler | None = None  # see load(compile=...)
        self.compile_off_reason = ""  # why compile "background" left decoding eager
        self.fim_tokens = loaded.fim_tokens  # None: no fill-in-the-middle markers
        self.notices: list[str] = []  # what the user is told once it is loaded (load())

    @classmethod
    def load(
        cls,
        model: str = DEFAULT_MODEL,
        device: str = "auto",
        dtype: str = "auto",
        threads: int = 1,
        runner: str = "auto",
        precision: str = "auto",
        compile: str = "off",
        prefill_copy: bool = False,
        progress: Progress | None = None,
    ) -> Engine:
        """Load a model and its runner: the fast one (Llama family, Gemma 3) where it applies;
        elsewhere the transformers one, with a notice (``notices``) that it is slower.

        Before any weight is read, the weights' size against the free memory is said
        (``progress``, the log) and a model that cannot fit is refused (fits.py).

        prefill_copy: an int8/int4 fast runner keeps a bf16 copy of its layers for prefills
        (FastRunner's ``prefill_copy``).

        threads: torch's CPU threads; 0: the calibration's counts for this CPU and model
        (calibrate.py), one for decode steps and one for a fast runner's long prefills.

        compile "background": a child process compiles the fast runner's decode step
        (compiled.py), which the runner uses once it is ready; "off": always eager.

        progress: hears how the load goes (a GGUF file's conversion, the size).
        """
        if compile not in COMPILE_MODES:
            raise EngineError(f"unknown compile mode {compile!r}: use {', '.join(COMPILE_MODES)}")
        # The fast runner reads the weights one tensor at a time into its own copies
        # (quantized decode; a bf16 prefill copy with prefill_copy): an fp32 master (0.5 GB
        # for the default model) would only raise the peak, and take memory from then on.
        with compact_loading():
            loaded = load_model(model, device, dtype, threads or None, True, progress)
            calibration = None
            if threads == 0 and loaded.device.type == "cpu":  # measured, once per CPU
                calibration = calibrated(loaded.model.config.to_json_string())
                set_threads(calibration.threads)
            slower = fast_runner_class(loaded.model).unsupported(loaded.model)
            kind = "hf" if runner == "auto" and slower else runner
            if kind != "llama.cpp":  # llama.cpp reads its own weights
                _check_size(loaded, kind, precision, model, progress)
            if (
                loaded.checkpoint is not None and kind == "hf"
            ):  # the transformers runner: all weights
                loaded = load_model(model, device, dtype)
            chosen = make_runner(
                loaded.model,
                kind,
                precision,
                loaded.checkpoint,
                prefill_copy=prefill_copy,
                name=model,
            )
            engine = cls(loaded, runner=chosen)
            if runner == "auto" and slower:
                engine.notices.append(slower_notice(engine.name, slower))
            if runner == "llama.cpp":  # its own weights: the skeleton is not needed
                loaded.model = loaded.checkpoint = None
            if isinstance(engine.runner, FastRunner):
                loaded.model = loaded.checkpoint = None
                if calibration is not None:
                    engine.runner.plan.threads = calibration.prefill_threads
        if compile == "background" and isinstance(engine.runner, FastRunner):
            engine.start_compiler(builder_command(model, device, dtype, engine.runner.precision))
        return engine

    def start_compiler(self, builder: list[str]) -> None:
        """Have the fast runner's decode step compiled in the background, where it can be;
        on CUDA, captured in CUDA graphs in this process instead (cuda_graph.py)."""
        assert isinstance(self.runner, FastRunner)
        reason = unsupported_reason(self.runner.device)
        if reason is not None and graphs_unsupported(self.runner) is None:
            self.runner = GraphRunner(self.runner)
            return
        if reason is not None:
            log.warning("compile background: %s", reason)
            self.compile_off_reason = reason
            return
        self.compiler = BackgroundCompiler(self.runner, builder)

    def release(self) -> None:
        """Give back what the last prompts hold: the KV cache (its rows and positions, a
        prompt the next request could have reused) and the freed heap pages. On the thread
        that decodes; for when no document is open."""
        self.runner.rewind(0)  # a growing cache's storage goes with it (kv_cache.py)
        give_back_freed_memory()

    def compile_status(self) -> str:
        """off | building | ready | failed: <why> (the background-compiled decode step)."""
        compiler = self.compiler
        if isinstance(self.runner, GraphRunner):
            return "ready: CUDA graphs"
        if compiler is None:
            return f"off: {self.compile_off_reason}" if self.compile_off_reason else "off"
        if compiler.ready:
            return "ready"
        return f"failed: {compiler.error}" if compiler.error else "building"

    def decode_step(self) -> str:
        """compiled | graphs | eager: which step decodes the drafts now."""
        if isinstance(self.runner, GraphRunner):
            return "graphs"
        return "compiled" if self.compile_status() == "ready" else "eager"

    @property
    def compiled_calls(self) -> int:
        """Forwards that ran through the compiled step so far."""
        return getattr(self.runner, "compiled_calls", 0)

    def prompt(
        self,
        text: str,
        max_new_tokens: int,
        heal: bool = True,
        max_prompt_tokens: int | None = None,
        fim: FimTokens | None = None,
        after: str = "",
    ) -> Prompt:
        """The prompt for ``text``, leaving room in the context for the new tokens.

        With ``fim`` markers: a prefix-suffix-middle prompt of ``text`` and ``after`` (fim.py).
        """
        room = self.max_context - max_new_tokens - 1
        limit = room if max_prompt_tokens is None else min(room, max_prompt_tokens)
        if fim is not None:
            return build_fim_prompt(self.tokenizer, self.vocab, fim, text, after, limit, heal)
        return build_prompt(self.tokenizer, self.vocab, text, limit, heal=heal)

    def complete(
        self,
        prompt: Prompt | str,
        method: str = "superposed",
        cfg: DecodeConfig | None = None,
        ngram: NgramSource | None = None,
        stop: StopCondition | None = None,
        cancel: CancelCheck | None = None,
        memory: MatchSource | None = None,
    ) -> Completion:
        """Decode drafts for the cursor at the end of ``prompt``: ``run`` for a caller with
        the values apart (the benches, the tests); the server plans whole
        (lsp_server/completion/decode.py).

        ``prompt``: built by the caller (``Engine.prompt``: its window, healing and FIM are
        the caller's choice), or the text before the cursor, for which ``Engine.prompt``'s
        defaults build it here (its time counts in ``prompt`` and ``total``).
        memory: longest matches over the user's code, for a method that takes them
        (``MethodEntry.takes_memory``); the caller decides whether the memory is on.
        """
        find_method(method)
        cfg = cfg or DecodeConfig()
        cfg.validate()
        start = time.perf_counter()
        if isinstance(prompt, str):
            prompt = self.prompt(prompt, cfg.max_new_tokens)
        built_ms = (time.perf_counter() - start) * 1e3
        done = self.run(Plan(prompt, method, cfg, stop or StopCondition(), ngram, memory, cancel))
        done.timing_ms["prompt"] += built_ms
        done.timing_ms["total"] += built_ms
        return done

    def run(self, plan: Plan) -> Completion:
        """Decode the drafts ``plan`` asks for (its prompt built, its sources chosen)."""
        run = find_method(plan.method)
        plan.cfg.validate()
        start = time.perf_counter()
        prompt = plan.prompt
        reused = reusable_prefix(self.runner.cached_ids, prompt.ids)
        encoded = time.perf_counter()
        clock = PrefillClock(self.runner)
        runner = cast(ModelRunner, clock)
        takes_memory = METHOD_TABLE[plan.method].takes_memory
        request = DecodeRequest(
            runner,
            self.vocab,
            prompt,
            plan.cfg,
            ngram=plan.ngram,
            stop=plan.stop,
            cancel=plan.cancel,
            memory=plan.memory if takes_memory else None,
            deadline=plan.deadline,
        )
        drafts = run(request)
        done = time.perf_counter()
        decode = done - encoded
        return Completion(
            drafts=drafts,
            timing_ms={
                "prompt": (encoded - start) * 1e3,  # text -> prompt tokens
                "prefill": clock.seconds * 1e3,  # what the cache did not already hold
                "steps": (decode - clock.seconds) * 1e3,  # the drafts' decoding itself
                "decode": decode * 1e3,
                "total": (done - start) * 1e3,
                "forwards": clock.forwards,  # a count, not ms: the decode steps run
            },
            prompt_tokens=len(prompt.ids),
            reused_tokens=reused,
            cut=plan.deadline is not None and plan.deadline.cut,
        )
