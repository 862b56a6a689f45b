"""Where results go and how they are stamped: paths, the stamp, JSON output, timing helpers."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
DATA = ROOT / "bench" / "data"


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


# The CPU features this product's kernels are chosen by (superposed/quant.py, calibrate.py):
# bf16 matmuls are fast with AVX-512 BF16 or AMX and emulated on AVX2, int8 ones use VNNI.
CPU_FEATURES = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile")


def cpu_description(cpuinfo: str | None = None) -> str:
    """The CPU as ``/proc/cpuinfo`` (or ``cpuinfo``) names it: its model name, family and model
    (one name covers generations: this project's hosts were all "AMD EPYC", and a prefill ran
    twice as fast on one of family 26 as on the earlier ones), and which of CPU_FEATURES it
    has. ``platform.processor()`` where there is no cpuinfo to read."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return platform.processor() or "CPU not known"
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            break  # the first processor's block says it for all
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or platform.processor() or "CPU not known"
    flags = set(fields.get("flags", "").split())
    has = " ".join(f for f in CPU_FEATURES if f in flags) or "none of " + "/".join(CPU_FEATURES)
    if "cpu family" not in fields:
        return f"{name} ({has})"
    return f"{name} (family {fields['cpu family']}, model {fields.get('model', '?')}; {has})"


def machine_description() -> str:
    """Where a result was measured: architecture, CPUs, system and which CPU."""
    return f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}, {cpu_description()}"


@dataclass
class Stamp:
    """Where and when numbers were measured."""

    model: str
    commit: str = field(default_factory=git_commit)
    date: str = field(default_factory=lambda: time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    machine: str = field(default_factory=machine_description)
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


def write_results(out: Path, result: Any, markdown: Callable[[Any], str]) -> None:
    """``result`` as ``out``.json, and its report (``markdown``) as ``out``.md, printed."""
    write_json(out.with_suffix(".json"), result)
    report = markdown(result)
    out.with_suffix(".md").write_text(report)
    print(report)


@contextmanager
def progress(label: str, total: int) -> Iterator[Any]:
    """A tqdm bar on stderr (stdout stays for the summary lines)."""
    from tqdm import tqdm

    bar = tqdm(total=total, desc=label, file=sys.stderr, mininterval=5, leave=False)
    try:
        yield bar
    finally:
        bar.close()


def elapsed_ms(fn: Callable[[], object], sync: Callable[[], None] | None = None) -> float:
    """The wall-clock milliseconds of one call of ``fn`` (``sync`` waits for queued device
    work inside the timing)."""
    start = time.perf_counter()
    fn()
    if sync is not None:
        sync()
    return (time.perf_counter() - start) * 1e3


def median_ms(fn: Callable[[], object], runs: int, sync: Callable[[], None] | None = None) -> float:
    """The median wall-clock milliseconds of ``runs`` calls of ``fn``."""
    return statistics.median(elapsed_ms(fn, sync) for _ in range(runs))


def medians(
    times: Mapping[str, Sequence[float]], digits: int = 1, warm_up: bool = False
) -> dict[str, float]:
    """Each name's median ms, rounded; ``warm_up``: the first sample left out where there are
    more (it warmed the caches)."""
    return {
        name: round(statistics.median(list(v[1:] if warm_up and len(v) > 1 else v)), digits)
        for name, v in times.items()
    }


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank q-th percentile (0..100); nan for no values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]
