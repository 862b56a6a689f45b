"""The footprint case of bench/lsp_latency.py alone (issue 14): one server run (load the
default model and its compiled decode step, answer one request, shut down), its resident
memory and peak, beside the server of an earlier commit with ``--before``.

    python -m bench.lsp_footprint [--before REF]   # bench/results/lsp_footprint.{json,md}
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import Any

from bench.lsp_latency import footprint_cases, footprint_table, save
from bench.measure import RESULTS


def markdown(result: dict[str, Any]) -> str:
    return "\n".join(["# Server footprint (bench/lsp_footprint.py)", *footprint_table(result)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "lsp_footprint")
    parser.add_argument("--before", metavar="REF", help="also the server at this commit")
    args = parser.parse_args(argv)
    before = os.getloadavg()
    result: dict[str, Any] = {
        "footprint": asyncio.run(footprint_cases(args.model, args.k, args.before))
    }
    save(result, before, args.out, "lsp_footprint.py", argv, markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
