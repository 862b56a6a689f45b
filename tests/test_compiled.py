"""The compiled decode step (compiled.py): the pure step's math, an AOTInductor package built
and loaded for real on a tiny model, and the background compiler's behaviour around it."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from superposed import compiled
from superposed.api import Engine
from superposed.fast_gemma import GemmaRunner
from superposed.fast_runner import FastRunner
from superposed.runner import HFRunner
from superposed.types import EngineError
from tests.runner_harness import ids, script, tiny


def test_pure_step_matches_the_reference_runner_call_for_call() -> None:
    """Installed as the compiled step for every batch size, the pure step (the function that
    is compiled) gives the reference runner's logits through prefill, batching, selection and
    rewinds, and leaves the cache as the eager step would."""
    model = tiny()
    reference, fast = HFRunner(model), FastRunner(model, "fp32")
    fast.compiled_steps = {rows: fast.pure_step for rows in (1, 2, 3, 4)}
    for expected, got in zip(script(reference), script(fast), strict=True):
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


def test_pure_step_writes_the_same_cache_as_the_eager_step() -> None:
    model = tiny()
    eager, pure = FastRunner(model, "fp32"), FastRunner(model, "fp32")
    pure.compiled_steps[1] = pure.pure_step
    for runner in (eager, pure):
        runner.prefill(ids(20))
        for token in (3, 4, 5):
            runner.step(runner.embed(torch.tensor([[token]])))
    assert pure.cache.length == eager.cache.length == 23
    for i in range(eager.layers):
        for got, expected in zip(pure.cache.read(i, 23), eager.cache.read(i, 23), strict=True):
            torch.testing.assert_close(got, expected)


def test_a_compiled_step_reads_the_filled_positions_not_the_whole_capacity() -> None:
    """After a long prompt the cache keeps its capacity; a step on a shorter one read all of
    it (71 ms instead of 48 at 512 positions after 1,500, issue 39). It reads the filled
    positions rounded up to LENGTH_QUANTUM, with the eager step's logits."""
    from superposed.kv_cache import LENGTH_QUANTUM

    model = tiny(max_positions=2048)
    eager, pure = FastRunner(model, "fp32"), FastRunner(model, "fp32")
    read: list[int] = []

    def step(x: torch.Tensor, position: torch.Tensor, keys: Any, values: Any) -> Any:
        read.append(keys[0].shape[2])
        return pure.pure_step(x, position, keys, values)

    pure.compiled_steps[1] = step
    for runner in (eager, pure):
        runner.prefill(ids(600))  # capacity 640
        runner.rewind(150)
        runner.prefill(ids(10))
    expected = eager.step(eager.embed(torch.tensor([[3]])))
    got = pure.step(pure.embed(torch.tensor([[3]])))
    assert pure.cache.capacity == 5 * LENGTH_QUANTUM
    assert read == [2 * LENGTH_QUANTUM]  # 160 filled positions -> 256 read, not 640
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> tuple[FastRunner, Path]:
    """A tiny int4 runner's step, exported and compiled by AOTInductor (about half a minute)."""
    runner = FastRunner(tiny(max_positions=2048), "int4")
    path = compiled.package_path(runner, 1, tmp_path_factory.mktemp("compiled"))
    return runner, compiled.build(runner, 1, path)


def greedy_tokens(runner: FastRunner, prompt: list[int], steps: int) -> list[torch.Tensor]:
    # The last three tokens come as a typing user's would: a prefill of a few tokens, which
    # goes through the compiled step when there is one.
    logits = [runner.prefill(prompt[:-3]), runner.prefill(prompt[-3:])]
    for _ in range(steps):
        token = logits[-1].reshape(-1, logits[-1].shape[-1]).argmax(-1)
        logits.append(runner.step(runner.embed(token[:, None]))[0])
    runner.rewind(0)
    return logits


@pytest.mark.slow  # the package fixture: an AOTInductor build
def test_the_compiled_package_steps_like_the_eager_runner(
    package: tuple[FastRunner, Path],
) -> None:
    """The package runs at cache lengths other than the one it was exported with (the length
    is dynamic), and its logits match the eager step's."""
    runner, path = package
    assert path.exists() and not list(path.parent.glob("*.partial.pt2"))
    for prompt_length in (5, 300, 700):  # caches of 256, 512 and 1024 positions
        prompt = ids(prompt_length, seed=prompt_length)
        runner.compiled_steps = {}
        eager = greedy_tokens(runner, prompt, 6)
        step, calls = compiled.load(path, runner), []

        def counted(*args: Any, step: Any = step, calls: list = calls) -> Any:
            calls.append(args[0].shape[1])  # new positions
            return step(*args)

        runner.compiled_steps = {1: counted}
        fast = greedy_tokens(runner, prompt, 6)
        assert calls[-7:] == [3] + [1] * 6  # the typed tokens, then every step
        # Both chose the same tokens; their logits differ by the kernels' rounding (the eager
        # int4 kernel and the compiled step sum in different orders): single logits of this
        # tiny random model came up to 0.034 apart, 0.002 typical, over these three lengths,
        # with either prefill path (de-quantized layers or the bf16 copy).
        assert [t.argmax(-1).tolist() for t in fast] == [t.argmax(-1).tolist() for t in eager]
        for expected, got in zip(eager, fast, strict=True):
            torch.testing.assert_close(got, expected, atol=5e-2, rtol=2e-2)
    runner.compiled_steps = {}


