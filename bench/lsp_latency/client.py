"""The client every case drives: a language server over stdio, its requests and waits, a case's
summary."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from bench.measure import ROOT, percentile

LONG_SOURCE = Path(argparse.__file__)  # ~2,600 lines of real Python, on every machine


LATER_S = 2.5  # first-request case: seconds between the first request and the next


REST_S = 1.0  # cursor-rest case: how long the cursor rests before the request


SERVER = (sys.executable, "-m", "lsp_server.cli")


COMPILE_WAIT_S = 900  # for the server's compiled decode step (built once, then cached)


CONFIGURE_WAIT_S = 600  # for settings to be applied (and the model reloaded where they ask it)


SHORT = '''"""Small helpers for reading configuration files."""

import json
import os
from pathlib import Path


def config_dir():
    return Path(os.environ.get("APP_CONFIG", "~/.config/app")).expanduser()


def read_config(name):
    path = config_dir() / f"{name}.json"
    with open(path) as handle:
        return json.load(handle)


def write_config(name, data):
    path = config_dir() / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
'''


def capabilities() -> types.ClientCapabilities:
    caps = client_capabilities("neovim@v0.11.0")
    assert caps.text_document is not None
    caps.text_document.inline_completion = types.InlineCompletionClientCapabilities()
    return caps


@contextlib.asynccontextmanager
async def server(
    workspace: Path,
    data_dir: Path,
    options: Mapping[str, Any],
    sources: Path | None = None,
    env: Mapping[str, str] | None = None,
    on_start: Callable[[LanguageClient], object] | None = None,
    command: Sequence[str] = SERVER,
) -> AsyncIterator[LanguageClient]:
    """A language server over stdio for ``workspace`` (its one folder), initialized with
    ``options``, its user data (and user store) under ``data_dir``; shut down on leaving.
    ``sources``: run the server's code from there (an earlier commit's files) instead of this
    checkout; ``env``: more of the server's environment; ``on_start``: called with the client
    before it initializes (handlers in place before any notification); ``command``: another
    server (a test's fake)."""
    server_env = {**os.environ, "SUPERPOSED_DATA_DIR": str(data_dir), **(env or {})}
    if sources is not None:  # and not the working directory, which python -m puts first
        server_env.update(PYTHONPATH=str(sources), PYTHONSAFEPATH="1")
    config = ClientServerConfig(server_command=list(command), server_env=server_env)
    client = await config.start()
    assert isinstance(client, LanguageClient)
    if on_start is not None:
        on_start(client)
    try:
        folder = from_fs_path(str(workspace)) or ""
        await client.initialize_session(
            types.InitializeParams(
                capabilities=capabilities(),
                root_uri=folder,
                workspace_folders=[types.WorkspaceFolder(uri=folder, name=workspace.name)],
                initialization_options=dict(options),
            )
        )
        yield client
        await client.shutdown_session()
    finally:
        process = client._server  # a failed run must not leave the server waiting for exit
        if process is not None and process.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 5)
            if process.returncode is None:
                process.kill()
        await client.stop()


def summary(values: list[float]) -> dict[str, Any]:
    """A case's p50, p95, min and max, with the times themselves (runs pool them)."""
    return {
        "n": len(values),
        "p50_ms": statistics.median(values),
        "p95_ms": percentile(values, 95),
        "min_ms": min(values),
        "max_ms": max(values),
        "values_ms": values,
    }


