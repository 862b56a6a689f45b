"""A store's suffix base changed under the server (issue 34, item 4): truncated by a second
index-repo, a sync tool or a full disk, or overwritten in place while it is open.

Reading a page past the end of a file that shrank under its map raises SIGBUS, which kills
the process: those checks run in a child process, so a crash fails the test instead of
killing pytest.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from lsp_server.match_indexes import MatchIndexes
from ngram_db import suffix_store
from ngram_db.store import NgramStore
from ngram_db.suffix_store import base_path, open_base, write_base
from ngram_db.tokenizer import ByteTokenizer

BYTES = ByteTokenizer()
TEXT = "def render(page):\n    return template.expand(page, columns=3, margin=12)\n"


def make_base(path: Path, copies: int = 40) -> list[int]:
    """A store with a base file; returns a context that the base continues."""
    with NgramStore.open(path, BYTES) as store:
        for i in range(copies):
            store.update_file(f"/ws/f{i}.py", f"import m{i}\n\n" + TEXT + f"\nprint({i})\n")
        write_base(store)
    return BYTES.encode_batch([TEXT])[0][:-12].tolist()


def arrays_start(file: Path) -> int:
    """Where the base's arrays begin (after its header)."""
    with file.open("rb") as handle:
        return suffix_store._read_header(handle, file)[1]


CHILD = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    from ngram_db import suffix_store
    from ngram_db.tokenizer import ByteTokenizer
    store, copy_bytes, context = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    suffix_store.COPY_BYTES = copy_bytes
    segment = suffix_store.open_base(Path(store), ByteTokenizer().fingerprint)
    before = segment.index.match(context)
    file = suffix_store.base_path(store)
    answers = []
    for size in (file.stat().st_size // 2, 0):  # two truncations, each with lookups after
        os.truncate(file, size)
        found = [segment.index.match(context), segment.index.longest(context)[0]]
        answers.append([found[0] is not None, found[1]])
    print(json.dumps({"before": before is not None, "after": answers,
                      "failed": segment.index.failed}))
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["copied", "mapped"])
def test_a_base_truncated_after_open_does_not_crash_the_lookup(tmp_path: Path, how: str) -> None:
    path = tmp_path / "store.sqlite"
    context = make_base(path)
    copy_bytes = suffix_store.COPY_BYTES if how == "copied" else 0
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(copy_bytes), json.dumps(context)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parent.parent,
    )
    assert run.returncode == 0, f"the lookup process died ({run.returncode}): {run.stderr}"
    result = json.loads(run.stdout)
    assert result["before"]
    if how == "copied":  # read into memory at open: the file's fate does not reach it
        assert result["after"] == [[True, len(context)], [True, len(context)]]
        assert result["failed"] is None
    else:  # mapped: left out before any page is read, no match rather than a crash
        assert result["after"] == [[False, 0], [False, 0]]
        assert "changed on disk" in result["failed"]


@pytest.mark.parametrize("mtime", ["moved", "kept"])
def test_random_bytes_in_place_give_no_match_and_no_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mtime: str
) -> None:
    """``kept``: a write within the file system's timestamp granularity, which the fstat
    check cannot see: the lookups' bounds checks catch it."""
    monkeypatch.setattr(suffix_store, "COPY_BYTES", 0)  # mapped, as a big base is
    path = tmp_path / "store.sqlite"
    context = make_base(path)
    segment = open_base(path, BYTES.fingerprint)
    assert segment is not None and segment.index.match(context) is not None
    file = base_path(path)
    st = file.stat()
    start = arrays_start(file)
    rng = random.Random(7)
    with file.open("r+b") as out:  # in place: the mapping sees the new bytes
        out.seek(start)
        out.write(rng.randbytes(st.st_size - start))
    if mtime == "kept":
        os.utime(file, ns=(st.st_atime_ns, st.st_mtime_ns))
    contexts = [context, *([rng.randrange(256) for _ in range(20)] for _ in range(30))]
    for probe in contexts:  # before the fix: IndexError from the first or a later lookup
        found = segment.index.match(probe, others=2)
        assert found is None or all(0 <= t < 256 for t in found.next_counts)
        segment.index.longest(probe)
    assert segment.index.failed is not None
    assert segment.index.match(context) is None  # left out from then on


@pytest.mark.parametrize("mtime", ["moved", "kept"])
def test_a_request_in_flight_survives_its_base_overwritten_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mtime: str
) -> None:
    """The memory's source that a request holds, its base overwritten under it: the lookup
    is skipped; the next request's source has the base rebuilt from the store (``kept``:
    the change only the failed lookup saw)."""
    monkeypatch.setattr(suffix_store, "COPY_BYTES", 0)
    path = tmp_path / "store.sqlite"
    context = make_base(path)
    with NgramStore.open(path, BYTES) as store:
        memory = MatchIndexes(BYTES)
        in_flight = memory.stores.store_index(store)
        assert in_flight is not None and in_flight.match(context) is not None
        file = base_path(path)
        st = file.stat()
        start = arrays_start(file)
        with file.open("r+b") as out:
            out.seek(start)
            out.write(np.random.default_rng(3).bytes(st.st_size - start))
        if mtime == "kept":
            os.utime(file, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert in_flight.match(context) is None  # no IndexError reaches the request
        memory.stores.store_index(store)  # sees the file changed: damaged, deleted, rebuilt
        memory.wait()
        again = memory.stores.store_index(store)
        assert again is not None and again.match(context) is not None


def test_a_small_base_is_read_into_memory_not_mapped(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    context = make_base(path)
    segment = open_base(path, BYTES.fingerprint)
    assert segment is not None and segment.index.backing is None
    maps = Path("/proc/self/maps").read_text()  # Linux
    assert str(base_path(path)) not in maps
    with base_path(path).open("r+b") as out:  # what the server reads was checked at open
        out.seek(arrays_start(base_path(path)))
        out.write(b"\xff" * 4096)
    assert segment.index.match(context) is not None