@pytest.mark.slow  # the package fixture: an AOTInductor build
def test_the_package_steps_with_the_weights_of_the_runner_that_loads_it(
    package: tuple[FastRunner, Path],
) -> None:
    """The weights are the compiled step's inputs, not a copy inside the package: that copy
    took 390 MB more in the server (issue 14). A runner of other weights gets its own logits."""
    builder, path = package
    other = FastRunner(tiny(seed=7, max_positions=2048), "int4")
    prompt = ids(40, seed=3)
    eager = greedy_tokens(other, prompt, 4)
    other.compiled_steps = {1: compiled.load(path, other)}
    fast = greedy_tokens(other, prompt, 4)
    assert other.compiled_calls == 5  # the typed tokens, then every step
    builders = greedy_tokens(builder, prompt, 4)
    for expected, got, not_these in zip(eager, fast, builders, strict=True):
        torch.testing.assert_close(got, expected, atol=5e-2, rtol=5e-2)
        assert (got - not_these).abs().max() > 0.5  # the builder's weights give other logits


@pytest.mark.slow  # the package fixture: an AOTInductor build
def test_the_background_compiler_loads_a_package_that_is_on_disk(
    package: tuple[FastRunner, Path],
) -> None:
    runner, path = package
    runner.compiled_steps = {}
    never_run = [sys.executable, "-c", "raise SystemExit('the builder ran')"]
    compiler = compiled.BackgroundCompiler(runner, never_run, directory=path.parent)
    assert compiler.path == path
    assert compiler.wait(60)
    assert compiler.error is None and compiler.ready and 1 in runner.compiled_steps
    runner.compiled_steps = {}


def test_a_failed_build_leaves_the_runner_eager_and_says_where_the_log_is(
    tmp_path: Path,
) -> None:
    runner = FastRunner(tiny(), "fp32")
    failing = [sys.executable, "-c", "print('no C++ compiler'); raise SystemExit(3)"]
    compiler = compiled.BackgroundCompiler(runner, failing, directory=tmp_path)
    assert compiler.wait(60)
    assert not compiler.ready and runner.compiled_steps == {}
    assert compiler.error is not None and "exit 3" in compiler.error
    log = compiler.path.with_suffix(".log")
    assert str(log) in compiler.error and "no C++ compiler" in log.read_text()
    runner.prefill(ids(4))
    assert runner.step(runner.embed(torch.tensor([[1]]))).shape == (1, runner.vocab_size)


def test_the_package_name_follows_the_weights_and_the_precision(tmp_path: Path) -> None:
    def path(seed: int, precision: str, rows: int = 1) -> Path:
        return compiled.package_path(FastRunner(tiny(seed=seed), precision), rows, tmp_path)

    assert path(0, "int4") == path(0, "int4")
    assert len({path(0, "int4"), path(1, "int4"), path(0, "int8"), path(0, "int4", 3)}) == 4


def test_the_package_name_follows_every_source_the_step_runs(int4_runners: Any) -> None:
    """A package is keyed by the sources it was traced from (compiled._CODE): every engine
    module whose code the pure step runs, for either architecture, is among them."""
    folder = Path(compiled.__file__).parent
    ran: set[str] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        path = Path(frame.f_code.co_filename)
        if event == "call" and path.parent == folder:
            ran.add(path.name)

    for runner in int4_runners:
        runner.prefill(ids(6))
        keys, values = runner.cache.views()
        x = runner.embed(torch.tensor([[1, 2]]))
        sys.setprofile(profile)
        try:
            runner.pure_step(x, torch.tensor([runner.length]), keys, values)
        finally:
            sys.setprofile(None)
    assert {"fast_runner.py", "blocks.py", "attention.py", "quant.py"} <= ran
    assert ran <= set(compiled._CODE)


@pytest.fixture
def int4_runners() -> list[FastRunner]:
    from tests.test_fast_gemma import tiny_gemma

    return [FastRunner(tiny(), "int4"), GemmaRunner(tiny_gemma(), "int4")]


def test_an_unknown_compile_mode_is_a_clear_error() -> None:
    with pytest.raises(EngineError, match="unknown compile mode 'eager'"):
        Engine.load(compile="eager")


def test_the_compile_status_of_an_engine(tiny_loaded: Any) -> None:
    engine = Engine(tiny_loaded)
    assert engine.compile_status() == "off"


