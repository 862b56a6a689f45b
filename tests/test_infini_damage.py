"""A shared index that cannot kill or freeze the server (issue 34, item 2).

infini-gram's C++ engine crashes the process that maps a damaged file, found its files by
words anywhere in their paths, and a manifest that is a FIFO or /dev/zero hung or filled the
reader. Opening now checks every file (ngram_db/infini_check.py) and the engine runs in a
worker process (ngram_db/infini_worker.py): a crash costs one lookup, reported once.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lsp_server.stores.match_indexes import MatchIndexes
from lsp_server.stores.shared_indexes import SharedIndexes
from ngram_db import infini_source
from ngram_db.infini import MANIFEST, SHARDS, build_index
from ngram_db.infini_check import InfiniIndexError
from ngram_db.infini_source import InfiniSource
from ngram_db.tokenizer import ByteTokenizer

pytestmark = pytest.mark.slow  # builds indexes with infini-gram's indexer; starts workers

BYTES = ByteTokenizer()
ORG = "def connect(cluster):\n    return OrgClient(cluster, region='eu-west-4')\n"
CONTEXT = "def connect(cluster):\n    return Org"
ROOT = Path(__file__).resolve().parents[1]


def _ids(text: str) -> list[int]:
    return BYTES.encode_batch([text])[0].tolist()


def _build(base: Path, repo_name: str = "org-client") -> Path:
    repo = base / repo_name
    repo.mkdir(parents=True)
    (repo / "client.py").write_text(ORG)
    build_index(base / "index", [repo], BYTES, "bytes", cpus=1, mem_gib=1)
    return base / "index"


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory.mktemp("intact"))


@pytest.fixture()
def index(intact: Path, tmp_path: Path) -> Path:
    """A copy of the intact index, to damage."""
    return Path(shutil.copytree(intact, tmp_path / "index"))


def _shard(index: Path) -> Path:
    return index / SHARDS / "org-client"


def _client(found: object) -> bytes:
    assert found is not None
    return bytes(found.continuation)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("folder", "repo"),
    [("srv/stable/org", "org-client"), ("mnt/portable disk/tokenized", "offset-table")],
)
def test_an_index_under_a_path_with_the_engines_file_words_matches(
    tmp_path: Path, folder: str, repo: str
) -> None:
    """The engine took every file under /srv/stable/... for a suffix array: SIGSEGV."""
    index = _build(tmp_path / folder, repo)
    source = InfiniSource([index], BYTES.fingerprint)
    try:
        assert _client(source.match(_ids(CONTEXT), follow=6)) == b"Client"
    finally:
        source.close()


def _refused(index: Path) -> list[str]:
    """What opening ``index`` as the setting's only index reported (it must be left out)."""
    said: list[str] = []
    shared = SharedIndexes(said.append)
    assert shared.sources([str(index)], BYTES.fingerprint) == []
    assert len(said) == 1
    return said


