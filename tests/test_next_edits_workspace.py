"""Next edits in the workspace's files (scope ``workspace``): the codebase store's suffix
indexes pick the files that hold a pattern, their text on disk decides, and a file a save
would not learn lends nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsp_server.match_indexes import MatchIndexes
from lsp_server.next_edits.log import EditLog
from lsp_server.next_edits.proposals import Doc, NextEdits
from lsp_server.next_edits.workspace import files_holding, finder
from ngram_db import NgramStore

EDITED = "from app import get_user\n\nget_user(1)\nget_user(2)\n"


def _workspace(tmp_path: Path, tokenizer: Any) -> tuple[Path, NgramStore, MatchIndexes]:
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".git").mkdir()
    store = NgramStore.open(":memory:", tokenizer)
    files = {
        "views.py": "def show(uid):\n    return get_user(uid)\n",
        "other.py": "def get_username():\n    return 'x'\n",  # holds get_user's tokens, no name
        "api.py": "user = api.get_user(3)\n",
    }
    for name, text in files.items():
        (root / name).write_text(text)
        store.update_file(str(root / name), text)
    return root, store, MatchIndexes(tokenizer)


def _encode(tokenizer: Any) -> Any:
    return lambda text: tokenizer.encode(text, add_special_tokens=False)


def test_the_store_finds_the_files_that_hold_a_name(tmp_path: Path, tokenizer: Any) -> None:
    root, store, memory = _workspace(tmp_path, tokenizer)
    held = files_holding(memory.stores.store_segments(store), _encode(tokenizer), "get_user")
    assert {Path(p).name for p in held} >= {"views.py", "api.py"}
    segments = memory.stores.store_segments(store)
    assert files_holding(segments, _encode(tokenizer), "nowhere_at_all") == []


def test_workspace_sites_come_after_the_open_documents(tmp_path: Path, tokenizer: Any) -> None:
    root, store, memory = _workspace(tmp_path, tokenizer)
    edits = NextEdits()
    uri = (root / "main.py").as_uri()
    log = EditLog()
    log.open(uri, EDITED)
    after = EDITED.replace("get_user(1)", "fetch_user(1)")
    log.changed(uri, after, 2)
    change = log.end(uri)
    assert change is not None
    derived = edits.ended(change, "python")
    assert derived.pattern is not None and derived.reason == "rename"
    docs = {uri: Doc(after, 2, "python")}
    files = finder(memory.stores.store_segments(store), _encode(tokenizer), [root], 1_000_000)
    got = edits.propose(uri, 2, docs, "workspace", lambda u, t: True, files)
    assert [(Path(p.site.uri).name, p.site.row, p.site.origin) for p in got] == [
        ("main.py", 3, "file"),  # the nearest to the cursor (row 2) first
        ("main.py", 0, "file"),  # "from app import get_user": a use, renamed as the edit did
        ("views.py", 1, "workspace"),  # not api.get_user (an attribute), not get_username
    ]
    edit = got[2].to_json(len)
    assert edit["textDocument"]["version"] is None and edit["oldText"] == "get_user"
    # scope open: the store is not read
    assert [
        p.site.origin for p in edits.propose(uri, 2, docs, "open", lambda u, t: True, files)
    ] == [
        "file",
        "file",
    ]


def test_a_stored_file_a_save_would_not_learn_lends_nothing(tmp_path: Path, tokenizer: Any) -> None:
    """A file the store holds that is now git-ignored (or holds a key) is not read for sites."""
    root, store, memory = _workspace(tmp_path, tokenizer)
    (root / ".gitignore").write_text("views.py\n")
    files = finder(memory.stores.store_segments(store), _encode(tokenizer), [root], 1_000_000)
    edits = NextEdits()
    log = EditLog()
    uri = (root / "main.py").as_uri()
    log.open(uri, EDITED)
    log.changed(uri, EDITED.replace("get_user(1)", "fetch_user(1)"), 2)
    change = log.end(uri)
    assert change is not None
    edits.ended(change, "python")
    docs = {uri: Doc(change.after, 2, "python")}
    got = edits.propose(uri, 2, docs, "workspace", lambda u, t: True, files)
    assert all(p.site.origin != "workspace" for p in got)
    secret = "AWS_KEY = 'AKIAIOSFODNN7EXAMPLE'\nget_user(9)\n"
    (root / ".gitignore").unlink()
    (root / "views.py").write_text(secret)
    got = edits.propose(uri, 2, docs, "workspace", lambda u, t: True, files)
    assert all(p.site.origin != "workspace" for p in got)
