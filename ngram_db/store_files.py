"""A store's files on disk: the header check before opening, private folders and files
(0700, 0600), putting a whole new file in place, deleting a store with its side files, and
which file (device, inode) a path names."""

from __future__ import annotations

import contextlib
import errno
import glob
import os
from pathlib import Path

from ngram_db import suffix_store
from ngram_db.errors import NotAStore, StoreUnwritable

FILE_MODE = 0o600  # store files: readable by their owner only
DIR_MODE = 0o700  # folders created for stores
SQLITE_HEADER = b"SQLite format 3\x00"


def check_header(path: Path) -> None:
    if path.is_dir():
        raise NotAStore(f"{path} is a directory, not an n-gram store")
    if path.exists() and path.stat().st_size > 0:
        with path.open("rb") as f:
            header = f.read(len(SQLITE_HEADER))
        if header != SQLITE_HEADER:
            raise NotAStore(
                f"{path} is not an n-gram store (not an SQLite database); it was left untouched"
            )


# Files older versions wrote beside a store, which nothing reads now: the kNN store of
# ``index-repo --knn`` (retired: it measured no gain, docs/benchmarks.md), and its
# ``.tmp`` siblings an interrupted write left. It may hold a file's tokens and path, so
# forgetting deletes it, unread (store_writes.py).
LEFTOVERS = (".knn.npz",)


def delete_store_files(path: Path) -> None:
    """Remove a store, its WAL side files, its suffix index and older versions' leftovers
    (what --rebuild does)."""
    for suffix in ("", "-wal", "-shm", "-journal", suffix_store.SUFFIX):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    drop_leftovers(path)


def drop_leftovers(store_path: str | os.PathLike[str]) -> None:
    """Delete the files older versions left beside the store at ``store_path``, unread."""
    store = Path(store_path)
    for suffix in LEFTOVERS:
        name = glob.escape(f"{store.name}{suffix}")
        for path in [store.with_name(f"{store.name}{suffix}"), *store.parent.glob(f"{name}*.tmp")]:
            with contextlib.suppress(IsADirectoryError):  # not a file any version wrote
                path.unlink(missing_ok=True)


def make_private_dirs(folder: Path) -> None:
    """Create ``folder`` and its missing parents with mode 0700 (whatever the umask).

    Raises StoreUnwritable (what to fix) when a folder cannot be created.
    """
    missing: list[Path] = []
    here = folder
    while not here.exists() and here != here.parent:
        missing.append(here)
        here = here.parent
    try:
        for path in reversed(missing):
            path.mkdir(mode=DIR_MODE, exist_ok=True)
            os.chmod(path, DIR_MODE)
        if not folder.is_dir():
            raise NotADirectoryError(f"{folder} is not a folder")
    except OSError as err:
        raise StoreUnwritable(
            f"cannot create the folder {folder} for an n-gram store ({err.strerror or err})"
        ) from err


def link_or_move(source: Path, target: Path) -> None:
    """Put ``source`` at ``target`` unless it exists (FileExistsError): a hard link, which
    never replaces; where the filesystem has none, a rename after a check."""
    try:
        os.link(source, target)
    except FileExistsError:
        raise
    except OSError as err:
        if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK):
            raise
        if target.exists():
            raise FileExistsError(target) from err
        os.rename(source, target)


def file_identity(path: Path | None) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``; None: in memory, or none to be seen."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino
