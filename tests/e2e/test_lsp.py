"""End-to-end: the server over a real stdio connection, driven by pytest-lsp's client.

The server runs the tiny random model (``SUPERPOSED_TEST_TINY_MODEL=1``): its drafts are
meaningless text, but every path (prompt, healing, decoding, n-gram re-scoring, stores,
cancellation) runs for real. Stores live under the test's tmp_path.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled
from pygls.uris import from_fs_path

from tests.e2e.lsp_harness import (
    INITIALIZED,
    SAMPLE,
    STATUSES,
    K,
    command,
    end_of,
    inline,
    inline_items,
    open_doc,
    plain,
    session,
    type_at,
    wait_for_counter,
    wait_until_ready,
)

pytestmark = pytest.mark.slow  # every test starts the server over stdio


async def test_capabilities_and_k_drafts(workspace: Path) -> None:
    """Inline completion is advertised; both requests return k distinct drafts in order."""
    async with session(workspace, {"k": K, "maxNewTokens": 6}) as client:
        caps = INITIALIZED[id(client)].capabilities
        assert caps.inline_completion_provider is not None
        assert caps.completion_provider is not None
        assert caps.execute_command_provider is not None
        assert {"superposed.indexWorkspace", "superposed.stats", "superposed.accept"} <= set(
            caps.execute_command_provider.commands
        )

        text = SAMPLE + "\ndef helper():\n    "
        uri = open_doc(client, workspace / "app.py", text)
        drafts = await inline(client, uri, end_of(text))
        assert len(drafts) == K
        assert len(set(drafts)) == K and all(d.strip() for d in drafts)

        listing = await plain(client, uri, end_of(text))
        items = listing.items
        assert len(items) == K
        assert [i.sort_text for i in items] == sorted(i.sort_text or "" for i in items)
        for item in items:
            assert isinstance(item.text_edit, types.TextEdit)
            assert item.text_edit.range.start == end_of(text)
            assert item.command is not None and item.command.command == "superposed.accept"
            assert item.detail and "score" in item.detail
        # Snippets (the client supports them) that insert the draft literally, and the second
        # request at the same place is served from the drafts just shown.
        assert all(i.insert_text_format == types.InsertTextFormat.Snippet for i in items)
        edits = [i.text_edit.new_text for i in items]  # type: ignore[union-attr]
        assert [re.sub(r"\\(.)", r"\1", e) for e in edits] == drafts


async def test_typing_along_answers_without_model(workspace: Path) -> None:
    async with session(workspace, {"k": K, "maxNewTokens": 6}) as client:
        text = SAMPLE + "\ndef helper():\n    "
        uri = open_doc(client, workspace / "app.py", text)
        drafts = await inline(client, uri, end_of(text))
        calls = (await command(client, "superposed.stats"))["counters"]["model_calls"]
        first = drafts[0]
        typed = first[: max(1, len(first) // 2)]
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[
                    types.TextDocumentContentChangePartial(
                        range=types.Range(start=end_of(text), end=end_of(text)), text=typed
                    )
                ],
            )
        )
        along = await inline(client, uri, end_of(text + typed))
        assert along and along[0] == first[len(typed) :]
        full = await command(client, "superposed.stats")
        stats = full["counters"]
        assert stats["model_calls"] == calls  # no model call
        assert stats["typed_along"] >= 1
        # The last model call's timing, by phase; the tiny model's runner is never compiled.
        assert {"prefill", "steps", "total"} <= set(full["lastTimingMs"])
        assert full["compiledStep"] == "off"
        memory = full["residentMb"]  # the server's own resident memory, now and at its peak
        assert 0 < memory["rss"] <= memory["peak"]


async def test_save_teaches_the_codebase_store(workspace: Path) -> None:
    """A save of a file changes what later completions offer: the store learned the file.

    The tiny model's drafts are deterministic, so a change after the save comes from the
    n-gram re-scoring of what was saved (the real-model variant checks the content).
    """
    # memory off: it would match the open documents' text (tests/e2e/test_lsp_memory.py)
    options = {"k": K, "maxNewTokens": 8, "userStore": False, "memory": False}
    async with session(workspace, options) as client:
        prompt = "def frobnicate_quixotic_widget(value):\n    return "
        uri = open_doc(client, workspace / "app.py", prompt)
        before = await inline(client, uri, end_of(prompt))
        assert len(before) == K
        # Same prompt, another document (no typed-along cache): the same drafts.
        assert (
            await inline(client, open_doc(client, workspace / "b.py", prompt), end_of(prompt))
            == before
        )
        # A file that continues the prompt with the last draft, many times over.
        path = workspace / "learned.py"
        taught = (prompt + before[-1] + "\n\n") * 20
        path.write_text(taught)
        learned_uri = open_doc(client, path, taught)
        client.text_document_did_save(
            types.DidSaveTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=learned_uri)
            )
        )
        stats = await wait_for_counter(client, "saves_indexed", 1)
        (codebase,) = stats["stores"]["codebase"].values()
        assert codebase["files"] == 1 and codebase["tokens"] > 100
        after = await inline(client, open_doc(client, workspace / "c.py", prompt), end_of(prompt))
        assert len(after) == K
        assert after != before


async def test_supersession_and_cancel_request(workspace: Path) -> None:
    """A newer request stops the older one; $/cancelRequest stops decoding too."""
    options = {"k": K, "maxNewTokens": 40}
    async with session(workspace, options, step_delay_s=0.05) as client:
        text = SAMPLE + "\n\ndef helper():\n    "
        uri = open_doc(client, workspace / "app.py", text)
        pos = end_of(text)
        older = asyncio.ensure_future(inline(client, uri, pos))
        await asyncio.sleep(0.5)  # the older request is decoding now
        type_at(client, uri, text, "x = ")
        newer = await inline(client, uri, end_of(text + "x = "))
        assert await older == []  # superseded: never answered with stale drafts
        assert len(newer) == K
        counters = (await command(client, "superposed.stats"))["counters"]
        assert counters["superseded"] >= 1 and counters["cancelled"] >= 1

        # $/cancelRequest: the client cancels; the server stops the decoding.
        other = open_doc(client, workspace / "b.py", text)
        pending = asyncio.ensure_future(
            client.protocol.send_request_async(
                types.TEXT_DOCUMENT_INLINE_COMPLETION,
                types.InlineCompletionParams(
                    text_document=types.TextDocumentIdentifier(uri=other),
                    position=pos,
                    context=types.InlineCompletionContext(
                        trigger_kind=types.InlineCompletionTriggerKind.Automatic
                    ),
                ),
                msg_id="to-cancel",
            )
        )
        await asyncio.sleep(0.5)  # decoding has started
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="to-cancel"))
        with pytest.raises(JsonRpcRequestCancelled):
            await pending
        after = await wait_for_counter(client, "cancelled", counters["cancelled"] + 1)
        assert after["counters"]["model_calls"] == counters["model_calls"] + 1


async def test_a_request_at_the_place_of_one_in_flight_is_answered_from_it(
    workspace: Path,
) -> None:
    """Show Drafts (an asked-for completion request) is decoding when the editor's automatic
    inline request comes for the same cursor: both get the drafts of the one decode. The
    newer request superseded the older, and Show Drafts was answered empty."""
    options = {"k": K, "maxNewTokens": 40, "answerWithinMs": 0}
    async with session(workspace, options, step_delay_s=0.05) as client:
        text = SAMPLE + "\n\ndef helper():\n    return "
        uri = open_doc(client, workspace / "app.py", text)
        pos = end_of(text)
        asked = asyncio.ensure_future(plain(client, uri, pos))
        await wait_for_counter(client, "model_calls", 1)  # Show Drafts' decode is running
        automatic = await inline_items(
            client, uri, pos, types.InlineCompletionTriggerKind.Automatic
        )
        shown = await asked
        assert len(automatic) == K and len(shown.items) == K
        counters = (await command(client, "superposed.stats"))["counters"]
        assert counters["joined"] == 1 and counters["model_calls"] == 1
        assert counters.get("superseded", 0) == 0


async def test_invalid_settings_are_reported_and_defaults_used(workspace: Path) -> None:
    # knnWeight: a setting retired in issue 53, named and ignored (it stops nothing)
    options = {"superposed": {"k": "many", "method": "telepathy", "alpha": 0.5, "knnWeight": 0.1}}
    async with session(workspace, options) as client:
        messages = [m.message for m in client.messages]
        assert any("superposed.k" in m and "'many'" in m for m in messages), messages
        assert any("superposed.method" in m and "telepathy" in m for m in messages), messages
        assert any("superposed.knnWeight is retired" in m for m in messages), messages
        stats = await command(client, "superposed.stats")
        assert stats["settings"]["k"] == 3 and stats["settings"]["method"] == "superposed"
        assert stats["settings"]["alpha"] == 0.5  # the valid value is kept
        text = "def f():\n    "
        uri = open_doc(client, workspace / "app.py", text)
        assert len(await inline(client, uri, end_of(text))) == 3  # still serving

        # didChangeConfiguration: a valid change applies, an invalid one is reported.
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"superposed": {"k": 2, "lineMode": 7}})
        )
        for _ in range(50):
            stats = await command(client, "superposed.stats")
            if stats["settings"]["k"] == 2:
                break
            await asyncio.sleep(0.1)
        assert stats["settings"]["k"] == 2
        assert any("superposed.lineMode" in m.message for m in client.messages)
        uri2 = open_doc(client, workspace / "b.py", "import os\n")
        assert len(await inline(client, uri2, types.Position(line=1, character=0))) == 2

        # A notification without settings: the server pulls workspace/configuration.
        client.set_configuration({"k": 4}, section="superposed")
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        for _ in range(50):
            stats = await command(client, "superposed.stats")
            if stats["settings"]["k"] == 4:
                break
            await asyncio.sleep(0.1)
        assert stats["settings"]["k"] == 4


async def test_unknown_uri_huge_file_and_non_utf8(workspace: Path) -> None:
    async with session(workspace, {"k": K, "maxNewTokens": 4}) as client:
        # A document the client never opened: an empty answer, not an error.
        ghost = from_fs_path(str(workspace / "never_opened.py")) or ""
        assert await inline(client, ghost, types.Position(line=0, character=0)) == []
        origin = types.Position(line=0, character=0)
        assert len((await plain(client, "untitled:Untitled-1", origin)).items) == 0

        # A huge file (about 5 MB): the prompt is bounded, the answer still comes.
        huge = SAMPLE * 20_000 + "\ndef tail():\n    "
        uri = open_doc(client, workspace / "huge.py", huge)
        assert len(await inline(client, uri, end_of(huge))) == K

        # A Latin-1 file, as an editor shows it, and text with a lone surrogate.
        latin = "# caf\xe9 na\xefve\nprint('\xe9t\xe9')\n"
        path = workspace / "latin1.py"
        path.write_bytes(latin.encode("latin-1"))
        uri = open_doc(client, path, latin + "x = ")
        assert len(await inline(client, uri, end_of(latin + "x = "))) == K
        odd = "s = 'bad \udcff byte'\ny = "
        uri = open_doc(client, workspace / "odd.py", odd)
        assert len(await inline(client, uri, end_of(odd))) == K
        client.text_document_did_save(
            types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        await wait_for_counter(client, "saves_indexed", 1)


async def test_request_before_model_ready(workspace: Path) -> None:
    async with session(workspace, {"k": K}, wait_ready=False, load_delay_s=3) as client:
        text = "def f():\n    "
        uri = open_doc(client, workspace / "app.py", text)
        # An inline request made while loading waits for the model and is answered once it
        # is in, with no other request (issue 52: it was answered empty, and no ghost text
        # came until the user typed again); a completion popup is answered empty at once.
        held = asyncio.create_task(inline(client, uri, end_of(text)))
        assert len((await plain(client, uri, end_of(text))).items) == 0
        stats = await command(client, "superposed.stats")
        assert stats["ready"] is False and stats["counters"]["held_while_loading"] == 1
        assert len(await held) == K
        await wait_until_ready(client)
        assert len(await inline(client, uri, end_of(text))) == K
        # The load reported $/progress from begin to end.
        kinds = [type(p).__name__ for reports in client.progress_reports.values() for p in reports]
        assert kinds[0] == "WorkDoneProgressBegin" and kinds[-1] == "WorkDoneProgressEnd"
        # ... and its state with superposed/status: loading, then ready, naming the model.
        states = [(s["state"], s["model"]) for s in STATUSES[id(client)]]
        assert states == [("loading", "smollm2-135m"), ("ready", "tiny-random")]


async def test_a_model_that_cannot_load_is_an_error_status(workspace: Path) -> None:
    """superposed/status says error, with the message, when the model does not load."""
    missing = str(workspace.parent / "no-such-model")
    async with session(
        workspace, {"model": missing}, wait_ready=False, SUPERPOSED_TEST_TINY_MODEL="0"
    ) as client:
        for _ in range(300):
            if STATUSES[id(client)][-1:] and STATUSES[id(client)][-1]["state"] == "error":
                break
            await asyncio.sleep(0.1)
        (*_, last) = STATUSES[id(client)]
        assert last["state"] == "error" and last["model"] == missing
        assert last["message"] == (await command(client, "superposed.stats"))["error"]


async def test_index_workspace_with_progress_and_accept(workspace: Path) -> None:
    """indexWorkspace fills the codebase store with $/progress; accept teaches the user store."""
    (workspace / "util.py").write_text("def helper(value):\n    return value * 2\n" * 5)
    async with session(workspace, {"k": K, "maxNewTokens": 4}) as client:
        result = await command(client, "superposed.indexWorkspace")
        (summary,) = result["indexed"]
        assert summary["indexed"] == 2  # app.py and util.py
        assert summary["tokens"] > 50
        reports = [p for values in client.progress_reports.values() for p in values]
        kinds = [type(p).__name__ for p in reports]
        assert "WorkDoneProgressReport" in kinds and kinds[-1] == "WorkDoneProgressEnd"
        # superposed/status: indexing with a rising percentage, then ready again.
        statuses = STATUSES[id(client)]
        indexing = [s for s in statuses if s["state"] == "indexing"]
        assert [s["percent"] for s in indexing] == sorted(s["percent"] for s in indexing)
        assert indexing[0]["percent"] == 0 and indexing[-1]["percent"] == 100
        assert statuses[-1]["state"] == "ready"
        stats = await command(client, "superposed.stats")
        (codebase,) = stats["stores"]["codebase"].values()
        assert codebase["files"] == 2
        # Indexing again reads only what changed: nothing.
        again = (await command(client, "superposed.indexWorkspace"))["indexed"][0]
        assert again["indexed"] == 0 and again["unchanged"] == 2

        # Accepting a draft runs the item's command: the user store learns the text at once.
        text = "def f():\n    "
        uri = open_doc(client, workspace / "new.py", text)
        listing = await plain(client, uri, end_of(text))
        accept = listing.items[0].command
        assert accept is not None and accept.arguments
        users_before = stats["stores"]["user"]["tokens"]
        assert await command(client, accept.command, *accept.arguments) == {"learned": True}
        user = (await command(client, "superposed.stats"))["stores"]["user"]
        assert user["files"] == 1 and user["tokens"] > users_before


async def test_workspace_folders_get_their_own_stores(workspace: Path) -> None:
    """A folder added at run time gets its own codebase store; saves land in the right one."""
    other = workspace.parent / "other"
    other.mkdir()
    async with session(workspace, {"k": K, "maxNewTokens": 4, "userStore": False}) as client:
        client.workspace_did_change_workspace_folders(
            types.DidChangeWorkspaceFoldersParams(
                event=types.WorkspaceFoldersChangeEvent(
                    added=[types.WorkspaceFolder(uri=from_fs_path(str(other)) or "", name="o")],
                    removed=[],
                )
            )
        )
        for n, folder in enumerate([workspace, other, other], 1):
            path = folder / f"saved_{n}.py"
            path.write_text(f"def saved_{n}():\n    return {n}\n")
            uri = open_doc(client, path, path.read_text())
            client.text_document_did_save(
                types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
            )
            stats = await wait_for_counter(client, "saves_indexed", n)
        files = {Path(root).name: s["files"] for root, s in stats["stores"]["codebase"].items()}
        assert files == {"ws": 1, "other": 2}


async def test_percent_encoded_paths_get_completions(tmp_path: Path) -> None:
    """A folder named with a space, a + and a non-ASCII letter: clients percent-encode its URI."""
    root = tmp_path / "my project+ü"
    root.mkdir()
    (root / ".git").mkdir()
    async with session(root, {"k": K, "maxNewTokens": 6, "userStore": False}) as client:
        text = SAMPLE + "\ndef helper():\n    "
        uri = open_doc(client, root / "app.py", text)
        assert "my%20project%2B%C3%BC" in uri  # as VS Code and Neovim send it
        assert len(await inline(client, uri, end_of(text))) == K
        assert len((await plain(client, uri, end_of(text))).items) == K
        client.text_document_did_save(
            types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        stats = await wait_for_counter(client, "saves_indexed", 1)
        assert {Path(r).name: s["files"] for r, s in stats["stores"]["codebase"].items()} == {
            "my project+ü": 1
        }
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        assert await inline(client, uri, end_of(text)) == []  # closed: nothing to complete


async def test_settings_change_clears_the_typing_along_cache(workspace: Path) -> None:
    """Drafts shown under k=3 are not served again at the same cursor once k is 5."""
    async with session(workspace, {"k": 3, "maxNewTokens": 6}) as client:
        text = SAMPLE + "\ndef helper():\n    "
        uri = open_doc(client, workspace / "app.py", text)
        assert len(await inline(client, uri, end_of(text))) == 3
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"superposed": {"k": 5}})
        )
        for _ in range(50):
            if (await command(client, "superposed.stats"))["settings"]["k"] == 5:
                break
            await asyncio.sleep(0.1)
        assert len(await inline(client, uri, end_of(text))) == 5


async def test_completion_trigger_characters(workspace: Path) -> None:
    """Clients that complete as you type (Neovim 0.11's autotrigger) ask at these characters."""
    async with session(workspace, wait_ready=False) as client:
        provider = INITIALIZED[id(client)].capabilities.completion_provider
        assert provider is not None and provider.trigger_characters is not None
        assert {" ", ".", "("} <= set(provider.trigger_characters)
