"""End to end over stdio with the user's own model (issue 56): a GGUF file by its path and an
Ollama model by its name (an Ollama models folder faked in tmp_path), each converted once by
the server's child process, with progress, then loaded on the fast runner and answering; a
damaged file leaves the server on the default model, saying why once.

The models are tiny random ones written by bench/gguf_models.py: their drafts are noise, so
``wellFormed`` is off (it would drop word salad whole), and a test checks that the model
decoded, not what it drafted. Each test has a cache of its own:
the conversions land there, not in the user's.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from superposed.embedded import SMOLLM2, cache_dir
from tests.e2e.lsp_harness import (
    STATUSES,
    K,
    command,
    end_of,
    inline,
    open_doc,
    session,
    wait_for_counter,
    wait_until_ready,
)
from tests.gguf_harness import fake_ollama, truncated_copy, write_tiny

pytestmark = pytest.mark.slow  # every test starts the server over stdio and converts a model

OPTIONS = {"k": K, "maxNewTokens": 6, "compile": "off", "userStore": False, "wellFormed": False}
LOAD_S = 300.0  # a conversion's child imports torch and transformers: minutes on a busy machine


def own_cache(tmp_path: Path) -> dict[str, str]:
    """The server's environment: a cache of its own (the default model linked in, for the
    fallback) and the real model rather than the tiny one."""
    models = tmp_path / "own-cache" / "models"
    models.mkdir(parents=True)
    (models / SMOLLM2.folder).symlink_to(cache_dir() / "models" / SMOLLM2.folder)
    return {"SUPERPOSED_CACHE_DIR": str(tmp_path / "own-cache"), "SUPERPOSED_TEST_TINY_MODEL": "0"}


def progress_messages(client: LanguageClient) -> list[str]:
    """Every $/progress message the server sent (begin, report, end)."""
    reports = [r for values in client.progress_reports.values() for r in values]
    return [str(getattr(r, "message", "") or "") for r in reports]


async def ready(client: LanguageClient) -> dict[str, Any]:
    return await wait_until_ready(client, timeout=LOAD_S)


async def answers(client: LanguageClient, root: Path) -> None:
    """Ask for drafts at the end of a new document, and check that the model decoded them
    (its calls counted): the drafts themselves may all be dropped, as a random model's word
    salad with broken UTF-8 is."""
    calls = (await command(client, "superposed.stats"))["counters"].get("model_calls", 0)
    text = "def main():\n    return read_"
    drafts = await inline(client, open_doc(client, root / "main.py", text), end_of(text))
    stats = await command(client, "superposed.stats")
    assert stats["counters"]["model_calls"] > calls and stats["error"] is None
    assert isinstance(drafts, list)


async def test_a_gguf_file_converts_once_with_progress_then_answers(
    workspace: Path, tmp_path: Path
) -> None:
    gguf = write_tiny(tmp_path / "models", "qwen2")
    env = own_cache(tmp_path)
    options = OPTIONS | {"model": str(gguf)}
    async with session(workspace, options, wait_ready=False, **env) as client:
        stats = await ready(client)
        assert stats["model"] == str(gguf)
        await answers(client, workspace)
        messages = progress_messages(client)
        assert any(m.startswith(f"converting {gguf}:") and "tensors" in m for m in messages)
        assert any("parameters, about" in m for m in messages), messages  # the size, said
        loading = [s for s in STATUSES[id(client)] if s["state"] == "loading" and s.get("percent")]
        assert loading and all(0 < s["percent"] < 100 for s in loading)
    (converted,) = (tmp_path / "own-cache" / "models" / "gguf").iterdir()
    async with session(workspace, options, wait_ready=False, **env) as client:
        await ready(client)  # the second start finds the conversion
        assert not any(m.startswith("converting") for m in progress_messages(client))
        await answers(client, workspace)
    assert list((tmp_path / "own-cache" / "models" / "gguf").iterdir()) == [converted]


async def test_an_ollama_model_by_name_answers(workspace: Path, tmp_path: Path) -> None:
    gguf = write_tiny(tmp_path / "models", "llama")
    fake_ollama(tmp_path / "ollama", gguf, "tiny-coder", "1b")
    env = own_cache(tmp_path) | {"OLLAMA_MODELS": str(tmp_path / "ollama")}
    options = OPTIONS | {"model": "ollama:tiny-coder:1b"}
    async with session(workspace, options, wait_ready=False, **env) as client:
        stats = await ready(client)
        assert stats["model"] == "ollama:tiny-coder:1b"
        await answers(client, workspace)
        stats = await command(client, "superposed.stats")
        assert stats["error"] is None


@pytest.mark.model  # the default model loads in its place
async def test_a_damaged_file_leaves_the_server_on_the_default_model(
    workspace: Path, tmp_path: Path
) -> None:
    whole = write_tiny(tmp_path / "models", "qwen2")
    damaged = truncated_copy(whole, tmp_path / "models" / "qwen2.5-coder-1.5b.gguf")
    options = OPTIONS | {"model": str(damaged)}
    async with session(workspace, options, wait_ready=False, **own_cache(tmp_path)) as client:
        stats = await ready(client)
        assert stats["model"] == SMOLLM2.name and stats["error"] is None
        said = [m.message for m in client.messages if str(damaged) in m.message]  # type: ignore[attr-defined]
        assert len(said) == 1, said
        assert "truncated" in said[0] and "download it again" in said[0]
        assert said[0].endswith(f"The default model {SMOLLM2.name} runs instead.")
        await answers(client, workspace)


async def switch_to(client: LanguageClient, options: dict[str, Any], model: str) -> None:
    """Set ``model`` (didChangeConfiguration) and wait until the server runs it."""
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"superposed": options | {"model": model}})
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LOAD_S
    while loop.time() < deadline:
        stats = await command(client, "superposed.stats")
        if stats["ready"] and stats["model"] == model:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"{model} did not load in time")


async def saved(client: LanguageClient, root: Path, name: str, count: int) -> None:
    text = f"def {name}(request):\n    return {name}_handler(request)\n"
    (root / f"{name}.py").write_text(text)
    uri = open_doc(client, root / f"{name}.py", text)
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    await wait_for_counter(client, "saves_indexed", count)


async def test_switching_models_keeps_each_models_stores(workspace: Path, tmp_path: Path) -> None:
    """Issue 56 item 5: a save learned under one model is there when the server comes back
    to it after another model (each tokenizer has its store); no store is left unused."""
    first = str(write_tiny(tmp_path / "models", "qwen2"))
    second = str(write_tiny(tmp_path / "models", "llama"))
    options = OPTIONS | {"model": first, "userStore": True}
    async with session(workspace, options, wait_ready=False, **own_cache(tmp_path)) as client:
        await ready(client)
        await saved(client, workspace, "first", 1)
        await switch_to(client, options, second)
        await saved(client, workspace, "second", 2)
        stats = await command(client, "superposed.stats")
        assert stats["stores"]["user"]["files"] == 1  # the second model's own: "second.py"
        await switch_to(client, options, first)
        stats = await command(client, "superposed.stats")
        user, (codebase,) = stats["stores"]["user"], stats["stores"]["codebase"].values()
        assert user["files"] == 1 and codebase["files"] == 1  # "first.py", kept
        assert [m.message for m in client.messages if "store" in m.message] == []
