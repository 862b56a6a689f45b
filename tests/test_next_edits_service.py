"""The next-edits service in-process: a change that pauses is pushed, an edit elsewhere
ends the change at once, and a failure after a change is logged while the server goes on."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

import pytest
from lsprotocol import types
from pygls.workspace import Workspace

from lsp_server.next_edits import service as service_module
from lsp_server.next_edits.service import NEXT_EDITS_READY, NextEditService
from lsp_server.settings import NextEditSettings

URI = "file:///ws/a.py"
SOURCE = "def get_user():\n    pass\n\nget_user()\nget_user()\n"


def _service(sent: list[tuple[str, dict[str, Any]]]) -> tuple[NextEditService, Workspace]:
    workspace = Workspace(None)
    workspace.put_text_document(
        types.TextDocumentItem(uri=URI, language_id="python", version=1, text=SOURCE)
    )
    service = NextEditService(
        lambda: workspace,
        lambda: NextEditSettings(on=True),  # off by default (bench/results/next_edits.json)
        lambda: 1_000_000,
        lambda: [],
        lambda method, params: sent.append((method, params)),
        Counter(),
    )
    service.opened(workspace.get_text_document(URI))
    return service, workspace


def _type(workspace: Workspace, version: int, line: int, start: int, end: int, text: str) -> Any:
    span = types.Range(types.Position(line, start), types.Position(line, end))
    workspace.update_text_document(
        types.VersionedTextDocumentIdentifier(version=version, uri=URI),
        types.TextDocumentContentChangePartial(range=span, text=text),
    )
    return workspace.get_text_document(URI)


async def _settled(sent: list[Any], count: int) -> None:
    for _ in range(200):
        if len(sent) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{len(sent)} notifications, not {count}")


async def test_a_pause_pushes_the_proposals() -> None:
    sent: list[tuple[str, dict[str, Any]]] = []
    service, workspace = _service(sent)
    service.changed(_type(workspace, 2, 0, 4, 7, "fetch"))
    await _settled(sent, 1)
    method, params = sent[0]
    assert method == NEXT_EDITS_READY
    assert params["textDocument"] == {"uri": URI, "version": 2}
    assert [e["range"]["start"]["line"] for e in params["edits"]] == [3, 4]
    assert service.last_ms is not None


async def test_an_edit_elsewhere_ends_the_change_before_the_pause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(service_module, "PAUSE_S", 30.0)  # no pause ends anything here
    sent: list[tuple[str, dict[str, Any]]] = []
    service, workspace = _service(sent)
    service.changed(_type(workspace, 2, 0, 4, 7, "fetch"))
    service.changed(_type(workspace, 3, 1, 4, 8, "return"))  # another line: a jump
    await _settled(sent, 1)
    assert sent[0][1]["textDocument"]["version"] == 2
    service.closed(URI)  # its pause timer goes with it


async def test_a_failure_after_a_change_is_logged_and_the_next_change_proposes(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    sent: list[tuple[str, dict[str, Any]]] = []
    service, workspace = _service(sent)
    original = service.edits.ended
    calls = 0

    def failing_once(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("a bug")
        return original(*args)

    monkeypatch.setattr(service.edits, "ended", failing_once)
    with caplog.at_level(logging.ERROR, logger=service_module.__name__):
        service.changed(_type(workspace, 2, 0, 4, 7, "fetch"))
        for _ in range(100):
            if any("next edits failed" in r.message for r in caplog.records):
                break
            await asyncio.sleep(0.01)
    assert any("next edits failed" in r.message for r in caplog.records)
    service.changed(_type(workspace, 3, 0, 4, 9, "load"))
    await _settled(sent, 1)
    assert sent[0][1]["edits"][0]["newText"] == "load_user"
