"""Text or binary, judged from the head before the rest is read (issue 21, item 7)."""

from __future__ import annotations

import io
import os
import random
import re
from pathlib import Path
from typing import Any

import pytest

from ngram_db import ByteTokenizer, NgramStore, files, index_repo
from ngram_db.files import (
    SECRET_NEEDLES,
    SECRET_PATTERNS,
    Candidate,
    Skipped,
    read_text,
    save_skip_reason,
    secret_in,
    text_skip_reason,
)
from ngram_db.regular import NotRegular, open_regular

LATIN1_COMMENT = "# écrit par François: ça génère les données\ndef f(x):\n    return x\n"


def candidate(root: Path, rel: str, data: bytes) -> Candidate:
    path = root / rel
    path.write_bytes(data)
    return Candidate(rel, str(path))


def random_text_bytes(seed: int, size: int = 20_000) -> bytes:
    """Random bytes with no NUL: git's check (a NUL in the first 8000 bytes) lets them pass."""
    rng = random.Random(seed)
    return bytes(rng.randrange(1, 256) for _ in range(size))


@pytest.mark.parametrize("seed", range(5))
def test_random_bytes_named_py_are_binary(tmp_path: Path, seed: int) -> None:
    data = random_text_bytes(seed)
    with pytest.raises(Skipped, match="binary"):
        read_text(candidate(tmp_path, "x.py", data), tmp_path, 10**6)
    # a save: the editor decodes the same bytes (VS Code: U+FFFD; Python: surrogateescape)
    for text in (data.decode("utf-8", "replace"), data.decode("utf-8", "surrogateescape")):
        assert text_skip_reason(text) == "binary"
        assert save_skip_reason(tmp_path / "x.py", tmp_path, text, 10**6) == "binary"


def test_bytes_from_0x80_up_are_binary(tmp_path: Path) -> None:
    """identify's is_text calls these text; decoded, they are mostly U+FFFD."""
    data = bytes(random.Random(0).randrange(0x80, 0x100) for _ in range(8192))
    with pytest.raises(Skipped, match="binary"):
        read_text(candidate(tmp_path, "x.py", data), tmp_path, 10**6)


@pytest.mark.parametrize(
    "data",
    [
        LATIN1_COMMENT.encode("latin-1") * 20,  # 9% U+FFFD once decoded
        "Größenänderung für Übergänge; schön, müde, Straße\n".encode("latin-1") * 100,
        b"x = 1  # ok\n" * 500 + b"\xff\xfe" + "y = 'ünïcode'\n".encode() * 500,
        b"\x1b[31mred\x1b[0m\tcolumns\x0cpage\r\n" * 300,  # escapes, form feeds
    ],
    ids=["latin-1 comments", "dense latin-1 text", "utf-8 with stray bytes", "terminal escapes"],
)
def test_text_with_a_few_odd_characters_is_indexed(tmp_path: Path, data: bytes) -> None:
    text = read_text(candidate(tmp_path, "x.py", data), tmp_path, 10**6)
    assert text == data.decode("utf-8", "replace")
    assert save_skip_reason(tmp_path / "x.py", tmp_path, text, 10**6) is None