def test_a_truncated_tokenized_file_is_refused(index: Path) -> None:
    """A valid manifest with a truncated tokenized.0 crashed the server (SIGSEGV)."""
    tokenized = _shard(index) / "tokenized.0"
    os.truncate(tokenized, tokenized.stat().st_size // 2)
    said = _refused(index)
    assert "tokenized.0" in said[0] and "truncated" in said[0] and "rebuild" in said[0]


def test_a_random_offset_file_is_refused(index: Path) -> None:
    """A random offset.0 aborted the server (std::bad_alloc, SIGABRT)."""
    offset = _shard(index) / "offset.0"
    offset.write_bytes(os.urandom(offset.stat().st_size))
    said = _refused(index)
    assert "offset.0 is damaged" in said[0]


def test_a_random_table_is_refused(index: Path) -> None:
    table = _shard(index) / "table.0"
    table.write_bytes(b"\xff" * table.stat().st_size)  # every pointer past the tokens
    said = _refused(index)
    assert "table.0 is damaged" in said[0]


def test_shard_files_that_are_no_regular_files_are_refused(index: Path) -> None:
    (_shard(index) / "offset.0").unlink()
    os.mkfifo(_shard(index) / "offset.0")
    said = _refused(index)
    assert "offset.0 is not a regular file" in said[0]


def _open_in_a_child(index: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """Open ``index`` in a process of at most 1 GiB of heap (a hang or a growth is bounded)."""
    code = textwrap.dedent(
        f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_DATA, (1 << 30, 1 << 30))
        from lsp_server.stores.shared_indexes import SharedIndexes
        from ngram_db.tokenizer import ByteTokenizer
        said = []
        print(SharedIndexes(said.append).sources([{str(index)!r}], ByteTokenizer().fingerprint))
        print(said)
        """
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def test_a_fifo_manifest_does_not_hang(index: Path) -> None:
    """manifest.json as a FIFO: every request hung and shutdown never answered."""
    (index / MANIFEST).unlink()
    os.mkfifo(index / MANIFEST)
    done = _open_in_a_child(index, timeout=30)  # the old code waits for a writer forever
    assert done.returncode == 0, done.stderr
    assert "[]" in done.stdout and "is not a regular file" in done.stdout


def test_a_dev_zero_manifest_is_refused_at_once(index: Path) -> None:
    """manifest.json linked to /dev/zero: memory grew past 2.4 GB in 7 s."""
    (index / MANIFEST).unlink()
    (index / MANIFEST).symlink_to("/dev/zero")
    start = time.monotonic()
    done = _open_in_a_child(index, timeout=30)  # the old code: MemoryError past 1 GiB
    assert done.returncode == 0, done.stderr
    assert "is not a regular file" in done.stdout
    assert time.monotonic() - start < 20


def test_a_manifest_past_its_size_cap_is_refused(
    index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ngram_db import infini_check

    monkeypatch.setattr(infini_check, "MAX_MANIFEST_BYTES", 64)
    with pytest.raises(InfiniIndexError, match="more than a manifest's 64"):
        InfiniSource([index], BYTES.fingerprint)


def test_a_shard_truncated_while_mapped_costs_one_lookup(index: Path) -> None:
    """Truncating a mapped shard killed the server (SIGBUS); now its worker dies, the index
    is reported once and left out, and the memory keeps answering from the documents."""
    said: list[str] = []
    shared = SharedIndexes(said.append)
    sources = shared.sources([str(index)], BYTES.fingerprint)
    assert _client(sources[0].match(_ids(CONTEXT), follow=6)) == b"Client"
    for name in ("tokenized.0", "table.0"):
        os.truncate(_shard(index) / name, 0)
    assert sources[0].match(_ids(CONTEXT), follow=6) is None
    assert sources[0].match(_ids(CONTEXT), follow=6) is None
    assert len(said) == 1 and "SIGBUS" in said[0] and "rebuild" in said[0], said
    memory = MatchIndexes(BYTES)
    text = "class OrgClient:\n    pass\n" + CONTEXT
    documents = {"file:///w/app.py": text}
    pending = memory.source_later("file:///w/app.py", len(text), documents)
    found = pending.with_stores([], sources).match(_ids(CONTEXT), follow=6)
    assert _client(found).startswith(b"Client")  # the open document still answers
    assert len(said) == 1


def test_a_worker_that_stops_answering_is_left_out(
    index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lookup that hangs (a hung mount) costs LOOKUP_TIMEOUT_S once, not every request."""
    monkeypatch.setattr(infini_source, "LOOKUP_TIMEOUT_S", 0.5)
    said: list[str] = []
    sources = SharedIndexes(said.append).sources([str(index)], BYTES.fingerprint)
    worker = sources[0].source._worker  # type: ignore[attr-defined]
    os.kill(worker.process.pid, signal.SIGSTOP)
    start = time.monotonic()
    assert sources[0].match(_ids(CONTEXT)) is None
    assert sources[0].match(_ids(CONTEXT)) is None
    assert time.monotonic() - start < 5
    assert len(said) == 1 and "did not answer in 0.5 s" in said[0]
    assert worker.process.poll() is not None  # killed, not left stopped


def test_closing_ends_the_worker_and_its_scratch_folder(index: Path) -> None:
    shared = SharedIndexes()
    sources = shared.sources([str(index)], BYTES.fingerprint)
    worker = sources[0].source._worker  # type: ignore[attr-defined]
    assert Path(worker.scratch).is_dir()
    shared.close()
    assert worker.process.wait(timeout=5) is not None
    assert not Path(worker.scratch).exists()
    assert sources[0].match(_ids(CONTEXT)) is None  # a request in flight finds nothing
    assert shared.sources([str(index)], BYTES.fingerprint) == []  # nothing opens again
