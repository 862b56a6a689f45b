"""debounceMs, and requests during a model reload, over a real stdio connection (tiny model)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types

from tests.e2e.lsp_harness import (
    SAMPLE,
    command,
    end_of,
    inline,
    open_doc,
    session,
    type_at,
    wait_until_ready,
)

pytestmark = pytest.mark.slow  # every test starts the server over stdio

TEXT = SAMPLE + "\ndef helper():\n    "


async def test_a_newer_request_within_debounce_replaces_the_older_undecoded(
    workspace: Path,
) -> None:
    """Two requests 50 ms apart with debounceMs 1000, a keystroke between them: one model
    call, the older answers empty. (At one place, the newer would join the older instead.)"""
    async with session(workspace, {"k": 3, "maxNewTokens": 4, "debounceMs": 1000}) as client:
        uri = open_doc(client, workspace / "app.py", TEXT)
        pos = end_of(TEXT)
        older = asyncio.ensure_future(inline(client, uri, pos))
        await asyncio.sleep(0.05)
        type_at(client, uri, TEXT, "r")
        newer = await inline(client, uri, end_of(TEXT + "r"))
        assert await older == []
        assert len(newer) == 3
        counters = (await command(client, "superposed.stats"))["counters"]
        assert counters["model_calls"] == 1
        assert counters["debounced"] == 1


async def test_without_debounce_each_request_decodes(workspace: Path) -> None:
    """debounceMs 0 (the setting's floor): a lone request is not delayed and decodes."""
    async with session(workspace, {"k": 3, "maxNewTokens": 4, "debounceMs": 0}) as client:
        uri = open_doc(client, workspace / "app.py", TEXT)
        assert len(await inline(client, uri, end_of(TEXT))) == 3
        stats = await command(client, "superposed.stats")
        assert stats["settings"]["debounceMs"] == 0
        assert stats["counters"]["model_calls"] == 1
        assert "debounced" not in stats["counters"]


async def test_request_while_the_model_reloads_reads_open_stores(workspace: Path) -> None:
    """Settings that reload the model (and reopen the stores) right after `initialized`, as
    Neovim 0.12's vim.lsp.config sends them: a request that comes once the first load is ready
    waits behind the second on the engine thread, and must decode with open stores.

    Before the fix it answered "Cannot operate on a closed database" (the n-gram source was
    taken on the event loop, from the stores the second load then closed).
    """
    options = {"k": 3, "maxNewTokens": 4}
    # Each load waits 1 s first: the request lands between the two loads.
    async with session(workspace, options, wait_ready=False, load_delay_s=1) as client:
        uri = open_doc(client, workspace / "app.py", TEXT)
        changed = {**options, "compile": "off"}  # a model setting: the model reloads
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"superposed": changed})
        )
        await wait_until_ready(client)
        drafts = await inline(client, uri, end_of(TEXT))
        assert len(drafts) == 3
        stats = await command(client, "superposed.stats")
        assert stats["settings"]["compile"] == "off"
