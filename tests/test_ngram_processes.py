"""Real processes on one store: concurrent writers lose nothing; a killed indexer harms nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ngram_db import ByteTokenizer, NgramStore, index_repo

pytestmark = pytest.mark.slow  # every test runs writers or the indexer as processes

BYTES = ByteTokenizer()

WRITER = """
import sys, time
from pathlib import Path
from ngram_db import ByteTokenizer, NgramStore
path, name, n, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
store = NgramStore.open(path, ByteTokenizer())
print("ready", flush=True)
while not go.exists():
    time.sleep(0.01)
for i in range(n):
    store.update_file(f"{name}/{i}.py", f"def {name}_{i}(x):\\n    return x * {i}\\n")
    store.update_file("shared.py", f"shared = {name!r} * {i}\\n")
    if i % 3 == 0:
        store.remove_file(f"{name}/{i}.py")
print("done", flush=True)
"""

INDEXER = """
import sys
from ngram_db import ByteTokenizer, NgramStore, index_repo
store = NgramStore.open(sys.argv[1], ByteTokenizer())
report = lambda done, total, message: print(done, flush=True)
index_repo(sys.argv[2], store, chunk_bytes=4000, write_tokens=1, progress=report)
print("finished", flush=True)
"""


def test_two_processes_writing_one_store_lose_nothing(tmp_path: Path) -> None:
    db, go, n = tmp_path / "store.sqlite", tmp_path / "go", 60
    NgramStore.open(db, BYTES).close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), name, str(n), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    go.touch()  # both start writing at the same moment
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert out.strip() == "done"

    expected = {
        f"{name}/{i}.py": f"def {name}_{i}(x):\n    return x * {i}\n"
        for name in ("a", "b")
        for i in range(n)
        if i % 3
    }
    store = NgramStore.open(db, BYTES)
    shared = bytes(store.file_ids("shared.py").astype("u1")).decode()  # type: ignore[union-attr]
    assert shared in (f"shared = 'a' * {n - 1}\n", f"shared = 'b' * {n - 1}\n")
    expected["shared.py"] = shared
    fresh = NgramStore.open(":memory:", BYTES)
    fresh.update_files(list(expected.items()))
    assert store.file_hashes() == fresh.file_hashes()
    got, want = store.all_counts(), fresh.all_counts()
    assert got.keys.tolist() == want.keys.tolist()
    assert (got.g.tolist(), got.c.tolist()) == (want.g.tolist(), want.c.tolist())


def test_a_killed_indexer_leaves_a_sound_store_and_the_next_run_completes_it(
    tmp_path: Path,
) -> None:
    root, db = tmp_path / "proj", tmp_path / "store.sqlite"
    root.mkdir()
    for i in range(150):
        body = "".join(f"    value_{i}_{j} = compute({j}, {i})\n" for j in range(60))
        (root / f"mod_{i:03}.py").write_text(f"def f_{i}():\n{body}")
    child = subprocess.Popen(
        [sys.executable, "-c", INDEXER, str(db), str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    first = child.stdout.readline().strip()
    assert first.isdigit(), child.stderr.read() if child.stderr else first
    time.sleep(0.05)  # let it get into the next chunks
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL

    store = NgramStore.open(db, BYTES)
    assert store.is_consistent()
    stored = store.stats()["files"]
    assert 0 < stored < 150  # killed in the middle, with whole chunks kept
    summary = index_repo(root, store)
    assert (summary.unchanged, summary.indexed) == (stored, 150 - stored)
    fresh = NgramStore.open(":memory:", BYTES)
    index_repo(root, fresh)
    got, want = store.all_counts(), fresh.all_counts()
    assert got.keys.tolist() == want.keys.tolist()
    assert (got.g.tolist(), got.c.tolist()) == (want.g.tolist(), want.c.tolist())
