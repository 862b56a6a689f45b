"""The footprint case (issue 14): a server of its own loads, answers one request, shuts down; its
resident memory."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from bench.lsp_latency.client import COMPILE_WAIT_S, SHORT, Bench, server, sources_at
from bench.tables import table

FOOTPRINT_TARGET_MB = 600  # issue 14: peak of one server run with the default model, CPU


async def footprint(model: str, k: int, sources: Path | None = None) -> dict[str, Any]:
    """One server run as issue 14 measures it: load the model, get the compiled step, answer
    one request, shut down; resident MiB at each stage (``sources``: the server's code)."""
    with tempfile.TemporaryDirectory(prefix="lsp-footprint-") as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        options = {"model": model, "k": k, "userStore": False}
        async with server(workspace, Path(tmp) / "data", options, sources) as client:
            bench = Bench(client, workspace)
            await bench.wait_ready()
            loaded = (await bench.stats())["residentMb"]
            compiled_state = await bench.wait_compiled(COMPILE_WAIT_S)
            compiled = (await bench.stats())["residentMb"]
            lines = SHORT.split("\n")
            walked = await bench.walk("footprint", SHORT, [len(lines) - 2])
            stats = await bench.stats()
    return {
        "loaded_mb": loaded["rss"],
        "compiled_step": compiled_state,
        "with_compiled_step_mb": compiled["rss"],
        "steady_mb": stats["residentMb"]["rss"],  # after the request
        "peak_mb": stats["residentMb"]["peak"],
        "request_ms": walked["model"][0],
        "target_peak_mb": FOOTPRINT_TARGET_MB,
        "meets_target": stats["residentMb"]["peak"] <= FOOTPRINT_TARGET_MB,
    }


async def footprint_cases(
    model: str, k: int, before: str | None, after: str | None = None
) -> dict[str, Any]:
    """The footprint case on this server (the checkout's, or commit ``after``'s), and on the
    server of commit ``before`` if given."""
    with tempfile.TemporaryDirectory(prefix="lsp-before-") as tmp:
        now = None if after is None else sources_at(after, Path(tmp) / "after")
        name = "this commit" if after is None else f"this ({after})"
        cases = {name: await footprint(model, k, now)}
        if before is not None:
            then = sources_at(before, Path(tmp) / "before")
            cases[f"before ({before})"] = await footprint(model, k, then)
    return cases


def footprint_table(result: dict[str, Any]) -> list[str]:
    if "footprint" not in result:
        return []
    return [
        "",
        "## Footprint: one server run (issue 14)",
        "",
        "A server of its own loads the default model and its compiled decode step, answers "
        "one request and shuts down (resident memory from `superposed.stats`; the peak is "
        f"the process's high-water mark). Target: peak at most {FOOTPRINT_TARGET_MB} MB.",
        "",
        table(
            [
                "server",
                "loaded MiB",
                "+ compiled step MiB",
                "steady MiB (after the request)",
                "peak MiB",
                "peak <= target",
            ],
            [
                [
                    name,
                    f"{case['loaded_mb']:.0f}",
                    f"{case['with_compiled_step_mb']:.0f} ({case['compiled_step']})",
                    f"{case['steady_mb']:.0f}",
                    f"{case['peak_mb']:.0f}",
                    "yes" if case["meets_target"] else "no",
                ]
                for name, case in result["footprint"].items()
            ],
            "lrrrrl",
        ),
    ]
