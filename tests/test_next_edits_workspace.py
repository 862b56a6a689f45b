"""Next edits in the workspace's files (scope ``workspace``): the codebase store's suffix
indexes pick the files that hold a pattern, their text on disk decides, and a file a save
would not learn lends nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from lsp_server.next_edits import workspace as workspace_module
from lsp_server.next_edits.log import EditLog
from lsp_server.next_edits.proposals import Doc, NextEdits
from lsp_server.next_edits.workspace import files_holding, finder
from lsp_server.stores.match_indexes import MatchIndexes
from ngram_db import NgramStore

# get_user defined in none of the open documents: a use renamed there is a rename (where a
# ``def`` or an import in the document defines it, the use switched to another function)
EDITED = "user = get_user(0)\n\nget_user(1)\nget_user(2)\n"


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
        ("main.py", 0, "file"),  # "user = get_user(0)": a use, renamed as the edit did
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


# ----- a stored file the repository replaced since (issue 51, item 4) -----------------------

# Run in a child process: on a FIFO the read blocks for ever, on /dev/zero it grows without
# end (capped here at 512 MB more address space), on /dev/stdin it reads the process's input,
# which for the server is the language-server stream.
CHILD = textwrap.dedent(
    """
    import json, os, resource, sys
    from pathlib import Path
    from lsp_server.stores.match_indexes import MatchIndexes
    from lsp_server.next_edits.log import EditLog
    from lsp_server.next_edits.proposals import NextEdits
    from lsp_server.next_edits.workspace import finder
    from ngram_db import ByteTokenizer, NgramStore

    ws, target = Path(sys.argv[1]), sys.argv[2]
    BYTES = ByteTokenizer()
    stored = ws / "views.py"
    store = NgramStore.open(":memory:", BYTES)
    store.update_file(str(stored), stored.read_text())
    segments = MatchIndexes(BYTES).stores.store_segments(store)
    stored.unlink()  # what a pulled commit can do: the stored file is now ...
    if target == "fifo":
        os.mkfifo(stored)  # ... a FIFO
    else:
        stored.symlink_to(target)  # ... a link
    edits, log, uri = NextEdits(), EditLog(), (ws / "main.py").as_uri()
    log.open(uri, "get_user(1)\\n")
    log.changed(uri, "fetch_user(1)\\n", 2)
    pattern = edits.ended(log.end(uri), "python").pattern
    vm = int(next(l for l in open("/proc/self/status") if l.startswith("VmSize")).split()[1])
    resource.setrlimit(resource.RLIMIT_AS, ((vm << 10) + (512 << 20), resource.RLIM_INFINITY))
    files = finder(segments, lambda t: BYTES.encode_batch([t])[0], [ws], 1_000_000)
    found = [u for u, _ in files(pattern)]
    print(json.dumps({"found": found, "stdin": sys.stdin.read()}))
    """
)
LSP_MESSAGE = 'Content-Length: 45\r\n\r\n{"jsonrpc": "2.0", "method": "get_user(7)"}'


@pytest.mark.slow
@pytest.mark.parametrize("target", ["fifo", "link to a fifo", "/dev/zero", "/dev/stdin"])
def test_a_stored_file_replaced_by_a_fifo_or_a_device_is_not_read(
    tmp_path: Path, target: str
) -> None:
    """Before: the FIFO hung next edits for good, /dev/zero grew the process until it died,
    /dev/stdin read the stream the server reads its requests from."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".git").mkdir()
    (root / "views.py").write_text("def show(uid):\n    return get_user(uid)\n")
    if target == "link to a fifo":
        os.mkfifo(root / "pipe")
        target = str(root / "pipe")
    try:
        run = subprocess.run(
            [sys.executable, "-c", CHILD, str(root), target],
            input=LSP_MESSAGE,
            capture_output=True,
            text=True,
            timeout=120,  # a few seconds when it works (the imports); a hang otherwise
            cwd=Path(__file__).parent.parent,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"next edits hung reading {target}")
    assert run.returncode == 0, f"the process died ({run.returncode}): {run.stderr[-2000:]}"
    result = json.loads(run.stdout)
    assert result["found"] == []
    assert result["stdin"] == LSP_MESSAGE  # nothing of the stream was read


def test_a_stored_file_grown_over_max_file_bytes_lends_no_site(
    tmp_path: Path, tokenizer: Any
) -> None:
    root, store, memory = _workspace(tmp_path, tokenizer)
    files = finder(memory.stores.store_segments(store), _encode(tokenizer), [root], 1_000)
    edits, log, uri = NextEdits(), EditLog(), (root / "main.py").as_uri()
    log.open(uri, EDITED)
    log.changed(uri, EDITED.replace("get_user(1)", "fetch_user(1)"), 2)
    change = log.end(uri)
    assert change is not None
    pattern = edits.ended(change, "python").pattern
    assert pattern is not None
    assert "views.py" in {Path(u).name for u, _ in files(pattern)}
    (root / "views.py").write_text("def show(uid):\n    return get_user(uid)\n" + "#" * 2_000)
    assert "views.py" not in {Path(u).name for u, _ in files(pattern)}


def test_the_rule_is_asked_before_a_stored_file_is_opened(
    tmp_path: Path, tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file the rule keeps out by where it lies (git-ignored here, a secret's name, outside
    the workspace) is never opened: before, it was read whole and judged after."""
    root, store, memory = _workspace(tmp_path, tokenizer)
    (root / ".gitignore").write_text("views.py\n")
    opened: list[str] = []
    read = workspace_module.read_text

    def reading(candidate: Any, *args: Any) -> str:
        opened.append(Path(candidate.path).name)
        return read(candidate, *args)

    monkeypatch.setattr(workspace_module, "read_text", reading)
    files = finder(memory.stores.store_segments(store), _encode(tokenizer), [root], 1_000_000)
    edits, log, uri = NextEdits(), EditLog(), (root / "main.py").as_uri()
    log.open(uri, EDITED)
    log.changed(uri, EDITED.replace("get_user(1)", "fetch_user(1)"), 2)
    change = log.end(uri)
    assert change is not None
    pattern = edits.ended(change, "python").pattern
    assert pattern is not None
    assert {Path(u).name for u, _ in files(pattern)} == {"api.py"}
    assert "views.py" not in opened and "api.py" in opened
