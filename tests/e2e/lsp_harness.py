"""What the end-to-end tests of the server share: a stdio session with pytest-lsp's client on
the tiny random model (``SUPERPOSED_TEST_TINY_MODEL=1``), stores under the test's tmp folder,
and the requests the tests send."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from superposed.embedded import cache_dir

K = 3
INITIALIZED: dict[int, types.InitializeResult] = {}  # id(client) -> the server's answer
STATUSES: dict[int, list[dict[str, Any]]] = {}  # id(client) -> its superposed/status payloads
SHUT_DOWN: set[int] = set()  # id(client) of sessions whose test sent shutdown already
SAMPLE = '''import os
import re


def read_config(path):
    """Read the configuration file."""
    with open(path) as handle:
        return handle.read()


def main():
    config = read_config(os.environ["CONFIG"])
    print(config)
'''


def capabilities() -> types.ClientCapabilities:
    """Neovim 0.11's capabilities plus inline completion (pytest-lsp's snapshot lacks it)."""
    caps = client_capabilities("neovim@v0.11.0")
    assert caps.text_document is not None
    caps.text_document.inline_completion = types.InlineCompletionClientCapabilities()
    return caps


def server_env(tmp: Path, **extra: str) -> dict[str, str]:
    """Stores under ``tmp`` (never the user's), the converted model shared through a link."""
    cache = tmp / "cache"
    models = cache / "models"
    if not models.exists():
        cache.mkdir(parents=True)
        models.symlink_to(cache_dir() / "models", target_is_directory=True)
    env = dict(os.environ)
    env.update(
        SUPERPOSED_TEST_TINY_MODEL="1",
        SUPERPOSED_CACHE_DIR=str(cache),
        SUPERPOSED_DATA_DIR=str(tmp / "data"),
    )
    env.update(extra)
    return env


@asynccontextmanager
async def session(
    workspace: Path,
    options: dict[str, Any] | None = None,
    wait_ready: bool = True,
    load_delay_s: float = 0.0,
    step_delay_s: float = 0.0,
    **env: str,
) -> AsyncIterator[LanguageClient]:
    """A server session; a load or step delay runs it through tests/e2e/hooked_server.py.

    ``answerWithinMs`` is 0 unless ``options`` set it: a test's drafts and counters must not
    depend on how fast the machine decodes (tests/e2e/test_lsp_deadline.py sets it)."""
    options = {"answerWithinMs": 0, **(options or {})}
    entry = ["-m", "lsp_server.cli"]
    if load_delay_s or step_delay_s:
        hooks = ["--load-delay", str(load_delay_s), "--step-delay", str(step_delay_s)]
        entry = [str(Path(__file__).with_name("hooked_server.py")), *hooks, "--"]
    config = ClientServerConfig(
        server_command=[
            sys.executable,
            *entry,
            *("-v", "--log-file", str(workspace.parent / "server.log")),
        ],
        server_env=server_env(workspace.parent, **env),
    )
    client = await config.start()
    assert isinstance(client, LanguageClient)
    statuses = STATUSES.setdefault(id(client), [])

    @client.feature("superposed/status")
    def on_status(params: Any) -> None:
        statuses.append(params._asdict())  # pygls reads unknown params as a namedtuple

    try:
        result = await client.initialize_session(
            types.InitializeParams(
                capabilities=capabilities(),
                root_uri=from_fs_path(str(workspace)),
                workspace_folders=[
                    types.WorkspaceFolder(uri=from_fs_path(str(workspace)) or "", name="ws")
                ],
                initialization_options=options,
            )
        )
        INITIALIZED[id(client)] = result
        if wait_ready:
            await wait_until_ready(client)
        yield client
        if id(client) in SHUT_DOWN:  # the test sent shutdown itself (shut_down)
            client.exit(None)
        else:
            await client.shutdown_session()
    finally:
        server = client._server  # a failed test must not leave the server waiting for exit
        if server is not None and server.returncode is None:
            try:
                await asyncio.wait_for(server.wait(), 5)
            except TimeoutError:
                server.kill()
        await client.stop()


async def shut_down(client: LanguageClient) -> None:
    """Send ``shutdown`` and wait for its answer; the session then sends only ``exit``."""
    await client.shutdown_async(None)
    SHUT_DOWN.add(id(client))


async def command(client: LanguageClient, name: str, *args: Any) -> Any:
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=name, arguments=list(args))
    )


async def wait_until_ready(client: LanguageClient, timeout: float = 120.0) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        stats = await command(client, "superposed.stats")
        if stats["ready"]:
            return stats
        assert stats["error"] is None, stats["error"]
        await asyncio.sleep(0.2)
    raise AssertionError("the model did not load in time")


def open_doc(client: LanguageClient, path: Path, text: str, version: int = 1) -> str:
    uri = from_fs_path(str(path)) or ""
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=version, text=text
            )
        )
    )
    return uri


def end_of(text: str) -> types.Position:
    """The position after ``text``, in UTF-8 bytes: the harness's client (Neovim 0.11's
    capabilities) offers utf-8 first, and pygls takes it. Counted in characters, a draft
    typed along that held a U+FFFD (the tiny model's drafts can) put the cursor 2 short."""
    lines = text.split("\n")
    width = len(lines[-1].encode("utf-8", "surrogatepass"))
    return types.Position(line=len(lines) - 1, character=width)


def type_at(client: LanguageClient, uri: str, text: str, typed: str, version: int = 2) -> None:
    """A didChange: ``typed`` typed at the end of the document's ``text``."""
    at = end_of(text)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(start=at, end=at), text=typed
                )
            ],
        )
    )


async def inline_items(
    client: LanguageClient,
    uri: str,
    pos: types.Position,
    kind: types.InlineCompletionTriggerKind = types.InlineCompletionTriggerKind.Invoked,
) -> list[types.InlineCompletionItem]:
    result = await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=pos,
            context=types.InlineCompletionContext(trigger_kind=kind),
        )
    )
    assert isinstance(result, types.InlineCompletionList)
    return list(result.items)


async def inline(client: LanguageClient, uri: str, pos: types.Position) -> list[str]:
    return [str(item.insert_text) for item in await inline_items(client, uri, pos)]


async def plain(client: LanguageClient, uri: str, pos: types.Position) -> types.CompletionList:
    result = await client.text_document_completion_async(
        types.CompletionParams(text_document=types.TextDocumentIdentifier(uri=uri), position=pos)
    )
    assert isinstance(result, types.CompletionList)
    return result


async def wait_for_counter(
    client: LanguageClient, name: str, value: int, timeout_s: float = 10.0
) -> dict[str, Any]:
    """The server's stats once counter ``name`` reaches ``value`` (store writes are async),
    asked every 0.1 s for ``timeout_s`` at most."""
    for _ in range(round(timeout_s / 0.1)):
        stats = await command(client, "superposed.stats")
        if stats["counters"].get(name, 0) >= value:
            return stats
        await asyncio.sleep(0.1)
    raise AssertionError(f"counter {name} never reached {value}: {stats['counters']}")
