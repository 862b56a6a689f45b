"""The fast runner's decode step compiled ahead of time, off the request path (issue 7).

``FastRunner.pure_step`` is exported (torch.export, with the cache length dynamic) and
compiled by AOTInductor into a package on disk: one file per model, precision, row count,
code version and torch version, in the user cache directory. The server then only loads it
(a fraction of a second) and hands it to the runner, which steps through it from then on;
until it is there, steps run eagerly.

Why a separate process: compiling takes one to two minutes of mostly Python work, and a
Python thread that busy beside the decoding thread holds the GIL so often that an eager
step measured 5x slower while an in-process torch.compile ran, and 500x slower beside a
pure Python loop (the default switch interval). The child process runs at a lower priority
and shares only a CPU core with the server.

The build is once per machine, not once per server: the child runs in a session of its own
and outlives the server that started it (editor sessions shorter than a build restarted it
from zero: on a busy 2-core machine, servers that lived two to three minutes never got the
step, and one build took 397 s). It holds ``<package>.lock`` while it builds; a server that
finds the lock held starts no second build and waits for the package to appear.

    python -m superposed.compiled --model smollm2-135m --precision int4   # build
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import logging
import os
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import torch

try:
    import fcntl
except ImportError:  # Windows: no build lock; a second server may build the same package
    fcntl = None  # type: ignore[assignment]

from superposed.fast_runner import FastRunner, StepFn
from superposed.model import cache_dir, load_model
from superposed.runner_choice import fast_runner_class

log = logging.getLogger(__name__)

MAX_TOKENS = 16  # new positions a compiled step takes at once (a decode step: one)
# the sources a package is built from
_CODE = (
    "fast_runner.py",
    "fast_gemma.py",
    "blocks.py",
    "attention.py",
    "prefill.py",
    "kv_cache.py",
    "quant.py",
    "compiled.py",
)
_NICE = 10  # the builder's priority below the server's
POLL_S = 5.0  # how often a server waiting for another process's build looks for the package


def unsupported_reason(device: torch.device) -> str | None:
    """Why the compiled step cannot serve on ``device``, or None where it can (the CPU).

    Measured on an NVIDIA H200 (torch 2.11, CUDA 13): the package builds, but loading it
    (``aoti_load_package``) killed the process with a segmentation fault, also in a fresh
    process. A crash in the server is far worse than an eager step, so GPUs stay eager.
    """
    if device.type == "cpu":
        return None
    return (
        f"the compiled step runs on the CPU only (loading an AOTInductor package on "
        f"{device.type} crashed the process on an H200); decoding stays eager"
    )


def fingerprint(runner: FastRunner, rows: int) -> str:
    """What a package depends on: the weights, the precision, rows, this code, torch."""
    digest = hashlib.sha256()
    for name in _CODE:
        digest.update((Path(__file__).parent / name).read_bytes())
    digest.update(f"{runner.precision} {rows} {torch.__version__} {runner.device.type}".encode())
    digest.update(str(runner.dtype).encode())  # the KV cache's (quant.kv_dtype measures it)
    digest.update(runner.config_json.encode())
    for tensor in runner.weight_sample():
        digest.update(tensor.float().numpy().tobytes())
    return digest.hexdigest()[:16]


def package_path(runner: FastRunner, rows: int, directory: Path | None = None) -> Path:
    """Where the compiled step for ``runner`` and ``rows`` lives."""
    directory = directory or cache_dir() / "compiled"
    return directory / f"step-{runner.precision}-{rows}row-{fingerprint(runner, rows)}.pt2"


def _slots(runner: FastRunner) -> list[tuple[Any, str]]:
    """Every tensor the decode step reads, as (the object holding it, its attribute name),
    in a fixed order: the decode weights, then the rotary table."""
    slots: list[tuple[Any, str]] = []
    seen: set[int] = set()

    def walk(owner: Any) -> None:
        if id(owner) in seen:
            return
        seen.add(id(owner))
        for name, value in vars(owner).items():
            if isinstance(value, torch.Tensor):
                slots.append((owner, name))
            elif isinstance(value, list):
                for item in value:
                    walk(item)
            elif hasattr(value, "__dict__") and not isinstance(value, type):
                walk(value)

    walk(runner.decode_weights)
    return [*slots, (runner, "_cos"), (runner, "_sin")]


def step_tensors(runner: FastRunner) -> list[torch.Tensor]:
    """The runner's tensors that a compiled step takes as inputs (see export_step)."""
    return [getattr(owner, name) for owner, name in _slots(runner)]


