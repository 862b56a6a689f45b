"""Store files on disk: permissions, forgetting, secrets, ignore files, and unusable stores.

Real files under tmp_path with the byte tokenizer (no model). Issue 12, items 4-6 and 8-11.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ngram_db import ByteTokenizer, NgramStore, NotAStore, index_repo
from ngram_db import store as store_module
from ngram_db.errors import StoreBusy, StoreCorrupt, StoreUnwritable
from ngram_db.files import save_skip_reason, secret_in
from ngram_db.records import pack_ids

BYTES = ByteTokenizer()
PEM = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\n-----END OPENSSH PRIVATE KEY-----\n"  # noqa: E501
AWS = 'AWS_KEY = "AKIAIOSFODNN7EXAMPLE"\n'
GITHUB = 'token = "ghp_' + "a1B2c3D4e5" * 4 + '"\n'


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def unprivileged() -> list[str]:
    """A command prefix under which file permissions apply (root ignores them otherwise)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("unshare") is None:
        pytest.skip("running as root without unshare: permissions cannot be enforced")
    return ["unshare", "-U"]


# ----- item 6: private files, forgetting, a bound on accepted drafts -----------------------


def test_store_files_and_created_folders_are_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = tmp_path / "data" / "ngrams" / "user.sqlite"
        with NgramStore.open(path, BYTES) as store:
            store.update_file("/src/a.py", "password = 'hunter2'\n")
            files = [Path(f"{path}{s}") for s in ("", "-wal", "-shm")]
            assert all(f.exists() for f in files)
            assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}
        assert mode(tmp_path / "data") == 0o700 and mode(tmp_path / "data" / "ngrams") == 0o700
        # A store left world-readable by an older version is made private when opened.
        os.chmod(path, 0o644)
        NgramStore.open(path, BYTES).close()
        assert mode(path) == 0o600
    finally:
        os.umask(old)


def test_forget_erases_a_file_or_a_folder_and_clear_erases_everything(tmp_path: Path) -> None:
    path = tmp_path / "user.sqlite"
    secret = "db_password = 'correct horse battery staple'\n" * 3
    with NgramStore.open(path, BYTES) as store:
        store.update_file("/ws/a.py", "def a():\n    return 1\n")
        store.update_file("/ws/sub/b.py", secret)
        store.update_file("/ws/sub/c.py", "def c():\n    return 3\n")
        store.update_file("/ws/subway.py", "x = 1\n")
        store.checkpoint()
        blob = pack_ids(BYTES.encode_batch([secret])[0])
        assert blob in path.read_bytes()

        assert store.forget("/ws/sub") == 2  # the folder, not /ws/subway.py
        assert store.paths() == ["/ws/a.py", "/ws/subway.py"]
        assert store.is_consistent()
        assert blob not in path.read_bytes()  # erased from the file, not only unlinked
        assert store.forget("/ws/a.py") == 1 and store.paths() == ["/ws/subway.py"]

        assert store.clear() == 1
        assert store.stats()["files"] == 0 and len(store.all_counts()) == 0
        store.update_file("/ws/new.py", "y = 2\n")  # still a working store
        assert store.is_consistent() and store.paths() == ["/ws/new.py"]


def test_prune_keeps_the_newest(tmp_path: Path) -> None:
    with NgramStore.open(tmp_path / "u.sqlite", BYTES) as store:
        for i in range(5):
            store.update_file(f"accepted:{i:020d}", f"draft {i}\n")
        store.update_file("/ws/a.py", "kept = True\n")
        assert store.prune("accepted:", 2) == 3
        assert store.paths() == ["/ws/a.py", f"accepted:{3:020d}", f"accepted:{4:020d}"]
        assert store.is_consistent()


# ----- items 4-5: what is never indexed --------------------------------------------------


def test_secrets_are_recognised_by_their_text() -> None:
    assert secret_in(PEM) == "private key"
    assert secret_in(AWS) == "AWS access key"
    assert secret_in(GITHUB) == "GitHub token"
    assert secret_in("-----BEGIN PGP PRIVATE KEY BLOCK-----\n") == "private key"
    assert secret_in("def f():\n    return 'AKIA is a prefix'\n") is None
    assert secret_in("-----BEGIN PUBLIC KEY-----\n") is None


