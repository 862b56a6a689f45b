"""Fixtures shared by the end-to-end tests (their plain helpers: lsp_harness.py, index_harness.py,
nvim_harness.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.index_harness import make_tokenizer
from tests.e2e.lsp_harness import SAMPLE


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A repository root with one Python file (tests that need another layout define theirs)."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".git").mkdir()  # a repository root, as the stores expect
    (root / "app.py").write_text(SAMPLE)
    return root


@pytest.fixture()
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, dict[str, str]]:
    """For index-repo: a project (one module, a README, a .env), a byte-level tokenizer and the
    environment that keeps the stores under tmp_path."""
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "app.py").write_text("def app():\n    return 42\n")
    (project / "README.md").write_text("# project\n")
    (project / ".env").write_text("SECRET=1\n")
    model = make_tokenizer(tmp_path / "tok")
    monkeypatch.setenv("SUPERPOSED_CACHE_DIR", str(tmp_path / "cache"))  # here and in the child
    return project, model, dict(os.environ)