def test_index_repo_skips_random_bytes_as_binary(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("x = 1\n")
    (tmp_path / "noise.py").write_bytes(random_text_bytes(0))
    with NgramStore.open(":memory:", ByteTokenizer()) as store:
        summary = index_repo(tmp_path, store, progress=False)
        assert summary.skipped == {"binary": 1}
        assert [Path(p).name for p in store.paths()] == ["ok.py"]


class CountingReads:
    """A file whose reads are counted (bytes returned)."""

    def __init__(self, f: io.BufferedReader, counter: list[int]) -> None:
        self._f, self._counter = f, counter

    def read(self, size: int = -1) -> bytes:
        data = self._f.read(size)
        self._counter.append(len(data))
        return data

    def __enter__(self) -> CountingReads:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()


def counting_open(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    reads: list[int] = []

    def fake_open(path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        return CountingReads(open(path, mode, *args, **kwargs), reads)

    monkeypatch.setattr(files, "open", fake_open, raising=False)
    return reads


def test_a_huge_binary_file_is_judged_by_its_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3 GiB of NULs (sparse: instant to make) under a raised limit: only the head is read."""
    path = tmp_path / "huge.py"
    with path.open("wb") as f:
        f.truncate(3 * 2**30)
    reads = counting_open(monkeypatch)
    with pytest.raises(Skipped, match="binary"):
        read_text(Candidate("huge.py", str(path)), tmp_path, max_bytes=4 * 2**30)
    assert 0 < sum(reads) <= 64 * 1024


def test_a_text_file_is_read_whole_and_a_growing_one_is_too_large(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = "é = 'ü'\n".encode() * 10_000  # 2-byte characters across the head's reads
    cand = candidate(tmp_path, "a.py", data)
    reads = counting_open(monkeypatch)
    assert read_text(cand, tmp_path, max_bytes=len(data)) == data.decode()
    assert sum(reads) == len(data)
    # the limit is checked on the bytes read too, not only on the size measured before
    with pytest.raises(Skipped, match="too large"):
        files._read_head_first(io.BytesIO(data), len(data) - 1)


# ----- the secret scan: needles first, then the pattern where one is -------------------------

SECRETS = [
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----",
    "AKIAIOSFODNN7EXAMPLE",
    "ASIAIOSFODNN7EXAMPL3",
    "ghp_" + "a1B2c3D4e5" * 4,
    "github_pat_" + "x_Y" * 20,
    "glpat-" + "Ab_-" * 5,
    "xoxb-1234567890-abc",
    "sk_live_" + "k9" * 10,
    "rk_live_" + "k9" * 10,
    "AIza" + "Sy_-0" * 7,
    "npm_" + "n0" * 18,
]
NEAR_MISSES = [
    "x = 1\n", "x", "_", " ", "AKIA", "ASIA1", "npm_", "xox", "ghp_short", "AIza",
    "-----BEGIN CERTIFICATE-----\n", "-----BEGIN ", "sk_live_", "github_pat_",
]  # fmt: skip


def test_the_needle_scan_finds_what_one_search_of_all_patterns_found() -> None:
    """secret_in tries each pattern only where a needle is; the scan before searched the text."""
    one = re.compile("|".join(f"(?:{p})" for p in SECRET_PATTERNS.values()))
    assert SECRET_NEEDLES.keys() == SECRET_PATTERNS.keys()
    rng = random.Random(0)
    for _ in range(3000):
        text = "".join(rng.choices(NEAR_MISSES * 3 + SECRETS, k=rng.randrange(0, 10)))
        found = one.search(text)
        expected = None
        if found is not None:
            kinds = SECRET_PATTERNS.items()
            expected = next(k for k, p in kinds if re.fullmatch(p, found.group()))
        assert secret_in(text) == expected, text


def test_open_regular_refuses_fifos_devices_and_folders_before_reading(tmp_path: Path) -> None:
    """No open that waits (a FIFO without a writer), no read of a device: the check that
    index-repo, next edits' workspace sites and the shared indexes share (issue 51)."""
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "link").symlink_to(tmp_path / "pipe")
    read, write = os.pipe()  # what /dev/stdin is under an editor: the protocol's pipe
    try:
        for path in [tmp_path / "pipe", tmp_path / "link", "/dev/zero", tmp_path]:
            with pytest.raises(NotRegular):
                open_regular(path)
        with pytest.raises(NotRegular):
            open_regular(f"/proc/self/fd/{read}")
    finally:
        os.close(read)
        os.close(write)
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "a_link.py").symlink_to(tmp_path / "a.py")
    fd, size = open_regular(tmp_path / "a_link.py")
    os.close(fd)
    assert size == 6
    with pytest.raises(OSError, match="symbolic links|Too many levels"):
        open_regular(tmp_path / "a_link.py", follow=False)
