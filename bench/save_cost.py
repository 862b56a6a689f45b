"""What one save of a huge document costs the server's store layer, with and without the cap.

    python -m bench.save_cost [--mb 20] [--repeats 1]   # bench/results/save_cost.json

Each case runs in a fresh child process (so peak memory is its own): ``Stores.update_file``
of a generated Python file of ``--mb`` megabytes, as the server's didSave does, with the
default ``maxFileBytes`` (1 MB: the save is skipped as too large) and with the cap lifted
(what every save did before issue 12). Prints and saves the median seconds and each child's
peak and final resident memory, side by side. The default tokenizer and the text are in
memory before the save in both (``baseline``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any

from bench.measure import Stamp
from bench.pipeline import Benchmark, run

CHILD = r"""
import gc, json, resource, sys, time
from pathlib import Path
from superposed.tokenizer import load_tokenizer
from lsp_server.settings import StoreSettings
from lsp_server.stores import Stores

folder, mb, cap = Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
tokenizer = load_tokenizer("")  # the default model's
ws = folder / "ws"
ws.mkdir(parents=True, exist_ok=True)
line = "def handler_{i}(request, value):\n    return request.respond(value * {i})\n\n"
text, i = [], 0
size = 0
while size < mb * 1e6:
    chunk = line.format(i=i)
    text.append(chunk)
    size += len(chunk)
    i += 1
text = "".join(text)
settings = StoreSettings(
    codebase_db=str(folder / "cb.sqlite"), user_db=str(folder / "user.sqlite"), max_file_bytes=cap
)
stores = Stores(tokenizer, settings)
stores.codebase(ws), stores.user()  # opened (created) before: the save alone is timed
baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
reason = stores.update_file(ws / "huge.py", text, [ws]) if cap else None
seconds = time.perf_counter() - start
del text
gc.collect()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with open("/proc/self/statm") as f:
    final = int(f.read().split()[1]) * resource.getpagesize() // 1024
print(json.dumps({"seconds": seconds, "reason": reason, "baseline_kib": baseline,
                  "peak_kib": peak, "final_kib": final}))
"""


def run_case(mb: float, cap: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, tmp, str(mb), str(cap)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "TOKENIZERS_PARALLELISM": "true"},
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    from lsp_server.settings import StoreSettings

    stamp = Stamp(model="the default tokenizer (no model)")
    cap = StoreSettings().max_file_bytes
    caps = {f"capped (maxFileBytes {cap:,})": cap, "uncapped (before issue 12)": 10**12}
    cases = {}
    for name, bytes_ in caps.items():
        runs = [run_case(args.mb, bytes_) for _ in range(args.repeats)]
        cases[name] = {"median_s": statistics.median(r["seconds"] for r in runs), "last": runs[-1]}
    return {"mb": args.mb, "repeats": args.repeats, "cases": cases}, stamp


def report(result: dict[str, Any]) -> list[str]:
    s = result["stamp"]
    lines = [
        f"one save of a {result['mb']:g} MB file; load {s['load_start'][0]:.2f}",
        f"{'case':36} {'seconds':>8} {'baseline MB':>12} {'peak MB':>9} {'after MB':>9}  skipped",
    ]
    for name, case in result["cases"].items():
        last = case["last"]
        lines.append(
            f"{name:36} {case['median_s']:8.2f} {last['baseline_kib'] / 1024:12.0f} "
            f"{last['peak_kib'] / 1024:9.0f} {last['final_kib'] / 1024:9.0f}  {last['reason']}"
        )
    return [*lines, f"load after {s['load_end'][0]:.2f}"]


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mb", type=float, default=20.0)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", help="results file (default bench/results/save_cost.json)")


BENCH = Benchmark("save_cost", __doc__.splitlines()[0], options=options)


def main(argv: list[str] | None = None) -> None:
    run(BENCH, measure, report, argv)


if __name__ == "__main__":
    main()
