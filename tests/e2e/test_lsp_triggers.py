"""End-to-end: the trigger rules (automatic requests refused or answered, invoked ones always
answered) and the cache warmed where the cursor rests (``superposed/cursorRest``).

The tiny model over stdio.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.e2e.lsp_harness import K, command, inline, open_doc, session, wait_for_counter
from tests.e2e.test_warmup import LONG

pytestmark = pytest.mark.slow  # every test starts the server over stdio

TEXT = "def area(side):\n    return side * side\n\n\nprint(area(2))\n"


async def automatic(client: LanguageClient, uri: str, line: int, character: int) -> list[str]:
    result = await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=character),
            context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Automatic
            ),
        )
    )
    assert isinstance(result, types.InlineCompletionList)
    return [str(item.insert_text) for item in result.items]


async def popup(client: LanguageClient, uri: str, line: int, character: int, kind: Any) -> int:
    result = await client.text_document_completion_async(
        types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=character),
            context=types.CompletionContext(trigger_kind=kind, trigger_character="("),
        )
    )
    assert isinstance(result, types.CompletionList)
    return len(result.items)


async def test_manual_answers_only_what_the_user_asks_for(workspace: Path) -> None:
    async with session(workspace, {"k": K, "maxNewTokens": 4, "trigger": "manual"}) as client:
        uri = open_doc(client, workspace / "area.py", TEXT)
        assert await automatic(client, uri, 1, 4) == []
        assert await popup(client, uri, 4, 11, types.CompletionTriggerKind.TriggerCharacter) == 0
        assert len(await inline(client, uri, types.Position(line=1, character=4))) == K
        assert await popup(client, uri, 4, 11, types.CompletionTriggerKind.Invoked) == K
        counters = (await command(client, "superposed.stats"))["counters"]
        assert counters["not triggered: manual trigger"] == 2
        assert counters["model_calls"] == 2  # the refused requests never reached the engine


async def test_mid_line_and_prefix_rules_apply_to_automatic_requests(workspace: Path) -> None:
    options = {"k": K, "maxNewTokens": 4, "midLine": "end-only", "minPrefixChars": 3}
    async with session(workspace, options) as client:
        uri = open_doc(client, workspace / "area.py", TEXT)
        assert await automatic(client, uri, 4, 11) == []  # "2))" right of the cursor: text
        assert len(await automatic(client, uri, 4, 12)) == K  # "))" only: what auto-pairs leave
        assert len(await inline(client, uri, types.Position(line=4, character=2))) == K  # asked
        short = open_doc(client, workspace / "short.py", "def area(side):\n    re")
        assert await automatic(client, short, 1, 6) == []  # "re": under 3 characters
        longer = open_doc(client, workspace / "longer.py", "def area(side):\n    return ")
        assert len(await automatic(client, longer, 1, 11)) == K
        counters = (await command(client, "superposed.stats"))["counters"]
        assert counters["not triggered: mid-line"] == 1
        assert counters["not triggered: short prefix"] == 1

    async with session(workspace, {"k": K, "maxNewTokens": 4, "midLine": "never"}) as client:
        uri = open_doc(client, workspace / "area.py", TEXT)
        assert await automatic(client, uri, 4, 12) == []  # "))" is still text right of it
        assert len(await automatic(client, uri, 4, 14)) == K  # the line's end


async def test_a_resting_cursor_warms_the_cache_where_it_rests(workspace: Path) -> None:
    """A long file opened: the warm-up prefills at its end; the cursor then rests in the
    middle, and the request there finds its prompt in the cache."""
    options = {"k": K, "maxNewTokens": 4}
    async with session(workspace, options) as client:
        uri = open_doc(client, workspace / "long.py", LONG)
        await wait_for_counter(client, "warmups_done", 1)  # the document's end
        line = LONG.count("\n") // 2
        rest = {"textDocument": {"uri": uri}, "position": {"line": line, "character": 0}}
        client.protocol.notify("superposed/cursorRest", rest)
        await wait_for_counter(client, "warmups_done", 2)
        assert len(await inline(client, uri, types.Position(line=line, character=0))) == K
        prompt = (await command(client, "superposed.stats"))["lastPrompt"]
        assert prompt["tokens"] - prompt["reused"] < 16
        client.protocol.notify("superposed/cursorRest", {"position": {"line": 1}})  # ignored
        assert (await command(client, "superposed.stats"))["ready"]


async def test_drafts_extend_the_completion_item_selected_in_the_suggest_widget(
    workspace: Path,
) -> None:
    """VS Code sends selectedCompletionInfo while its suggest widget is open: each draft then
    replaces the item's range and starts with its text, continuing from it."""
    text = "def shout(word):\n    return word.up"
    async with session(workspace, {"k": K, "maxNewTokens": 4}) as client:
        uri = open_doc(client, workspace / "shout.py", text)
        item_range = types.Range(
            start=types.Position(line=1, character=16), end=types.Position(line=1, character=18)
        )
        result = await client.text_document_inline_completion_async(
            types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line=1, character=18),
                context=types.InlineCompletionContext(
                    trigger_kind=types.InlineCompletionTriggerKind.Automatic,
                    selected_completion_info=types.SelectedCompletionInfo(
                        range=item_range, text="upper"
                    ),
                ),
            )
        )
        assert isinstance(result, types.InlineCompletionList) and len(result.items) == K
        for item in result.items:
            assert str(item.insert_text).startswith("upper") and item.range == item_range
            argument = item.command.arguments[0] if item.command and item.command.arguments else {}
            assert argument["context"] == "    return word.upper"  # what the user store learns
        stats = await command(client, "superposed.stats")
        assert stats["counters"]["after_selected_item"] == 1