def test_a_gpu_runner_stays_eager_and_says_why(
    tiny_loaded: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading a CUDA package segfaulted on an H200: compile "background" must not start a
    builder (nor ever load a package) for a runner on a GPU, and the status says why."""
    runner = FastRunner(tiny_loaded.model, "fp32")
    engine = Engine(tiny_loaded, runner=runner)
    monkeypatch.setattr(runner, "device", torch.device("cuda"))  # after the CPU-side set-up
    never_run = [sys.executable, "-c", "raise SystemExit('the builder ran')"]
    engine.start_compiler(never_run)
    assert engine.compiler is None
    assert engine.compile_status().startswith("off: the compiled step runs on the CPU only")
    assert compiled.unsupported_reason(torch.device("cpu")) is None


def test_the_build_runs_in_a_session_of_its_own_and_outlives_the_server(tmp_path: Path) -> None:
    """An editor session shorter than a build restarted it from zero: the builder is not the
    server's child in its session (nor stopped at its exit), so the next server loads it."""
    runner = FastRunner(tiny(), "fp32")
    sid = tmp_path / "sid"
    report_sid = [
        sys.executable,
        "-c",
        f"import os; open({str(sid)!r}, 'w').write(str(os.getsid(0)))",
    ]
    compiler = compiled.BackgroundCompiler(runner, report_sid, directory=tmp_path)
    assert compiler.wait(60)
    assert int(sid.read_text()) != os.getsid(0)
    assert compiler.error is not None and "left no package" in compiler.error


def test_a_server_waits_for_another_process_build_instead_of_starting_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = FastRunner(tiny(), "fp32")
    monkeypatch.setattr(compiled, "POLL_S", 0.05)
    path = compiled.package_path(runner, 1, tmp_path)
    ours = [sys.executable, "-c", "raise SystemExit('the builder ran')"]
    with compiled.build_lock(path) as mine:  # another server's builder, still at work
        assert mine and compiled.building(path)
        compiler = compiled.BackgroundCompiler(runner, ours, directory=tmp_path)
        assert not compiler.wait(0.5)  # waiting for the package, not building a second one
        assert not path.with_suffix(".log").exists()  # the builder did not run meanwhile
        path.write_bytes(b"not a package")  # what the other build leaves (here, a bad one)
    assert not compiled.building(path)
    assert compiler.wait(30)
    # A damaged package is a hint like any cache: removed and built again, once, here.
    assert compiler.error is not None and compiler.error.startswith("compiling the decode")
    assert "the builder ran" in path.with_suffix(".log").read_text() and not path.exists()


def _zip_bytes() -> bytes:
    """A small zip archive (a package's container) of one member."""
    import io
    import zipfile

    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        archive.writestr("model/data/step.bin", bytes(range(256)) * 64)
    return data.getvalue()


def _flip_a_member_byte(data: bytes) -> bytes:
    at = data.index(bytes(range(256))) + 100  # inside the stored member: its CRC fails
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]


PACKAGE_DAMAGES = [
    pytest.param(b"", id="empty"),
    pytest.param(b"\x00garbage" * 100, id="not-a-zip"),
    pytest.param(_zip_bytes()[: len(_zip_bytes()) // 2], id="truncated"),
    pytest.param(_flip_a_member_byte(_zip_bytes()), id="corrupted-member"),
]


@pytest.mark.parametrize("damage", PACKAGE_DAMAGES)
def test_a_damaged_package_on_disk_is_removed_and_built_again(
    damage: bytes, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The package is a hint like every cache (issue 51): a damaged one was loaded as found,
    failed, and the runner stayed eager for good; it is now logged, removed and rebuilt."""
    runner = FastRunner(tiny(), "fp32")
    path = compiled.package_path(runner, 1, tmp_path)
    path.write_bytes(damage)
    ran = tmp_path / "builder-ran"
    builder = [sys.executable, "-c", f"open({str(ran)!r}, 'w').close()"]  # leaves no package
    with caplog.at_level("WARNING", logger=compiled.__name__):
        compiler = compiled.BackgroundCompiler(runner, builder, directory=tmp_path)
        assert compiler.wait(60)
    assert ran.exists() and not path.exists()  # removed, and the build ran
    assert compiler.error is not None and "left no package" in compiler.error
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(str(path) in w and "building it again" in w for w in warnings)
    assert not compiler.ready and runner.compiled_steps == {}


def test_a_sound_zip_passes_the_package_check(tmp_path: Path) -> None:
    path = tmp_path / "step.pt2"
    path.write_bytes(_zip_bytes())
    assert compiled.package_problem(path) is None
    path.write_bytes(_flip_a_member_byte(_zip_bytes()))
    assert "checksum" in (compiled.package_problem(path) or "")


@pytest.mark.slow  # the package fixture: an AOTInductor build
def test_a_truncated_package_is_rebuilt_and_loaded(
    package: tuple[FastRunner, Path], tmp_path: Path
) -> None:
    runner, good = package
    runner.compiled_steps = {}
    path = compiled.package_path(runner, 1, tmp_path)
    path.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    rebuild = [
        sys.executable,
        "-c",
        f"import shutil, sys; shutil.copy({str(good)!r}, sys.argv[-1])",
    ]
    compiler = compiled.BackgroundCompiler(runner, rebuild, directory=tmp_path)
    assert compiler.wait(120)
    assert compiler.error is None and compiler.ready and 1 in runner.compiled_steps
    runner.compiled_steps = {}
