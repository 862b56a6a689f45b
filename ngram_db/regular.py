"""Opening a file for reading only if it is a regular one.

A path can name a FIFO (whose open and reads wait for a writer for ever), a device
(``/dev/zero``: endless; ``/dev/stdin``: the language server's own input) or a link to one.
Whatever reads files that a repository holds (index-repo, next edits' workspace sites, a
``.gitignore`` outside git, a shared index's files) opens them here first.
"""

from __future__ import annotations

import errno
import os
import stat


class NotRegular(OSError):
    """A path that names no regular file: a FIFO, a device, a socket, a folder."""


def open_regular(path: str | os.PathLike[str], *, follow: bool = True) -> tuple[int, int]:
    """(fd, size) of ``path`` opened for reading, if it is a regular file; raises NotRegular
    (closing it) otherwise, OSError when it cannot be opened (ELOOP: a link, when not
    ``follow``). O_NONBLOCK: a FIFO's open does not wait for a writer; the fstat then refuses
    it, as it refuses a device (/dev/zero, /dev/stdin) before a byte is read."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(errno.EINVAL, "not a regular file", os.fspath(path))
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size
