"""index-repo --knn as a real process, on a tiny repository with a tiny model folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ngram_db.knn_store import KnnStore, knn_path
from tests.runner_harness import tiny, tiny_tokenizer

pytestmark = pytest.mark.slow


def index_repo(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    return subprocess.run(
        [sys.executable, "-m", "ngram_db.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-model")
    tiny().save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return folder


def test_index_repo_knn_stores_every_position_of_the_indexed_files(
    model_dir: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "b.py").write_text("import os\nprint(os.getcwd())\n")
    db = tmp_path / "s.db"
    done = index_repo(repo, "--db", db, "--model", model_dir, "--knn", "--knn-dims", "8", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)["knn"]
    held = KnnStore.load(knn_path(db))
    tokens = sum(len(tiny_tokenizer()(p.read_text())["input_ids"]) for p in repo.glob("*.py"))
    assert summary["positions"] == len(held) == tokens - 2  # the last token of each file has none
    assert held.projection.dims == 8 and held.keys.dtype == np.float16
    assert {Path(p).name for p, _ in held.files} == {"a.py", "b.py"}
    again = index_repo(repo, "--db", db, "--model", model_dir, "--knn", "--knn-dims", "8", "--json")
    assert json.loads(again.stdout)["knn"]["ran"] == 0  # unchanged files are not run again


def test_bad_knn_dims_say_what_is_allowed(model_dir: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n")
    done = index_repo(repo, "--db", tmp_path / "s.db", "--model", model_dir, "--knn",
                      "--knn-dims", "0")  # fmt: skip
    assert done.returncode == 1 and "--knn-dims must lie in 1..1024" in done.stderr
