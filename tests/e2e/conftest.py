"""Fixtures shared by the end-to-end tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_lsp import SAMPLE


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A repository root with one Python file (tests that need another layout define theirs)."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".git").mkdir()  # a repository root, as the stores expect
    (root / "app.py").write_text(SAMPLE)
    return root
