"""The next-edits service in-process: a change that pauses is pushed, an edit elsewhere
ends the change at once, and a failure after a change is logged while the server goes on;
a burst of changes is computed once, not once a change, and a request never waits behind
it; a document over maxFileBytes is never parsed; next edits turned on mid-session follow
the documents open; a name half typed waits for the longer pause (issues 51 and 52)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from lsprotocol import types
from pygls.uris import from_fs_path
from pygls.workspace import Workspace

from lsp_server.next_edits import service as service_module
from lsp_server.next_edits import tokens
from lsp_server.next_edits.service import NEXT_EDITS_READY, NextEditService
from lsp_server.settings import NextEditSettings, Settings, StoreSettings

URI = "file:///ws/a.py"
SOURCE = "def get_user():\n    pass\n\nget_user()\nget_user()\n"
WAIT_S = 30.0  # the longest wait for an event (a loaded machine is slow, never this slow)


@pytest.fixture(autouse=True)
def short_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The typist's pauses (1 s after a name's character) shortened: what these tests need of
    a pause is that it ends a change; the tests about which pause ends it set their own."""
    monkeypatch.setattr(service_module, "PAUSE_S", 0.02)
    monkeypatch.setattr(service_module, "NAME_PAUSE_S", 0.05, raising=False)


def _service(
    sent: list[tuple[str, dict[str, Any]]],
    settings: NextEditSettings | None = None,
    max_bytes: int = 1_000_000,
    root: Path | None = None,
    uri: str = URI,
) -> tuple[NextEditService, Workspace]:
    """The service over a workspace where ``uri`` holds SOURCE; ``root``: the workspace
    folder (without one, an edit's document lends its text to no other)."""
    workspace = Workspace(from_fs_path(str(root)) if root is not None else None)
    workspace.put_text_document(
        types.TextDocumentItem(uri=uri, language_id="python", version=1, text=SOURCE)
    )
    # off by default (bench/results/next_edits.json)
    chosen = settings if settings is not None else NextEditSettings(on=True)
    stores = StoreSettings(max_file_bytes=max_bytes)
    server = SimpleNamespace(
        settings=Settings(next_edits=chosen, stores=stores), workspace=workspace
    )
    service = NextEditService(
        server, lambda method, params: sent.append((method, params)), Counter()
    )
    service.opened(workspace.get_text_document(uri))
    return service, workspace


def _type(
    workspace: Workspace, version: int, line: int, start: int, end: int, text: str, uri: str = URI
) -> Any:
    span = types.Range(types.Position(line, start), types.Position(line, end))
    workspace.update_text_document(
        types.VersionedTextDocumentIdentifier(version=version, uri=uri),
        types.TextDocumentContentChangePartial(range=span, text=text),
    )
    return workspace.get_text_document(uri)


