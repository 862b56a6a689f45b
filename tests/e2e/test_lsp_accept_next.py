"""End-to-end: the next draft is decoded when a draft is accepted (``triggerOnAccept``), and
the editor's next request there answers from it without a model call of its own.

The tiny model over stdio.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.e2e.lsp_harness import (
    K,
    command,
    end_of,
    inline_items,
    open_doc,
    session,
    wait_for_counter,
)

pytestmark = pytest.mark.slow  # every test starts the server over stdio

TEXT = "def area(side):\n    return side * side\n\n\ndef perimeter(side):\n    "


async def drafts(client: LanguageClient, uri: str, pos: types.Position) -> list[Any]:
    return await inline_items(client, uri, pos, types.InlineCompletionTriggerKind.Automatic)


async def accept_first(client: LanguageClient, uri: str, text: str) -> tuple[str, Any]:
    """Ask at the document's end, accept the first draft (its command, as an editor runs
    it), and send the insertion: the document's new text and the accept's argument."""
    items = await drafts(client, uri, end_of(text))
    assert items
    command_ = items[0].command
    assert command_ is not None and command_.arguments
    argument = command_.arguments[0]
    position = end_of(text)
    assert argument["position"] == {"line": position.line, "character": position.character}
    await command(client, command_.command, argument)
    accepted = text + str(items[0].insert_text)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=accepted)],
        )
    )
    return accepted, argument


async def test_the_next_request_after_an_accept_needs_no_model_call(workspace: Path) -> None:
    async with session(workspace, {"k": K, "maxNewTokens": 4}) as client:
        uri = open_doc(client, workspace / "area.py", TEXT)
        accepted, _ = await accept_first(client, uri, TEXT)
        await wait_for_counter(client, "ahead_ready", 1)
        assert len(await drafts(client, uri, end_of(accepted))) >= 1
        counters = (await command(client, "superposed.stats"))["counters"]
        assert counters["drafted_ahead"] == 1
        assert counters["model_calls"] == 2  # the first request and the accept's job only
        assert counters["typed_along"] == 1


async def test_a_request_while_the_job_runs_waits_for_it(workspace: Path) -> None:
    """Slow steps: the editor asks before the accept's job has finished; it answers from
    that job instead of queueing a model call behind it."""
    async with session(workspace, {"k": K, "maxNewTokens": 4}, step_delay_s=0.2) as client:
        uri = open_doc(client, workspace / "area.py", TEXT)
        accepted, _ = await accept_first(client, uri, TEXT)
        assert len(await drafts(client, uri, end_of(accepted))) >= 1
        counters = (await command(client, "superposed.stats"))["counters"]
        assert counters["answered_ahead"] == 1
        assert counters["model_calls"] == 2


async def test_a_request_elsewhere_decodes_its_own(workspace: Path) -> None:
    async with session(workspace, {"k": K, "maxNewTokens": 4}, step_delay_s=0.2) as client:
        uri = open_doc(client, workspace / "area.py", TEXT)
        await accept_first(client, uri, TEXT)
        assert await drafts(client, uri, types.Position(line=1, character=4))
        counters = (await command(client, "superposed.stats"))["counters"]
        assert counters.get("answered_ahead", 0) == 0 and counters.get("ahead_ready", 0) == 0
        assert counters["model_calls"] == 3


async def test_off_no_job_and_an_accept_without_position_none_either(workspace: Path) -> None:
    async with session(workspace, {"k": K, "maxNewTokens": 4, "triggerOnAccept": False}) as client:
        uri = open_doc(client, workspace / "area.py", TEXT)
        await accept_first(client, uri, TEXT)
        counters = (await command(client, "superposed.stats"))["counters"]
        assert counters.get("drafted_ahead", 0) == 0
    async with session(workspace, {"k": K, "maxNewTokens": 4}) as client:
        uri = open_doc(client, workspace / "area.py", TEXT)
        # a client's partial accept says what went in but not where: learned, nothing decoded
        learned = await command(client, "superposed.accept", {"uri": uri, "text": "return 4"})
        assert learned["learned"]
        counters = (await command(client, "superposed.stats"))["counters"]
        assert counters.get("drafted_ahead", 0) == 0 and counters["accepted"] == 1


async def test_an_undone_accept_does_not_replace_the_drafts_shown(workspace: Path) -> None:
    """The editors' report: accepted, undone (the insertion never reaches the server), and
    asked again where the drafts were shown: answered from them, and the accept's job is
    cancelled rather than replacing them when it ends."""
    async with session(workspace, {"k": K, "maxNewTokens": 4}, step_delay_s=0.2) as client:
        uri = open_doc(client, workspace / "area.py", TEXT)
        items = await drafts(client, uri, end_of(TEXT))
        assert items and items[0].command is not None and items[0].command.arguments
        await command(client, items[0].command.command, items[0].command.arguments[0])
        assert [str(i.insert_text) for i in await drafts(client, uri, end_of(TEXT))] == [
            str(i.insert_text) for i in items
        ]
        for _ in range(200):  # until the job ends, one way or the other
            counters = (await command(client, "superposed.stats"))["counters"]
            if counters.get("cancelled", 0) or counters.get("ahead_ready", 0):
                break
            await asyncio.sleep(0.1)
        assert counters["drafted_ahead"] == 1 and counters["typed_along"] == 1
        assert counters.get("ahead_ready", 0) == 0 and counters["cancelled"] == 1
