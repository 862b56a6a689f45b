"""A store's suffix base changed under the server (issue 34, item 4; issue 51, item 10):
truncated by a second index-repo, a sync tool or a full disk, or overwritten in place while
it is open.

Reading a page past the end of a file that shrank under its map raises SIGBUS, which kills
the process: those checks run in a child process, so a crash fails the test instead of
killing pytest. A big base is now mapped from a private copy that no other process can name
(suffix_store._private_copy): what is done to the base file no longer reaches the lookups.
The copy's own guards (an fstat before each lookup, bounds checks) are tested by writing to it
through its descriptor, the one way left to change it.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from lsp_server.stores.match_indexes import MatchIndexes
from ngram_db import suffix_store
from ngram_db.store import NgramStore
from ngram_db.suffix_store import Segment, base_path, open_base, write_base
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
@pytest.mark.parametrize("how", ["in memory", "private copy"])
def test_a_base_truncated_after_open_does_not_crash_the_lookup(tmp_path: Path, how: str) -> None:
    path = tmp_path / "store.sqlite"
    context = make_base(path)
    copy_bytes = suffix_store.COPY_BYTES if how == "in memory" else 0
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
    # read into memory, or copied, at open: the file's fate does not reach the lookups
    assert result["after"] == [[True, len(context)], [True, len(context)]]
    assert result["failed"] is None


# Lookups in a tight loop while another thread truncates the base file, many times over.
# Before the private copy, 19 of 20 such tries died of SIGBUS (each in its own process).
TRUNCATED_DURING_LOOKUPS = textwrap.dedent(
    """
    import json, os, sys, threading, time
    from pathlib import Path
    from ngram_db import suffix_store
    from ngram_db.store import NgramStore
    from ngram_db.tokenizer import ByteTokenizer
    store, tries, context = Path(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
    suffix_store.COPY_BYTES = 0  # as a big base is
    sys.setswitchinterval(1e-6)  # the threads take turns within a lookup
    lookups, matched = 0, 0
    for _ in range(tries):
        with NgramStore.open(store, ByteTokenizer()) as opened:
            suffix_store.write_base(opened)
        segment = suffix_store.open_base(store, ByteTokenizer().fingerprint)
        done = threading.Event()

        def cut():
            time.sleep(0.005)
            os.truncate(suffix_store.base_path(store), 0)
            done.set()

        thread = threading.Thread(target=cut)
        thread.start()
        while not done.is_set() or lookups % 20:
            matched += segment.index.match(context) is not None
            lookups += 1
        thread.join()
    print(json.dumps({"lookups": lookups, "matched": matched}))
    """
)


@pytest.mark.slow
def test_a_base_truncated_during_lookups_does_not_kill_the_process(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    context = make_base(path, copies=400)
    run = subprocess.run(
        [sys.executable, "-c", TRUNCATED_DURING_LOOKUPS, str(path), "20", json.dumps(context)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parent.parent,
    )
    assert run.returncode == 0, f"the lookup process died ({run.returncode}): {run.stderr}"
    result = json.loads(run.stdout)
    assert result["matched"] == result["lookups"] > 0  # every lookup answered from the copy


def _through_descriptor(segment: Segment) -> Path:
    """The private copy under a mapped ``segment``, as another process of the user could
    reach it (/proc/PID/fd: Linux)."""
    backing = segment.index.backing
    assert isinstance(backing, suffix_store.MappedBase) and backing._fd is not None
    return Path(f"/proc/self/fd/{backing._fd}")


@pytest.mark.parametrize("mtime", ["moved", "kept"])
def test_random_bytes_in_place_give_no_match_and_no_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mtime: str
) -> None:
    """The private copy written to through its descriptor. ``kept``: a write within the file
    system's timestamp granularity, which the fstat check cannot see: the lookups' bounds
    checks catch it."""
    monkeypatch.setattr(suffix_store, "COPY_BYTES", 0)  # mapped, as a big base is
    path = tmp_path / "store.sqlite"
    context = make_base(path)
    segment = open_base(path, BYTES.fingerprint)
    assert segment is not None and segment.index.match(context) is not None
    file = _through_descriptor(segment)
    st = file.stat()
    rng = random.Random(7)
    with file.open("r+b") as out:  # in place: the mapping sees the new bytes
        out.write(rng.randbytes(st.st_size))
    if mtime == "kept":
        os.utime(file, ns=(st.st_atime_ns, st.st_mtime_ns))
    contexts = [context, *([rng.randrange(256) for _ in range(20)] for _ in range(30))]
    for probe in contexts:  # before the fix: IndexError from the first or a later lookup
        found = segment.index.match(probe, others=2)
        assert found is None or all(0 <= t < 256 for t in found.next_counts)
        segment.index.longest(probe)
    assert segment.index.failed is not None
    assert segment.index.match(context) is None  # left out from then on


def _copies_open(folder: Path) -> list[Path]:
    """This process's descriptors of private copies of bases in ``folder`` (/proc: Linux)."""
    fds = Path("/proc/self/fd")
    found = []
    for fd in fds.iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith(f"{folder}/") and target.endswith("(deleted)"):
                found.append(fd)
    return found


@pytest.mark.parametrize("where", ["base file, mtime moved", "copy, mtime moved", "copy, kept"])
def test_a_request_in_flight_survives_its_base_overwritten_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The memory's source that a request holds, bytes overwritten under it. In the base file:
    the request reads its private copy, checked at open, as before; the next request's source
    finds the file damaged and rebuilds it. In the copy (through its descriptor): the lookup
    is skipped, no exception reaches the request, and the next request's source opens the base
    again (``kept``: the change only the failed lookup saw)."""
    monkeypatch.setattr(suffix_store, "COPY_BYTES", 0)
    path = tmp_path / "store.sqlite"
    context = make_base(path)
    with NgramStore.open(path, BYTES) as store:
        memory = MatchIndexes(BYTES)
        in_flight = memory.stores.store_index(store)
        assert in_flight is not None and in_flight.match(context) is not None
        files = [base_path(path)] if where.startswith("base") else _copies_open(tmp_path)
        assert files
        for file in files:
            st = file.stat()
            start = arrays_start(file) if where.startswith("base") else 0
            with file.open("r+b") as out:
                out.seek(start)
                out.write(np.random.default_rng(3).bytes(st.st_size - start))
            if where.endswith("kept"):
                os.utime(file, ns=(st.st_atime_ns, st.st_mtime_ns))
        if where.startswith("base"):
            assert in_flight.match(context) is not None  # its copy, not the file
        else:
            assert in_flight.match(context) is None  # no IndexError reaches the request
        memory.stores.store_index(store)  # sees the change: opened again (rebuilt if damaged)
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