def export_step(runner: FastRunner, rows: int) -> Any:
    """torch.export of ``runner.pure_step`` for ``rows`` rows, any cache length and
    1..MAX_TOKENS new positions.

    The weights are inputs of the exported step, not constants: a package holding its own
    copy of them took 390 MB more in the server (issue 14); the runner passes its own.
    """
    slots = _slots(runner)

    class Step(torch.nn.Module):
        def forward(
            self, x: torch.Tensor, position: torch.Tensor, keys: Any, values: Any, weights: Any
        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            # Trace the step over the inputs in place of the runner's tensors.
            own = [getattr(owner, name) for owner, name in slots]
            for (owner, name), tensor in zip(slots, weights, strict=True):
                setattr(owner, name, tensor)
            try:
                return runner.pure_step(x, position, keys, values)
            finally:
                for (owner, name), tensor in zip(slots, own, strict=True):
                    setattr(owner, name, tensor)

    capacity = 2 * 256  # example sizes: any cache length runs,
    x = runner.embed(torch.zeros(rows, 2, dtype=torch.long))  # and 1..MAX_TOKENS new tokens
    position = torch.tensor([capacity // 2], device=runner.device)
    keys = list(runner.cache.empty(rows, capacity))  # each [B, kv_heads, C, D]
    values = list(runner.cache.empty(rows, capacity))  # not aliasing keys
    weights = step_tensors(runner)
    length = torch.export.Dim("length", min=2, max=runner.max_context)
    tokens = torch.export.Dim("tokens", min=1, max=MAX_TOKENS)
    per_layer = [{2: length}] * runner.layers
    with torch.inference_mode():
        return torch.export.export(
            Step(),
            (x, position, keys, values, weights),
            dynamic_shapes=({1: tokens}, {}, per_layer, per_layer, [{}] * len(weights)),
        )


def build(runner: FastRunner, rows: int, path: Path) -> Path:
    """Compile the step into ``path`` (written whole, then renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial.pt2")
    program = export_step(runner, rows)
    torch._inductor.aoti_compile_and_package(program, package_path=str(partial))
    partial.replace(path)
    return path


def load(path: Path, runner: FastRunner) -> StepFn:
    """The compiled step in ``path``, stepping with ``runner``'s weights."""
    package = torch._inductor.aoti_load_package(str(path))
    weights = step_tensors(runner)

    def step(
        x: torch.Tensor, position: torch.Tensor, keys: list[torch.Tensor], values: Any
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logits, new_keys, new_values = package(x, position, keys, values, weights)
        return logits, new_keys, new_values

    return step


class BackgroundCompiler:
    """Gets a FastRunner its compiled step for ``rows`` rows without blocking requests.

    If the package is on disk it is loaded at once; otherwise a child process builds it
    (``builder``: the command line that rebuilds this same runner) and a thread waits and
    installs it. Any failure leaves the runner eager and is logged, with the child's output
    in ``<package>.log``.
    """

    def __init__(
        self,
        runner: FastRunner,
        builder: list[str],
        rows: int = 1,
        directory: Path | None = None,
    ) -> None:
        self.runner = runner
        self.rows = rows
        self.path = package_path(runner, rows, directory)
        self.builder = [*builder, "--rows", str(rows), "--out", str(self.path)]
        self.error: str | None = None
        self.seconds: float | None = None  # how long getting the compiled step took
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="compile-step", daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the step is installed or failed; False on timeout."""
        return self.done.wait(timeout)

    @property
    def ready(self) -> bool:
        return self.rows in self.runner.compiled_steps

    def _run(self) -> None:
        start = time.perf_counter()
        try:
            self._await_package()
            if self.path.exists() and not self._install():  # a damaged package: once more
                discard(self.path)
                self._await_package()
                if self.path.exists() and not self._install():
                    self.error = f"the compiled step {self.path} does not load, even rebuilt"
                    log.warning("%s; decoding stays eager", self.error)
            if self.ready:
                self.seconds = time.perf_counter() - start
                log.info("compiled decode step ready after %.0f s: %s", self.seconds, self.path)
        except (OSError, RuntimeError) as error:
            self.error = f"loading the compiled step {self.path} failed: {error}"
            log.warning("%s; decoding stays eager", self.error)
        finally:
            self.done.set()

    def _await_package(self) -> None:
        """Until the package is on disk: built by this server's child, or by another
        server's (its lock held); ``error`` says so where none comes."""
        built = False
        while not self.path.exists() and self.error is None:
            if building(self.path):  # another server's build (it may outlive that server)
                time.sleep(POLL_S)
            elif built:  # ours ran (or found another just starting) and left nothing
                self.error = f"the build left no package at {self.path}"
                log.warning("%s; decoding stays eager", self.error)
            else:
                built = True
                self._build()

    def _install(self) -> bool:
        """Load the package on disk into the runner; False (logged) where it is damaged.

        The package is a hint like every cache (issue 51): a truncated or corrupted one is
        found by its zip's checksums before native code reads it, and one that passes them
        but does not load is treated the same: removed and built again."""
        why = package_problem(self.path)
        if why is None:
            try:
                self.runner.compiled_steps[self.rows] = load(self.path, self.runner)
                return True
            except Exception as error:  # whatever the loader of a damaged package raises
                why = f"{type(error).__name__}: {error}"
        log.warning("the compiled step %s is damaged (%s): building it again", self.path, why)
        return False

    def _build(self) -> None:
        log_path = self.path.with_suffix(".log")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log.info("compiling the decode step in the background: %s", " ".join(self.builder))
        with log_path.open("w") as output:
            # A session of its own: the build outlives this server (and an editor that stops
            # the server's process group), and the next server loads what it built.
            child = subprocess.Popen(
                self.builder,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            code = child.wait()
        if code != 0:
            self.error = f"compiling the decode step failed (exit {code}); see {log_path}"
            log.warning("%s; decoding stays eager", self.error)


def package_problem(path: Path) -> str | None:
    """What is wrong with the package at ``path`` as a zip (None: every member's checksum
    holds). A package is a zip archive (torch.export's format); read whole, a few MB."""
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (OSError, zipfile.BadZipFile, EOFError, ValueError) as error:
        return f"{type(error).__name__}: {error}"
    return None if bad is None else f"member {bad} fails its checksum"


def discard(path: Path) -> None:
    """Remove a damaged package (renamed aside first: another server may be opening it)."""
    aside = path.with_suffix(f".{os.getpid()}.damaged")
    with contextlib.suppress(OSError):
        path.replace(aside)
        aside.unlink()


def _lock_path(path: Path) -> Path:
    return path.with_suffix(".lock")


@contextlib.contextmanager
def build_lock(path: Path) -> Any:
    """Hold the build lock of the package at ``path`` (yields False if another process holds
    it). The lock is an flock: it goes with the process that held it, however it ended."""
    if fcntl is None:
        yield True
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock_path(path).open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def building(path: Path) -> bool:
    """Whether a process is building the package at ``path`` now."""
    if not _lock_path(path).exists():
        return False
    with build_lock(path) as mine:
        return not mine


def builder_command(model: str, device: str, dtype: str, precision: str) -> list[str]:
    """The command line of a child process that builds the package for this runner."""
    return [
        sys.executable,
        "-m",
        "superposed.compiled",
        *("--model", model, "--device", device, "--dtype", dtype, "--precision", precision),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--precision", default="int4")
    parser.add_argument("--rows", type=int, default=1)
    parser.add_argument("--out", type=Path, help="the package (default: the cache directory)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if hasattr(os, "nice"):
        os.nice(_NICE)  # the server, which started this build, comes first
    loaded = load_model(args.model, args.device, args.dtype, threads=1, skeleton=True)
    runner_class = fast_runner_class(loaded.model)
    runner = runner_class(loaded.model, args.precision, checkpoint=loaded.checkpoint)
    path = args.out or package_path(runner, args.rows)
    start = time.perf_counter()
    with build_lock(path) as mine:
        if not mine:
            log.info("another process is building %s", path)
            return 0
        if not path.exists():
            build(runner, args.rows, path)
    log.info("built %s in %.0f s", path, time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
