"""What is never learned reaches no other document either (issue 34, item 1): open documents
that a save would not learn feed only their own drafts (lsp_server/stores/shareable_documents.py),
and drafts
shown before a forget are not typed along after it (MatchIndexes.erasures, ahead.DraftsAhead)."""

from __future__ import annotations

import asyncio
from collections import Counter
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pygls.uris import from_fs_path

from lsp_server.completion.cleanup import Suggestion
from lsp_server.completion.cursor import CursorContext
from lsp_server.runtime.ahead import DraftsAhead
from lsp_server.stores import shareable_documents as shareable_module
from lsp_server.stores.match_indexes import MatchIndexes
from lsp_server.stores.shareable_documents import Shareable
from ngram_db import ByteTokenizer, NgramStore

BYTES = ByteTokenizer()
LINE = "DB_HOST = frobnicate_database_host_seven(region=4)\n"
MAX_BYTES = 1_000


def ids(text: str) -> Any:
    return BYTES.encode_batch([text])[0]


def uri(path: Path) -> str:
    return from_fs_path(str(path)) or ""


def test_open_documents_a_save_would_not_learn_feed_only_their_own_drafts(
    tmp_path: Path, ws: Path
) -> None:
    (ws / ".gitignore").write_text("scratch.py\n")
    here = uri(ws / "here.py")
    kept = uri(ws / "kept.py")
    never = {
        uri(ws / ".env"): LINE,  # secret by name
        uri(ws / "scratch.py"): LINE,  # git-ignored
        uri(tmp_path / "elsewhere.py"): LINE,  # outside the workspace
        uri(ws / "conf.py"): LINE + 'key = "AKIA' + 'QWERTYUIOPASDFGH"\n',  # a secret in it
        uri(ws / "big.py"): LINE + "value = 12345\n" * 100,  # over maxFileBytes
        "untitled:Untitled-1": LINE,  # no file: never saved, never learned
    }
    shared = partial(Shareable().others, roots=[ws], max_bytes=MAX_BYTES)
    context = ids("DB_HOST = frobnicate_database")
    for other, text in never.items():
        documents = {here: "x = 1\n", other: text}
        assert MatchIndexes(BYTES).source(here, 6, documents).match(context) is not None  # today's
        assert MatchIndexes(BYTES).source(here, 6, documents, shared=shared).match(context) is None
        # its own drafts still read it (its text before the cursor's line)
        own = text + "y = 2\n"
        indexes = MatchIndexes(BYTES)
        found = indexes.source(other, len(own), {other: own}, shared=shared).match(context)
        assert found is not None and found.length >= len(context)
    documents = {here: "x = 1\n", kept: LINE}  # a file a save would learn: shared
    assert MatchIndexes(BYTES).source(here, 6, documents, shared=shared).match(context) is not None


def test_the_open_documents_verdicts_follow_edits_and_closes(ws: Path) -> None:
    shareable = Shareable()
    doc = uri(ws / "conf.py")
    assert shareable.others({doc: "x = 1\n"}, [ws], MAX_BYTES) == {doc: "x = 1\n"}
    secret = 'key = "AKIA' + 'QWERTYUIOPASDFGH"\n'
    assert shareable.others({doc: secret}, [ws], MAX_BYTES) == {}  # the edit is judged
    assert shareable.others({}, [ws], MAX_BYTES) == {}
    assert not shareable._places and not shareable._texts  # closed: nothing kept of it


def test_the_erasure_stamp_moves_with_a_forget_not_with_a_save() -> None:
    store = NgramStore.open(":memory:", BYTES)
    memory = MatchIndexes(BYTES)
    store.update_file("/ws/a.py", "alpha = 1\n")
    first = memory.stores.erasures([store])
    store.update_file("/ws/b.py", "beta = 2\n")  # a new file
    store.update_file("/ws/a.py", "alpha = 3\n")  # a file saved again
    store.update_file("accepted:1", "gamma")
    assert memory.stores.erasures([store]) == first
    store.update_file("accepted:2", "delta")  # an accept beyond the limit: the oldest goes
    store.prune("accepted:", 1)
    assert memory.stores.erasures([store]) == first
    store.forget("/ws/a.py")  # the editor's forget or index-repo --forget: the same commit
    after_forget = memory.stores.erasures([store])
    assert after_forget != first
    store.remove_file("/ws/b.py")  # a file that stopped qualifying at its save
    assert memory.stores.erasures([store]) != after_forget
    stamp = memory.stores.erasures([store])
    store.clear()  # the user store cleared: only accepted drafts were left
    assert memory.stores.erasures([store]) != stamp


def test_drafts_shown_before_an_erasure_are_not_typed_along() -> None:
    counters: Counter[str] = Counter()
    drafts = DraftsAhead(SimpleNamespace(), counters, lambda *a: None)  # type: ignore[arg-type]
    shown = CursorContext("def f():\n    return", "")
    typed = CursorContext(shown.before + " wid", "")

    async def ask(context: CursorContext, erased: object) -> list[Suggestion] | None:
        return await drafts.without_model("doc", context, erased)

    drafts.remember("doc", shown.before, [Suggestion(" widget.transmogrify()", 1.0)])
    along = asyncio.run(ask(typed, (1, 0)))
    assert along is not None and along[0].text == "get.transmogrify()"
    assert asyncio.run(ask(typed, (1, 0))) is not None  # nothing erased: still typed along
    assert asyncio.run(ask(typed, (1, 1))) is None  # erased since: the request decodes
    assert counters["typed_along"] == 2 and counters["dropped_after_forget"] == 1


def test_where_a_document_lies_is_judged_again_in_the_background(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A .gitignore edited while the document is open: the old verdict serves until the new
    one, judged off the request's thread, is in."""
    monkeypatch.setattr(shareable_module, "PLACE_TTL_S", 0.0)
    shareable = Shareable()
    doc = {uri(ws / "scratch.py"): "x = 1\n"}
    assert shareable.others(doc, [ws], MAX_BYTES) == doc
    (ws / ".gitignore").write_text("scratch.py\n")
    assert shareable.others(doc, [ws], MAX_BYTES) == doc  # judged again meanwhile
    shareable._judge.submit(lambda: None).result()  # the background judgement is done
    assert shareable.others(doc, [ws], MAX_BYTES) == {}
