"""Where stores live: one per codebase under the user's cache directory, one per user."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import platformdirs

from superposed.embedded import cache_dir

APP = "superposed-lsp"


cache_root = cache_dir  # one cache folder for models and stores


def data_root() -> Path:
    """The user data directory (``SUPERPOSED_DATA_DIR`` overrides)."""
    override = os.environ.get("SUPERPOSED_DATA_DIR")
    return Path(override) if override else Path(platformdirs.user_data_dir(APP))


def codebase_db_path(workspace_root: str | os.PathLike[str]) -> Path:
    """The codebase store of a workspace: cache/ngrams/<folder name>-<hash of its path>.sqlite."""
    root = Path(workspace_root).expanduser().resolve()
    digest = hashlib.sha256(os.fsencode(root)).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", root.name)[:40] or "root"
    return cache_root() / "ngrams" / f"{name}-{digest}.sqlite"


def user_db_path() -> Path:
    """The per-user store that accumulates what the user writes across codebases."""
    return data_root() / "ngrams" / "user.sqlite"
