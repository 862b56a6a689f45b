"""End-to-end: next edits through a real server over stdio (issue 35's protocol).

A rename typed in one place is proposed at the other places, pushed with
``superposed/nextEditsReady`` once the change ends and served by ``superposed/nextEdits``;
an accepted edit (applied as the editor would, then ``superposed.nextEditAccepted``) leaves
the others, a dismissed one (``superposed.nextEditDismissed``) is not proposed again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.e2e.lsp_harness import command, open_doc, session

pytestmark = pytest.mark.slow  # starts the server as a process

SOURCE = """def get_user(uid):
    return uid


first = get_user(1)
second = get_user(2)
"""
WAIT_S = 20.0


def _plain(value: Any) -> Any:
    """pygls reads unknown messages' objects as namedtuples: as dicts and lists again."""
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _edit(
    client: LanguageClient, uri: str, version: int, line: int, start: int, end: int, text: str
) -> None:
    change = types.TextDocumentContentChangePartial(
        range=types.Range(types.Position(line, start), types.Position(line, end)), text=text
    )
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[change],
        )
    )


async def _pushed(ready: asyncio.Queue[dict[str, Any]], version: int) -> dict[str, Any]:
    """The first superposed/nextEditsReady for ``version`` of the document."""
    while (pushed := await asyncio.wait_for(ready.get(), WAIT_S))["textDocument"][
        "version"
    ] != version:
        pass
    return pushed


async def _ask(client: LanguageClient, uri: str, line: int) -> list[dict[str, Any]]:
    params = {"textDocument": {"uri": uri}, "position": {"line": line, "character": 0}}
    result = await client.protocol.send_request_async("superposed/nextEdits", params)
    return list(_plain(result)["edits"])


async def test_a_rename_is_proposed_pushed_accepted_and_dismissed(workspace: Path) -> None:
    async with session(workspace, {"nextEdits": True}, wait_ready=False) as client:
        ready: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        @client.feature("superposed/nextEditsReady")
        def on_ready(params: Any) -> None:
            ready.put_nowait(_plain(params))

        uri = open_doc(client, workspace / "users.py", SOURCE)
        # The user types the rename at the definition, key by key: "get" -> "fetch".
        _edit(client, uri, 2, 0, 4, 7, "")
        for i, char in enumerate("fetch"):
            _edit(client, uri, 3 + i, 0, 4 + i, 4 + i, char)
        # (a busy server may see a pause mid-word and push for "fe" first: the change goes on)
        pushed = await _pushed(ready, 7)
        assert pushed["textDocument"] == {"uri": uri, "version": 7}
        edits = pushed["edits"]
        assert [(e["range"]["start"]["line"], e["oldText"], e["newText"]) for e in edits] == [
            (4, "get_user", "fetch_user"),
            (5, "get_user", "fetch_user"),
        ]
        first = edits[0]
        assert first["range"] == {
            "start": {"line": 4, "character": 8},
            "end": {"line": 4, "character": 16},
        }
        assert first["origin"] == "file"
        assert first["label"] == "rename get_user -> fetch_user"
        assert first["textDocument"] == {"uri": uri, "version": 7}

        # The request answers the same, the nearest to the cursor first.
        asked = await _ask(client, uri, 5)
        assert [e["range"]["start"]["line"] for e in asked] == [5, 4]
        assert await _ask(client, "file:///nowhere/else.py", 0) == []

        # Accept the first: the editor applies it, then says so.
        _edit(client, uri, 8, 4, 8, 16, "fetch_user")
        accepted = await command(client, "superposed.nextEditAccepted", {"id": first["id"]})
        assert accepted == {"accepted": True}
        after_accept = await _pushed(ready, 8)
        left = after_accept["edits"]
        assert [(e["range"]["start"]["line"], e["newText"]) for e in left] == [(5, "fetch_user")]

        # Dismiss the last: never proposed again, and an unknown id is no error.
        dismissed = await command(client, "superposed.nextEditDismissed", {"id": left[0]["id"]})
        assert dismissed == {"dismissed": True}
        assert await _ask(client, uri, 5) == []
        unknown = await command(client, "superposed.nextEditDismissed", {"id": "no-such-id"})
        assert unknown == {"dismissed": False}
        stats = await command(client, "superposed.stats")
        assert stats["nextEdits"]["accepts"] == {"rename": 1}
        assert stats["nextEdits"]["dismissals"] == {"rename": 1}
        assert stats["nextEdits"]["lastMs"] is not None


async def test_next_edits_off_answers_nothing(workspace: Path) -> None:
    async with session(workspace, {"nextEdits": False}, wait_ready=False) as client:
        uri = open_doc(client, workspace / "users.py", SOURCE)
        _edit(client, uri, 2, 0, 4, 7, "fetch")
        await asyncio.sleep(1.0)  # past the pause that would end the change
        assert await _ask(client, uri, 0) == []


async def test_next_edits_turned_on_mid_session_propose_in_a_document_edited_before(
    workspace: Path,
) -> None:
    """Issue 52 item 5: turned on after the document was edited, next edits kept its text
    from its opening; every change after spanned the edit made while off ("spans lines"),
    and nothing was ever proposed there until the file was opened again."""
    async with session(workspace, {"nextEdits": False}, wait_ready=False) as client:
        ready: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        @client.feature("superposed/nextEditsReady")
        def on_ready(params: Any) -> None:
            ready.put_nowait(_plain(params))

        uri = open_doc(client, workspace / "users.py", SOURCE)
        _edit(client, uri, 2, 6, 0, 0, "third = get_user(3)\n")  # typed while off
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"superposed": {"nextEdits": True}})
        )
        while not (await command(client, "superposed.stats"))["settings"]["nextEdits"]:
            await asyncio.sleep(0.1)
        _edit(client, uri, 3, 0, 4, 7, "")
        for i, char in enumerate("fetch"):
            _edit(client, uri, 4 + i, 0, 4 + i, 4 + i, char)
        pushed = await _pushed(ready, 8)
        assert [(e["range"]["start"]["line"], e["newText"]) for e in pushed["edits"]] == [
            (4, "fetch_user"),
            (5, "fetch_user"),
            (6, "fetch_user"),
        ]