class Bench:
    def __init__(self, client: LanguageClient, workspace: Path) -> None:
        self.client = client
        self.workspace = workspace
        self.version = 0

    def open(self, name: str, text: str) -> str:
        """didOpen of ``text`` as ``name`` in the workspace (or an absolute path): its URI."""
        uri = from_fs_path(str(self.workspace / name)) or ""
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="python", version=1, text=text
                )
            )
        )
        return uri

    def type_text(self, uri: str, at: types.Position, text: str) -> None:
        self.version += 1
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.version),
                content_changes=[
                    types.TextDocumentContentChangePartial(
                        range=types.Range(start=at, end=at), text=text
                    )
                ],
            )
        )

    async def inline(self, uri: str, at: types.Position) -> tuple[float, list[str]]:
        """An automatic inline request at ``at``: ms to the answer, and its drafts."""
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=at,
            context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Automatic
            ),
        )
        start = time.perf_counter()
        result = await self.client.text_document_inline_completion_async(params)
        elapsed = (time.perf_counter() - start) * 1e3
        items = result.items if isinstance(result, types.InlineCompletionList) else []
        return elapsed, [str(i.insert_text) for i in items]

    async def confidence(self) -> dict[str, Any]:
        """The last model call's confidence and its features (issue 57; the server's stats'
        lastPrompt), as a replay row's ``confidence`` and ``features``; empty from a server
        that does not say them (--server-commit of an older one)."""
        last = (await self.stats()).get("lastPrompt") or {}
        return {key: last[key] for key in ("confidence", "features") if key in last}

    async def stats(self) -> dict[str, Any]:
        stats = await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="superposed.stats", arguments=[])
        )
        assert isinstance(stats, dict), stats
        if "memoryMb" in stats:  # a --before server from before the field's rename (ac43693)
            stats["residentMb"] = stats.pop("memoryMb")
        return stats

    async def walk(self, name: str, text: str, lines: list[int]) -> dict[str, list[float]]:
        """Ask at the end of each line (a new prompt each time), then type along once."""
        model_ms: list[float] = []
        along_ms: list[float] = []
        drafts_per_request: list[float] = []
        rows = text.split("\n")
        for n, line in enumerate(lines):
            # Each cursor gets its own document, as the text up to it: the end of the line.
            body = "\n".join(rows[: line + 1])
            uri = self.open(f"{name}-{n}.py", body)
            at = types.Position(line=line, character=len(rows[line]))
            elapsed, drafts = await self.inline(uri, at)
            model_ms.append(elapsed)
            drafts_per_request.append(len(drafts))
            if drafts and drafts[0]:
                typed = drafts[0][: min(3, len(drafts[0]) - 1)] or drafts[0][:1]
                self.type_text(uri, at, typed)
                after = types.Position(line=line, character=at.character + len(typed))
                elapsed, _ = await self.inline(uri, after)
                along_ms.append(elapsed)
        return {"model": model_ms, "along": along_ms, "drafts": drafts_per_request}

    async def type_line(
        self, name: str, text: str, line: int, chunk: int = 4
    ) -> list[tuple[float, dict[str, float]]]:
        """Type line ``line`` of ``text`` a few characters at a time, asking after each chunk.

        Returns, for each answer that needed a model call (the others came from typed-along
        drafts; each call's prompt extends the previous one), the time from request to
        response and the server's own timing of that call by phase (``lastTimingMs``).
        """
        rows = text.split("\n")
        body = "\n".join(rows[:line]) + "\n"
        uri = self.open(f"{name}.py", body)
        target = rows[line]
        at = types.Position(line=line, character=0)
        calls: list[tuple[float, dict[str, float]]] = []
        for start in range(0, len(target), chunk):
            piece = target[start : start + chunk]
            self.type_text(uri, at, piece)
            at = types.Position(line=line, character=at.character + len(piece))
            before = (await self.stats())["counters"].get("model_calls", 0)
            elapsed, _ = await self.inline(uri, at)
            after = await self.stats()
            if after["counters"].get("model_calls", 0) > before:
                calls.append((elapsed, after["lastTimingMs"]))
        return calls

    async def first_request(self, name: str, text: str, line: int) -> dict[str, Any]:
        """Open ``text`` under a new name, ask at the end of ``line`` at once, then again later."""
        rows = text.split("\n")
        uri = self.open(f"{name}.py", text)
        at = types.Position(line=line, character=len(rows[line]))
        first_ms, _ = await self.inline(uri, at)
        first = (await self.stats())["lastPrompt"]
        await asyncio.sleep(LATER_S)
        # The cursor moves to the end of the line above: a new prompt (typing on would often
        # continue a draft shown, answered without the model), most of it cached once warm.
        calls = (await self.stats())["counters"].get("model_calls", 0)
        above = types.Position(line=line - 1, character=len(rows[line - 1]))
        later_ms, _ = await self.inline(uri, above)
        stats = await self.stats()
        return {
            "first_ms": first_ms,
            "first_prompt": first,
            "later_model_call": stats["counters"].get("model_calls", 0) > calls,
            "later_ms": later_ms,
            "later_prompt": stats["lastPrompt"],
            "later_timing": stats["lastTimingMs"],
        }

    async def after_rest(self, name: str, text: str, line: int) -> dict[str, Any]:
        """Open ``text`` under a new name; the cursor rests at the end of ``line`` for REST_S,
        the server told so (``superposed/cursorRest``, as the plugins send it); then a request
        there."""
        rows = text.split("\n")
        uri = self.open(f"{name}.py", text)
        at = types.Position(line=line, character=len(rows[line]))
        rest = {"textDocument": {"uri": uri}, "position": {"line": line, "character": at.character}}
        self.client.protocol.notify("superposed/cursorRest", rest)
        await asyncio.sleep(REST_S)
        elapsed, _ = await self.inline(uri, at)
        prompt = (await self.stats())["lastPrompt"]
        self.close(uri)
        return {"ms": elapsed, "line": line, "prompt": prompt}

    def close(self, uri: str) -> None:
        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    async def configure(self, settings: dict[str, Any]) -> None:
        """Apply settings and wait until the server reports them (and the model is ready)."""
        self.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"superposed": settings})
        )
        deadline = time.monotonic() + CONFIGURE_WAIT_S
        while True:
            stats = await self.stats()
            now = stats["settings"]
            differ = {k: now.get(k) for k, v in settings.items() if now.get(k) != v}
            if stats["ready"] and not differ:
                return
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"the server did not take the settings {differ} (it has these values): "
                    "check the names and values against lsp_server/settings.py"
                )
            await asyncio.sleep(0.2)

    async def wait_ready(self) -> None:
        """Wait until the server has loaded its model."""
        while not (await self.stats())["ready"]:
            await asyncio.sleep(0.2)

    async def wait_compiled(self, timeout_s: float) -> str:
        """Wait until the server's compiled decode step is ready (or off, or failed)."""
        deadline = time.monotonic() + timeout_s
        while True:
            state = str((await self.stats())["compiledStep"])
            if state != "building" or time.monotonic() > deadline:
                return state
            await asyncio.sleep(1.0)


def sources_at(ref: str, directory: Path) -> Path:
    """The repository's files at git ``ref``, extracted into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive, check=True)
    return directory
