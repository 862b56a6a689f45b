"""End-to-end: the memory over a real stdio connection (tiny random model).

The tiny model never writes a distinctive line by itself; a draft that is that line comes
from the memory: an open document's text, or a saved (and closed) file's in the store.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types

from tests.e2e.lsp_harness import end_of, inline, open_doc, session, wait_for_counter

pytestmark = pytest.mark.slow  # every test starts the server over stdio

HEAD = "def frobnicate(widget):\n    return"
LINE = " widget.transmogrify(spline_count=42, reticulate=True)"
OPTIONS = {"k": 3, "maxNewTokens": 24, "userStore": False, "memory": True}


async def test_an_open_document_line_becomes_a_draft(workspace: Path) -> None:
    async with session(workspace, OPTIONS) as client:
        open_doc(client, workspace / "a.py", "import os\n\n\n" + HEAD + LINE + "\n")
        prompt = "x = 1\n\n\n" + HEAD
        uri = open_doc(client, workspace / "b.py", prompt)
        assert LINE in await inline(client, uri, end_of(prompt))


async def test_without_memory_the_line_is_not_drafted(workspace: Path) -> None:
    async with session(workspace, {**OPTIONS, "memory": False}) as client:
        open_doc(client, workspace / "a.py", "import os\n\n\n" + HEAD + LINE + "\n")
        prompt = "x = 1\n\n\n" + HEAD
        uri = open_doc(client, workspace / "b.py", prompt)
        assert LINE not in await inline(client, uri, end_of(prompt))


async def test_a_saved_and_closed_file_line_becomes_a_draft(workspace: Path) -> None:
    async with session(workspace, OPTIONS) as client:
        path = workspace / "saved.py"
        text = "import os\n\n\n" + HEAD + LINE + "\n"
        path.write_text(text)
        uri = open_doc(client, path, text)
        client.text_document_did_save(
            types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        await wait_for_counter(client, "saves_indexed", 1)
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        prompt = "x = 1\n\n\n" + HEAD
        drafts: list[str] = []
        for attempt in range(30):  # the store's index is rebuilt in the background
            other = open_doc(client, workspace / f"b{attempt}.py", prompt)
            drafts = await inline(client, other, end_of(prompt))
            if LINE in drafts:
                break
            await asyncio.sleep(0.2)
        assert LINE in drafts


async def test_an_open_copy_of_the_prompt_hides_no_line(workspace: Path) -> None:
    """Another open file that ends where the prompt does (a copy of it) matches the whole
    prompt but continues nothing: the other file's line is still the draft."""
    async with session(workspace, OPTIONS) as client:
        open_doc(client, workspace / "a.py", "import os\n\n\n" + HEAD + LINE + "\n")
        prompt = "x = 1\n\n\n" + HEAD
        open_doc(client, workspace / "copy.py", prompt)
        uri = open_doc(client, workspace / "b.py", prompt)
        assert LINE in await inline(client, uri, end_of(prompt))


async def test_a_draft_at_a_blank_line_continues_it(workspace: Path) -> None:
    """At the indentation of an empty line, no draft starts a new line: not one that the
    memory proposes (a blank line that kept its indentation), nor the line's own file."""
    async with session(workspace, OPTIONS) as client:
        head = "def load(path):\n    value = decode_all(path)\n"
        open_doc(client, workspace / "a.py", head + "    \n    return value\n")
        prompt = "import os\n\n\n" + head + "    "
        uri = open_doc(client, workspace / "b.py", prompt)
        drafts = await inline(client, uri, end_of(prompt))
        assert drafts and not any(d.lstrip(" \t").startswith("\n") for d in drafts), drafts
