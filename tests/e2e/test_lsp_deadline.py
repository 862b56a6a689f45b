"""End-to-end: an answer due at ``answerWithinMs`` (issue 54 item 4) holds the drafts as far
as they got, and the server decodes them whole at once for the next keystroke along them.

The tiny model over stdio, its steps slowed so that the deadline falls mid-decode.
"""

from __future__ import annotations

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
SETTINGS = {"k": K, "maxNewTokens": 12, "wellFormed": False, "memory": False}


async def texts(client: LanguageClient, uri: str, pos: types.Position) -> list[str]:
    kind = types.InlineCompletionTriggerKind.Invoked
    return [str(item.insert_text) for item in await inline_items(client, uri, pos, kind)]


async def counters(client: LanguageClient) -> Any:
    return (await command(client, "superposed.stats"))["counters"]


async def test_an_answer_due_early_is_cut_then_completed_for_the_next_keystroke(
    workspace: Path,
) -> None:
    """Cut at the deadline; asked again while the rest decodes, the cut drafts answer at once
    (a deadline never makes a request wait for more); once the rest is decoded, the next
    request gets the drafts whole, as a server without the deadline answers."""
    slow = 0.1  # s a cancellation check (a few a step): the rest decodes for seconds
    async with session(workspace, SETTINGS, step_delay_s=slow) as client:
        uri = open_doc(client, workspace / "area.py", TEXT)
        whole = await texts(client, uri, end_of(TEXT))  # no deadline: the drafts whole
    assert whole
    async with session(workspace, {**SETTINGS, "answerWithinMs": 1}, step_delay_s=slow) as client:
        told: list[Any] = []

        @client.feature("superposed/draftsWhole")
        def drafts_whole(params: Any) -> None:
            told.append(params)

        uri = open_doc(client, workspace / "area.py", TEXT)
        cut = await texts(client, uri, end_of(TEXT))
        assert cut and cut != whole  # as far as they got: a few tokens each
        assert sum(map(len, cut)) < sum(map(len, whole))
        assert await texts(client, uri, end_of(TEXT)) == cut  # at once, from the cut drafts
        assert not told
        # decoded whole, in the typing-along cache (a minute at most), and the server said so
        # before it answered the stats that say it (one callback: the counter, the notice)
        await wait_for_counter(client, "ahead_ready", 1, timeout_s=60)
        assert [params.textDocument.uri for params in told] == [uri]  # the editor may ask
        assert await texts(client, uri, end_of(TEXT)) == whole
        done = await counters(client)
        assert done["decoded_whole"] == 1 and done["model_calls"] == 2
        assert done["typed_along"] == 2


async def test_a_request_in_another_file_stops_the_rest_decoding_for_the_file_left(
    workspace: Path,
) -> None:
    """The rest of a cut answer decodes on the engine thread, which the next file's first
    request needs: the user went there, so the request cancels it rather than wait for drafts
    at a place left (lsp_latency's first request in a file waited up to ~700 ms for it)."""
    other_text = "def volume(side):\n    "
    async with session(workspace, {**SETTINGS, "answerWithinMs": 1}, step_delay_s=0.1) as client:
        told: list[str] = []

        @client.feature("superposed/draftsWhole")
        def drafts_whole(params: Any) -> None:
            told.append(params.textDocument.uri)

        left = open_doc(client, workspace / "area.py", TEXT)
        assert await texts(client, left, end_of(TEXT))  # cut: its rest decodes now
        there = open_doc(client, workspace / "volume.py", other_text)
        assert await texts(client, there, end_of(other_text))
        await wait_for_counter(client, "ahead_ready", 1, timeout_s=60)  # a rest decoded
        assert told == [there]  # the new file's: the one left was cancelled, not waited for
        done = await counters(client)
        assert done["cancelled"] >= 1 and done["ahead_left"] == 1, done
