"""The command line: ``superposed-lsp complete`` and ``python -m lsp_server.demo``.

Run as real subprocesses on the tiny random model (``SUPERPOSED_TEST_TINY_MODEL=1``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from superposed.embedded import cache_dir

pytestmark = pytest.mark.slow  # every test runs the CLI as a process that loads a model

SOURCE = "import os\n\n\ndef read(path):\n    return open(path).read()\n\n\ndef main():\n    \n"


def env(tmp: Path) -> dict[str, str]:
    """The tiny model; stores under ``tmp``; the converted tokenizer shared through a link."""
    cache = tmp / "cache"
    if not cache.exists():
        cache.mkdir()
        (cache / "models").symlink_to(cache_dir() / "models", target_is_directory=True)
    return {
        **os.environ,
        "SUPERPOSED_TEST_TINY_MODEL": "1",
        "SUPERPOSED_CACHE_DIR": str(cache),
        "SUPERPOSED_DATA_DIR": str(tmp / "data"),
    }


def cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lsp_server.cli", *args],
        capture_output=True,
        text=True,
        env=env(tmp),
        timeout=300,
    )


def test_complete_prints_k_drafts_as_json(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".git").mkdir()
    path = repo / "main.py"
    path.write_text(SOURCE)
    # Before indexing: no codebase store is used.
    done = cli(tmp_path, "complete", str(path), "--line", "8", "--col", "4", "-k", "3", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["k"] == 3 and result["model"] == "tiny-random"
    assert len(result["drafts"]) == 3
    assert all(isinstance(d["text"], str) and d["text"].strip() for d in result["drafts"])
    assert all(isinstance(d["score"], float) for d in result["drafts"])
    assert {"prompt", "decode", "total"} <= set(result["timing_ms"])
    assert result["codebase_store"] is None

    # After index-repo, the repository's codebase store is found and used.
    indexed = subprocess.run(
        [sys.executable, "-m", "ngram_db.cli", str(repo)],
        capture_output=True,
        text=True,
        env=env(tmp_path),
        timeout=300,
    )
    assert indexed.returncode == 0, indexed.stderr
    done = cli(tmp_path, "complete", str(path), "--line", "8", "--col", "4", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["codebase_store"] == str(repo.resolve())


def test_complete_reports_a_bad_position(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_text(SOURCE)
    done = cli(tmp_path, "complete", str(path), "--line", "99", "--col", "0")
    assert done.returncode == 2
    assert "--line 99 is outside the file" in done.stderr
    assert done.stdout == ""


def test_demo_prints_drafts_for_each_method(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lsp_server.demo", "--model", "tiny-random", "-k", "3", "--json"],
        capture_output=True,
        text=True,
        env=env(tmp_path),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["index"]["indexed"] >= 5 and report["index"]["tokens"] > 1000
    runs = {(r["cursor"], r["run"]) for r in report["results"]}
    assert len(runs) == 6
    for result in report["results"]:
        assert result["drafts"], result
        assert result["timing_ms"]["total"] > 0
        expected = 1 if result["run"] == "greedy" else 3
        assert len(result["drafts"]) <= expected