async def _until(condition: Any, what: str) -> None:
    """Wait until ``condition()`` holds (at most WAIT_S)."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {WAIT_S} s for {what}")
        await asyncio.sleep(0.01)


async def _settled(sent: list[Any], count: int) -> None:
    await _until(lambda: len(sent) >= count, f"{count} notifications (got {len(sent)})")


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
    monkeypatch.setattr(service_module, "NAME_PAUSE_S", 30.0, raising=False)
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
        failed = lambda: any("next edits failed" in r.message for r in caplog.records)  # noqa: E731
        await _until(failed, "the failure's log")
    assert any("next edits failed" in r.message for r in caplog.records)
    service.changed(_type(workspace, 3, 0, 4, 9, "load"))
    await _settled(sent, 1)
    assert sent[0][1]["edits"][0]["newText"] == "load_user"


async def test_a_burst_of_changes_computes_the_newest_not_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Typing at two places in turn ends a change at each keystroke: each was computed in
    full, in order (349 in 10 s took 32 s to drain, issue 51 item 5). While one is
    computed, those that end replace each other: the newest alone is computed after it."""
    monkeypatch.setattr(service_module, "PAUSE_S", 30.0)  # only jumps end changes here
    monkeypatch.setattr(service_module, "NAME_PAUSE_S", 30.0, raising=False)
    sent: list[tuple[str, dict[str, Any]]] = []
    service, workspace = _service(sent)
    original, gate, computed = service.edits.ended, threading.Event(), list[int]()

    def slow(change: Any, language: str) -> Any:
        computed.append(change.version)
        gate.wait(WAIT_S)  # the first computation lasts until the burst is over
        return original(change, language)

    monkeypatch.setattr(service.edits, "ended", slow)
    try:
        version = 1
        for n in range(40):  # "pass" and the last call grow by a letter, in turn
            version += 1
            line, column = (1, 8 + n // 2) if n % 2 == 0 else (4, 8 + n // 2)
            service.changed(_type(workspace, version, line, column, column, "x"))
            if n == 1:
                await _until(lambda: computed, "the first computation")
            await asyncio.sleep(0)
    finally:
        gate.set()
    newest = version - 1  # the last change that a jump ended
    await _until(lambda: newest in computed, "the newest change's computation")
    assert computed == [2, newest]


async def test_a_burst_computes_nothing_until_it_settles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Changes that each compute fast still came one computation each: a burst is changes
    that end less than SETTLE_S apart, and only its newest is computed, once it settles."""
    monkeypatch.setattr(service_module, "PAUSE_S", 30.0)
    monkeypatch.setattr(service_module, "NAME_PAUSE_S", 30.0, raising=False)
    monkeypatch.setattr(service_module, "SETTLE_S", 2.0, raising=False)  # far over a loop turn
    sent: list[tuple[str, dict[str, Any]]] = []
    service, workspace = _service(sent)
    original, computed = service.edits.ended, list[int]()

    def counted(change: Any, language: str) -> Any:
        computed.append(change.version)
        return original(change, language)

    monkeypatch.setattr(service.edits, "ended", counted)
    version = 1
    for n in range(20):
        version += 1
        line, column = (1, 8 + n // 2) if n % 2 == 0 else (4, 8 + n // 2)
        service.changed(_type(workspace, version, line, column, column, "x"))
        if n == 1:  # the first change ended (a jump), alone: computed at once
            await _until(lambda: computed, "the first change's computation")
        await asyncio.sleep(0.01)  # the computations of the others would run meanwhile
    assert computed == [2]
    await _until(lambda: len(computed) == 2, "the burst's newest computation")
    assert computed == [2, version - 1]


async def test_a_request_never_waits_behind_an_ended_changes_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """superposed/nextEdits was queued on the thread that computes ended changes: behind a
    backlog of them, the request waited for all."""
    sent: list[tuple[str, dict[str, Any]]] = []
    service, workspace = _service(sent)
    original, gate, started = service.edits.ended, threading.Event(), threading.Event()

    def stuck(change: Any, language: str) -> Any:
        started.set()
        gate.wait(2 * WAIT_S)
        return original(change, language)

    monkeypatch.setattr(service.edits, "ended", stuck)
    try:
        service.changed(_type(workspace, 2, 0, 4, 7, "fetch"))
        service.changed(_type(workspace, 3, 1, 8, 8, "  # done"))  # a jump ends the rename
        await _until(started.is_set, "the ended change's computation")
        document = workspace.get_text_document(URI)
        answer = await asyncio.wait_for(service.request(document, 0), WAIT_S)
        assert answer == {"edits": []}  # the rename's pattern is not derived yet
    finally:
        gate.set()


async def test_a_document_over_max_file_bytes_is_neither_followed_nor_parsed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every open document holding the edit's text was parsed whatever its size (7.5 MB of
    documents: +716 MB resident, issue 51 item 5)."""
    parsed: list[str] = []
    original = tokens.Prose._parse

    def spy(self: tokens.Prose) -> Any:
        parsed.append(self.text)
        return original(self)

    monkeypatch.setattr(tokens.Prose, "_parse", spy)
    sent: list[tuple[str, dict[str, Any]]] = []
    uri, big_uri = (from_fs_path(str(tmp_path / name)) or "" for name in ("a.py", "big.py"))
    service, workspace = _service(sent, max_bytes=1_000, root=tmp_path, uri=uri)
    small_uri, small = from_fs_path(str(tmp_path / "small.py")) or "", "get_user()\n"
    big = "get_user()\n" * 200  # 2,200 bytes
    for other, text in ((big_uri, big), (small_uri, small)):
        workspace.put_text_document(
            types.TextDocumentItem(uri=other, language_id="python", version=1, text=text)
        )
        service.opened(workspace.get_text_document(other))
    service.changed(_type(workspace, 2, 200, 0, 0, "get_user()\n", big_uri))  # not followed
    service.changed(_type(workspace, 2, 0, 4, 7, "fetch", uri))
    await _settled(sent, 1)
    edits = sent[0][1]["edits"]
    assert [(e["textDocument"]["uri"], e["range"]["start"]["line"]) for e in edits] == [
        (uri, 3),
        (uri, 4),
        (small_uri, 0),  # an open document within the limit: proposed there
    ]
    assert not any(text.count("get_user()") > 100 for text in parsed)
    assert service.edits.log.held() == 2  # the two small ones' texts alone
    for closed in (uri, small_uri, big_uri):
        service.closed(closed)


async def test_next_edits_turned_on_follow_a_document_edited_while_they_were_off() -> None:
    """Issue 52 item 5: the log kept the document's text from its opening; edited while
    off, every change after on spanned those edits ("spans lines"): never a proposal."""
    sent: list[tuple[str, dict[str, Any]]] = []
    settings = NextEditSettings(on=False)
    service, workspace = _service(sent, settings)
    service.changed(_type(workspace, 2, 5, 0, 0, "get_user()\n"))  # typed while off
    settings.on = True
    service.reconfigure()
    service.changed(_type(workspace, 3, 0, 4, 7, "fetch"))
    await _settled(sent, 1)
    assert [e["range"]["start"]["line"] for e in sent[0][1]["edits"]] == [3, 4, 5]
    settings.on = False
    service.reconfigure()  # off: nothing is followed, nothing kept
    assert service.edits.log.held() == 0 and service.edits.patterns() == []


async def test_a_half_typed_name_waits_for_the_longer_pause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 52 item 10: a pause mid-rename proposed "rename words -> tok". A change whose
    last keystroke left the caret right after a name's character ends after NAME_PAUSE_S
    (or at a jump), not PAUSE_S: the user may be typing the name still."""
    monkeypatch.setattr(service_module, "PAUSE_S", 0.0)
    monkeypatch.setattr(service_module, "NAME_PAUSE_S", 30.0, raising=False)
    sent: list[tuple[str, dict[str, Any]]] = []
    service, workspace = _service(sent)
    service.changed(_type(workspace, 2, 0, 4, 7, "fet"))  # "get" typed over, half way
    for _ in range(5):  # PAUSE_S (0 s) would have ended it at the first of these turns
        await asyncio.sleep(0.01)
    assert service.edits.patterns() == [] and sent == []
    service.changed(_type(workspace, 3, 0, 7, 7, "ch"))
    service.changed(_type(workspace, 4, 1, 8, 8, " "))  # a jump: the rename ended
    await _settled(sent, 1)
    assert [p.label for p in service.edits.patterns()] == ["rename get_user -> fetch_user"]
    assert sent[0][1]["edits"][0]["newText"] == "fetch_user"


async def test_an_accepted_proposal_ends_its_change_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An accepted proposal is a whole edit: its change ends when the editor says it
    accepted it, not a pause later (after a name, NAME_PAUSE_S: the next proposals came a
    second after the accept, and VS Code's list met the older ones)."""
    monkeypatch.setattr(service_module, "PAUSE_S", 300.0)  # no pause ends anything here
    monkeypatch.setattr(service_module, "NAME_PAUSE_S", 300.0, raising=False)
    sent: list[tuple[str, dict[str, Any]]] = []
    service, workspace = _service(sent)
    service.changed(_type(workspace, 2, 0, 4, 7, "fetch"))
    service.changed(_type(workspace, 3, 1, 8, 8, "  # done"))  # a jump ends the rename
    await _settled(sent, 1)
    first = sent[0][1]["edits"][0]
    start, end = first["range"]["start"], first["range"]["end"]
    applied = _type(workspace, 4, start["line"], start["character"], end["character"], "fetch_user")
    service.changed(applied)  # the editor applies it, then says so
    assert service.accepted(({"id": first["id"]},)) == {"accepted": True}
    await _settled(sent, 2)
    assert sent[1][1]["textDocument"]["version"] == 4
    assert [e["range"]["start"]["line"] for e in sent[1][1]["edits"]] == [4]
    assert service.accepted(({"id": "no-such-id"},)) == {"accepted": False}
