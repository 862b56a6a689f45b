"""End-to-end with the real default model (marked ``model``): what the drafts say.

One server session over stdio (the model loads once): token healing at the cursor (after
indentation, mid-name) gives k useful drafts, and a saved file's idioms show up in later
drafts because the codebase store learned them. The session first waits for the compiled
decode step (built by a child process the first time on a machine, one to three minutes;
then loaded from the cache), so all of this runs through it.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.e2e.lsp_harness import K, command, end_of, inline, open_doc, session, wait_for_counter

pytestmark = pytest.mark.model

COMPILE_TIMEOUT_S = 900


async def wait_compiled(client: LanguageClient) -> str:
    deadline = time.monotonic() + COMPILE_TIMEOUT_S
    while True:
        state = str((await command(client, "superposed.stats"))["compiledStep"])
        if state != "building" or time.monotonic() > deadline:
            return state
        await asyncio.sleep(1.0)


TAUGHT = "".join(
    f"def handle_{n}(request):\n    return zorblax_frobnicate(request, {n})\n\n\n"
    for n in range(30)
)


async def test_real_model_drafts_heal_and_learn(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".git").mkdir()
    options = {"k": K, "userStore": False, "compile": "background"}
    async with session(root, options, SUPERPOSED_TEST_TINY_MODEL="0") as client:
        assert (await command(client, "superposed.stats"))["model"] == "smollm2-135m"
        assert await wait_compiled(client) == "ready"

        # After the indentation of an empty line: k non-empty, distinct drafts.
        text = "def main():\n    x = 1\n    "
        drafts = await inline(client, open_doc(client, root / "a.py", text), end_of(text))
        assert len(drafts) == K and len(set(drafts)) == K
        assert all(d.strip() and not d.startswith((" ", "\n")) for d in drafts)

        # In the middle of a name: the drafts complete it (no space, no repeated "pa").
        text = "import os\nos.pa"
        drafts = await inline(client, open_doc(client, root / "b.py", text), end_of(text))
        assert drafts and all(d[0].isalnum() or d[0] == "_" for d in drafts)
        assert any(d.startswith("th") for d in drafts), drafts

        # A save teaches the codebase store the file's idiom: later drafts follow it.
        prompt = "def handle_99(request):\n    return zorblax_"
        before = await inline(client, open_doc(client, root / "c.py", prompt), end_of(prompt))
        assert not any("request, " in d for d in before), before
        uri = open_doc(client, root / "handlers.py", TAUGHT)
        (root / "handlers.py").write_text(TAUGHT)
        client.text_document_did_save(
            types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        await wait_for_counter(client, "saves_indexed", 1)
        after = await inline(client, open_doc(client, root / "d.py", prompt), end_of(prompt))
        assert any("request, " in d for d in after), after
        # Every model call above stepped through the compiled decode step.
        stats = await command(client, "superposed.stats")
        assert stats["compiledCalls"] >= stats["counters"]["model_calls"] * 2