def test_index_repo_skips_files_holding_secrets_and_says_so(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("def app():\n    return 1\n")
    (root / "deploy_notes.txt").write_text("the key:\n" + PEM)
    (root / "settings.py").write_text(AWS)
    (root / "ci.py").write_text(GITHUB)
    with NgramStore.open(":memory:", BYTES) as store:
        summary = index_repo(root, store, progress=False)
        assert summary.skipped == {"secret content": 3}
        assert "3 secret content" in summary.format()
        assert store.paths() == [str(root.resolve() / "app.py")]
        # --index-secrets indexes them after all
        assert index_repo(root, store, skip_secrets=False, progress=False).indexed == 3


def test_gitignore_is_respected_outside_git(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    (root / "logs").mkdir(parents=True)
    (root / "pkg").mkdir()
    (root / ".gitignore").write_text("*.log\nlogs/\n")
    (root / "pkg" / ".gitignore").write_text("local_*.py\n!keep.log\n")
    (root / "pkg" / "keep.log").write_text("kept: a deeper rule re-includes it\n")
    (root / "app.py").write_text("x = 1\n")
    (root / "run.log").write_text("started\n")
    (root / "logs" / "today.txt").write_text("ok\n")
    (root / "pkg" / "mod.py").write_text("y = 2\n")
    (root / "pkg" / "local_settings.py").write_text("PASSWORD = 'x'\n")
    with NgramStore.open(":memory:", BYTES) as store:
        index_repo(root, store, progress=False)
        names = sorted(Path(p).relative_to(root.resolve()).as_posix() for p in store.paths())
    assert names == [".gitignore", "app.py", "pkg/.gitignore", "pkg/keep.log", "pkg/mod.py"]


@pytest.mark.parametrize("in_git", [False, True])
def test_a_saved_file_is_judged_as_index_repo_judges_it(tmp_path: Path, in_git: bool) -> None:
    root = (tmp_path / "ws").resolve()
    root.mkdir()
    if in_git:
        if shutil.which("git") is None:
            pytest.skip("no git")
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitignore").write_text("build_output.py\n")
    cases = {
        ".env": ("API_KEY=1\n", "secret"),
        "id_rsa": ("anything\n", "secret"),
        "certs/server.pem": ("anything\n", "secret"),
        ".aws/credentials": ("[default]\n", "secret"),
        "node_modules/lib/index.js": ("module.exports = 1\n", "ignored folder"),
        "build_output.py": ("x = 1\n", "gitignored"),
        "notes.txt": (PEM, "secret content"),
        "config.py": (AWS, "secret content"),
        "big.py": ("x = 1\n" * 200, "too large"),
        "app.py": ("def app():\n    return 1\n", None),
    }
    for rel, (text, expected) in cases.items():
        assert save_skip_reason(root / rel, root, text, max_bytes=1_000) == expected, rel


# ----- items 8-11: stores that cannot be used ----------------------------------------------


def make_store(path: Path) -> None:
    with NgramStore.open(path, BYTES) as store:
        store.update_file("/a.py", "def foo(x):\n    return x\n" * 2000)
        store.checkpoint()


def test_a_store_damaged_inside_is_a_clear_error_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    make_store(path)
    with path.open("r+b") as f:  # the header and the first pages intact, the rest garbage
        f.seek(3 * 4096)
        f.write(b"\xa5" * 3 * 4096)
    damaged = path.read_bytes()
    with NgramStore.open(path, BYTES) as store:
        for use in (store.stats, lambda: store.update_file("/b.py", "y = 2\n")):
            with pytest.raises(StoreCorrupt, match="damaged .* left untouched"):
                use()
    assert path.read_bytes() == damaged


def test_an_empty_store_file_is_said(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    path.touch()
    with NgramStore.open(path, BYTES) as store:
        assert len(store.notices) == 1 and "0 bytes" in store.notices[0]
    with NgramStore.open(path, BYTES) as store:
        assert store.notices == []  # a real store now


@pytest.mark.parametrize("parent", ["/dev/null/ngrams", "FILE/ngrams"])
def test_a_folder_that_cannot_be_created_is_a_clear_error(tmp_path: Path, parent: str) -> None:
    (tmp_path / "FILE").write_text("a file, not a folder")
    folder = Path(parent.replace("FILE", str(tmp_path / "FILE")))
    with pytest.raises(StoreUnwritable, match="cannot create the folder"):
        NgramStore.open(folder / "s.sqlite", BYTES)


def test_a_valid_store_in_a_read_only_folder_is_not_called_unusable(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    make_store(folder / "s.sqlite")
    folder.chmod(0o555)
    code = (
        "from ngram_db import ByteTokenizer, NgramStore\n"
        "from ngram_db.errors import StoreUnwritable\n"
        "try:\n"
        f"    NgramStore.open({str(folder / 's.sqlite')!r}, ByteTokenizer()).stats()\n"
        "except StoreUnwritable as err:\n"
        "    print('UNWRITABLE', err)\n"
    )
    try:
        result = subprocess.run(
            [*unprivileged(), sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
            timeout=60,
        )
    finally:
        folder.chmod(0o755)
    assert result.stdout.startswith("UNWRITABLE"), result.stdout + result.stderr
    assert "not a usable n-gram store" not in result.stdout
    assert "cannot be opened or written" in result.stdout


def test_a_writer_past_the_busy_timeout_is_store_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_MS", 200)
    path = tmp_path / "s.sqlite"
    make_store(path)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with NgramStore.open(path, BYTES) as store:
            with pytest.raises(StoreBusy, match="locked"):
                store.update_file("/b.py", "y = 2\n")
            assert store.stats()["files"] == 1  # reads still answer
    finally:
        other.rollback()
        other.close()
    with NgramStore.open(path, BYTES) as store:
        assert store.update_file("/b.py", "y = 2\n")  # once released, it writes


def test_not_a_store_errors_stay_not_a_store(tmp_path: Path) -> None:
    folder = tmp_path / "dir.sqlite"
    folder.mkdir()
    with pytest.raises(NotAStore, match="directory"):
        NgramStore.open(folder, BYTES)
