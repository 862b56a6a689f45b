"""bench.lsp_latency: its report and side-by-side runs on results made up here, and its full run
against a fake server over stdio (a real run needs the model and minutes:
`python -m bench.lsp_latency`)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import lsp_latency as L
from bench.lsp_latency.cursor_rest import REST
from bench.lsp_latency.first_request import FIRST, LATER


def _run(short: list[float], first: list[float], rest: list[float]) -> dict[str, Any]:
    """A full run's result as bench.lsp_latency.walks.run makes it, with these times."""
    typing = [(300.0, {"steps": 200.0, "prefill": 50.0})]
    return {
        "model": "m", "k": 3, "machine": "x86_64", "loadavg_before": [1.0], "loadavg_after": [2.0],
        "settings": {"maxPromptTokens": 1024, "maxNewTokens": 24, "method": "superposed"},
        "short_file_lines": 20, "long_file": {"path": "/x/argparse.py", "lines": 2600},
        "server_ready_s": 4.0, "drafts_per_request_mean": 2.5, "compiled_step": "ready",
        "cases": {"inline k=3, short file": L.summary(short), FIRST: L.summary(first),
                  LATER: L.summary(first[:1]), REST: L.summary(rest)},
        "typing_1500": L.typing_target(typing),
        "first_request": {"later_s": 2.5, "first_prompt_tokens_p50": 256.0,
                          "later_prefilled_tokens_p50": 40.0},
        "cursor_rest": {"rest_s": 1.0, "prefilled_tokens_p50": 12.0},
        "command": "python -m bench.lsp_latency",
    }  # fmt: skip


def test_a_servers_runs_pool_every_case_request_by_request() -> None:
    """--rounds 2: each case over all the runs' requests, not a median of medians (the
    first-request and rest cases are cases like the others)."""
    runs = [_run([1.0, 2.0, 30.0], [400.0], [10.0, 20.0]), _run([4.0, 5.0], [600.0], [40.0])]
    both = L.pooled(runs)
    assert both["cases"]["inline k=3, short file"]["p50_ms"] == 4.0
    assert both["cases"][FIRST]["values_ms"] == [400.0, 600.0]
    assert both["cases"][REST]["n"] == 3 and both["cases"][REST]["p50_ms"] == 20.0
    assert both["cursor_rest"]["prefilled_tokens_p50"] == 12.0  # the details: the first run's


def test_the_before_table_has_a_row_per_case_with_the_ratio_of_the_p50s() -> None:
    now = _run([10.0], [400.0], [100.0])
    before = _run([20.0], [400.0], [400.0])
    now["before"] = {"ref": "abc123", "cases": before["cases"], "rounds": 1}
    now["after"] = "def456"
    section = "\n".join(L.before_table(now))
    assert "| inline k=3, short file | 20 | 10 | 0.50x |" in section
    assert f"| {FIRST} | 400 | 400 | 1.00x |" in section
    assert f"| {REST} | 400 | 100 | 0.25x |" in section
    assert "This: the server of commit def456." in section


def test_the_report_gives_each_case_and_its_target() -> None:
    text = L.markdown(_run([10.0], [450.0, 700.0, 480.0], [350.0]))
    assert f"| {FIRST} | 3 | 480 |" in text and f"| {REST} | 1 | 350 |" in text
    assert "Target: p50 first request <= 500 ms: **met** (480 ms)." in text
    assert "Target: p50 <= 300 ms: **not met** (350 ms)." in text
    assert "Prompt tokens of the first request, p50: 256" in text
    assert "## Against the server" not in text  # no --before


def test_a_result_without_those_cases_renders_without_their_sections() -> None:
    result = _run([10.0], [400.0], [100.0])
    del result["cases"][FIRST], result["cases"][REST]
    text = L.markdown(result)
    assert "## First request" not in text and "## The request after the cursor" not in text


# ----- the full run, against a fake server over stdio ----------------------------------------

DEFAULTS = {"maxPromptTokens": 1024, "maxNewTokens": 24, "firstPromptTokens": 256,
            "method": "superposed"}  # fmt: skip


def fake_server() -> None:
    """A server that answers every inline request with two drafts and keeps the settings it is
    given (at initialize and in didChangeConfiguration), as superposed.stats reports them."""
    from lsprotocol import types
    from pygls.lsp.server import LanguageServer

    server = LanguageServer("fake-latency", "1")
    state: dict[str, Any] = {"settings": dict(DEFAULTS), "calls": 0, "rests": 0}

    @server.feature(types.INITIALIZED)
    def initialized(ls: LanguageServer, params: types.InitializedParams) -> None:
        return None

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION)
    def inline(ls: LanguageServer, params: types.InlineCompletionParams) -> Any:
        state["calls"] += 1
        return types.InlineCompletionList(
            items=[types.InlineCompletionItem(insert_text=t) for t in ("abcdef", "xyz")]
        )

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def configure(ls: LanguageServer, params: types.DidChangeConfigurationParams) -> None:
        state["settings"].update(params.settings["superposed"])

    @server.feature("superposed/cursorRest")
    def rest(ls: LanguageServer, params: Any) -> None:
        state["rests"] += 1

    @server.command("superposed.stats")
    def stats(ls: Any, *args: Any) -> dict[str, Any]:
        return {"ready": True, "compiledStep": "ready", "model": "fake",
                "settings": dict(state["settings"]), "residentMb": {"rss": 100.0, "peak": 120.0},
                "lastPrompt": {"tokens": 300, "reused": 280},
                "lastTimingMs": {"steps": 5.0, "prefill": 1.0},
                "counters": {"model_calls": state["calls"],
                             "cursor_rests": state["rests"]}}  # fmt: skip

    server.start_io()


@pytest.mark.slow
def test_a_full_run_reports_every_case_and_the_settings_they_ran_with() -> None:
    """Every case of a run on one server, each a row of the table; the settings reported are
    the run's, not those the last case (the 1,500-token prompt) switched to."""
    here = Path(__file__).resolve()
    start = f"import runpy, sys; sys.path[:0] = [{str(here.parent.parent)!r}]; "
    command = [sys.executable, "-c", start + f"runpy.run_path({str(here)!r}, run_name='__main__')"]
    result = asyncio.run(L.run("fake", 1, 3, command=command))
    assert result["settings"]["maxPromptTokens"] == 1024  # the typing case's 2048 came after
    assert {FIRST, LATER, REST} <= set(result["cases"]) and result["cases"][FIRST]["n"] == 1
    assert result["counters"]["cursor_rests"] == 1  # the rest case tells the server
    assert result["cursor_rest"]["prefilled_tokens_p50"] == 20  # 300 tokens, 280 reused
    assert "maxPromptTokens=1024" in L.markdown({**result, "machine": "m", "loadavg_before": [0.0],
                                                  "command": "c"})  # fmt: skip


if __name__ == "__main__":
    fake_server()
