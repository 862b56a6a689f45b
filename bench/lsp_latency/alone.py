"""The cases ``--cases NAME`` runs alone, each on a server of its own
(bench/results/lsp_latency_NAME)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.lsp_latency.accept import accept_case, accept_table
from bench.lsp_latency.client import COMPILE_WAIT_S, LONG_SOURCE, SHORT, Bench, server
from bench.lsp_latency.cursor_rest import cursor_rest_case, cursor_rest_table

# The cases ``--cases`` runs alone: (the result's key, the case, the title of its report).
ALONE: dict[str, tuple[str, Callable[..., Any], str]] = {}


async def run_alone(
    name: str, model: str, requests: int, k: int, settings: dict[str, Any]
) -> dict[str, Any]:
    """One case (``--cases NAME``) on a server of its own, after a warm-up request."""
    key, case_fn, _ = ALONE[name]
    with tempfile.TemporaryDirectory(prefix="lsp-latency-") as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        options = {"model": model, "k": k, "userStore": False, **settings}
        async with server(workspace, Path(tmp) / "data", options) as client:
            bench = Bench(client, workspace)
            await bench.wait_ready()
            compiled_state = await bench.wait_compiled(COMPILE_WAIT_S)
            await bench.walk("warmup", SHORT, [len(SHORT.split("\n")) - 2])
            case = await case_fn(bench, LONG_SOURCE.read_text(), requests)
            stats = await bench.stats()
    return {
        "case": name,
        "model": stats["model"],
        "k": k,
        "settings": stats["settings"],
        "compiled_step": compiled_state,
        key: case,
        "loadavg_after": os.getloadavg(),
    }


def alone_markdown(result: dict[str, Any]) -> str:
    _, _, title = ALONE[result["case"]]
    header = [
        f"# Language server latency: {title}",
        "",
        f"Model {result['model']}, k={result['k']}, compiled decode step "
        f"{result['compiled_step']}. Machine: {result['machine']}; load average before "
        f"{result['loadavg_before'][0]:.2f}, after {result['loadavg_after'][0]:.2f} (shared: "
        "treat as noisy).",
    ]
    tables = [*cursor_rest_table(result), *accept_table(result)]
    return "\n".join([*header, *tables, "", f"Command: `{result['command']}`", ""])


ALONE.update(
    rest=("cursor_rest", cursor_rest_case, "the request after the cursor rests"),
    accept=("accept", accept_case, "the next draft after an accept"),
)
