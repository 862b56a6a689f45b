"""End-to-end: the first request in a freshly opened long file, and the cache warm-up.

The tiny model over stdio (test_lsp.py's session). ``superposed.stats`` reports the last
answer's prompt (``lastPrompt``: tokens, reused from the KV cache, short window) and the
warm-up counters. A step delay makes the warm-up's chunks slow enough to be caught running.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from lsp_server.runtime.warmup import WARM_IDLE_S
from lsp_server.settings import DecodingSettings
from tests.e2e.lsp_harness import (
    command,
    end_of,
    inline,
    open_doc,
    session,
    type_at,
    wait_for_counter,
)

pytestmark = pytest.mark.slow  # every test starts the server over stdio

K = 3
FIRST = DecodingSettings().first_prompt_tokens  # firstPromptTokens' default
# About 3,400 tokens of Python: far more than the 1024-token window.
LONG = "".join(
    f"def scaled_{i}(values, factor={i}):\n    return [v * factor for v in values]\n\n\n"
    for i in range(150)
)
TEXT = LONG + "def total(values):\n    "


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".git").mkdir()  # a repository root, as the stores expect
    return root


async def test_first_request_prefills_only_the_short_window(workspace: Path) -> None:
    """A fresh long file: the first answer's prompt is the short window, then the warm-up
    extends the cache to the full window, and the next request prefills a few tokens only."""
    options = {"k": K, "maxNewTokens": 4}
    async with session(workspace, options, step_delay_s=0.05) as client:
        uri = open_doc(client, workspace / "long.py", TEXT)
        assert await inline(client, uri, end_of(TEXT))
        stats = await command(client, "superposed.stats")
        first = stats["lastPrompt"]
        assert first["short"] is True
        assert first["tokens"] <= FIRST
        assert first["tokens"] - first["reused"] <= FIRST
        assert stats["counters"]["short_window"] == 1

        await wait_for_counter(client, "warmups_done", 1)  # the full window, in the background
        type_at(client, uri, TEXT, "s")
        assert await inline(client, uri, end_of(TEXT + "s"))
        later = (await command(client, "superposed.stats"))["lastPrompt"]
        assert later["short"] is False
        assert later["tokens"] > 600  # the full window (1024 less the grid and room for new tokens)
        assert later["tokens"] - later["reused"] <= 8  # only what was typed, and the healed end


async def test_open_and_edit_warm_the_cache(workspace: Path) -> None:
    """didOpen and didChange warm the cache: a request after them prefills a few tokens."""
    async with session(workspace, {"k": K, "maxNewTokens": 4}) as client:
        uri = open_doc(client, workspace / "long.py", TEXT)
        await wait_for_counter(client, "warmups_done", 1)
        type_at(client, uri, TEXT, "ret")
        await wait_for_counter(client, "warmups_done", 2)
        assert await inline(client, uri, end_of(TEXT + "ret"))
        stats = await command(client, "superposed.stats")
        prompt = stats["lastPrompt"]
        assert prompt["short"] is False and prompt["tokens"] > 600
        assert prompt["tokens"] - prompt["reused"] <= 4


async def test_request_during_warmup_is_answered(workspace: Path) -> None:
    """A request that comes while a warm-up runs cancels it between chunks and is answered."""
    options = {"k": K, "maxNewTokens": 4}
    # 0.3 s a chunk: the didOpen warm-up of ~8 chunks would hold the engine for 2.4 s.
    async with session(workspace, options, step_delay_s=0.3) as client:
        uri = open_doc(client, workspace / "long.py", TEXT)
        await asyncio.sleep(WARM_IDLE_S + 1.0)  # the warm-up is prefilling its chunks now
        assert await inline(client, uri, end_of(TEXT))
        counters = (await command(client, "superposed.stats"))["counters"]
        assert counters["warmups_cancelled"] >= 1
        assert counters.get("warmups_done", 0) == 0  # the answer did not wait for it to end


async def test_first_prompt_tokens_zero_keeps_the_full_window(workspace: Path) -> None:
    """firstPromptTokens 0: the first request prefills the whole window, nothing is warmed."""
    async with session(workspace, {"k": K, "maxNewTokens": 4, "firstPromptTokens": 0}) as client:
        uri = open_doc(client, workspace / "long.py", TEXT)
        assert await inline(client, uri, end_of(TEXT))
        stats = await command(client, "superposed.stats")
        assert stats["lastPrompt"]["short"] is False
        assert stats["lastPrompt"]["tokens"] > 600
        assert "warmups_done" not in stats["counters"]
