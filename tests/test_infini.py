"""Shared infini-gram indexes: building (ngram_db/infini.py, index-repo --engine infini-gram)
and matching (ngram_db/infini_source.py) on a small corpus made here.

The index keeps the stores' file rules, records its tokenizer and shards, rebuilds only the
changed repository's shard, and matches as the in-process suffix arrays do (same longest
length and next-token counts); a missing or mismatched index is a clear error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from ngram_db import cli as index_repo_cli
from ngram_db.infini import MANIFEST, SHARDS, InfiniIndexError, build_index
from ngram_db.infini_source import InfiniSource
from ngram_db.suffix import SuffixIndex
from ngram_db.tokenizer import ByteTokenizer

pytestmark = pytest.mark.slow  # every test builds an index with infini-gram's indexer, a process

BYTES = ByteTokenizer()
ALPHA = {
    "client.py": "def fetch(url, retries=3):\n    return session.get(url, timeout=10)\n",
    "util.py": "def fetch(url, retries=3):\n    return session.post(url, timeout=30)\n",
    ".env": "API_TOKEN=sk-live-0000\n",  # a secret file: never indexed
    "logo.png": "\x89PNG not text",  # binary by its name
    "big.py": "x = 1\n" * 400,  # oversized under the 1,000 bytes the tests allow
}
BETA = {"deploy.py": "def deploy(env):\n    run('kubectl apply -f ' + env)\n"}


def _repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def _ids(text: str) -> list[int]:
    return BYTES.encode_batch([text])[0].tolist()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    base = tmp_path_factory.mktemp("infini")
    roots = [_repo(base / "alpha", ALPHA), _repo(base / "beta", BETA)]
    build_index(base / "index", roots, BYTES, "bytes", max_file_bytes=1_000, cpus=1, mem_gib=1)
    return base / "index", roots


def test_the_manifest_records_tokenizer_model_and_shards(built: tuple[Path, list[Path]]) -> None:
    index, _ = built
    manifest = json.loads((index / MANIFEST).read_text())
    assert manifest["tokenizer"] == BYTES.fingerprint
    assert manifest["model"] == "bytes"
    assert manifest["engine"].startswith("infini-gram ")
    assert sorted(manifest["shards"]) == ["alpha", "beta"]
    alpha = manifest["shards"]["alpha"]
    assert alpha["files"] == 2 and alpha["tokens"] == len(ALPHA["client.py"] + ALPHA["util.py"])
    assert alpha["skipped"] == {"secret": 1, "binary": 1, "too large": 1}
    for name in ("alpha", "beta"):
        assert {p.name for p in (index / SHARDS / name).iterdir()} == {
            "tokenized.0", "offset.0", "table.0",
        }  # fmt: skip


def test_secret_binary_and_oversized_files_are_not_in_the_index(
    built: tuple[Path, list[Path]],
) -> None:
    source = InfiniSource([built[0]], BYTES.fingerprint)
    for text in ("API_TOKEN=sk-live", "PNG not text", "x = 1\nx = 1\nx = 1\n"):
        found = source.match(_ids(text))
        assert found is None or found.length < len(text) - 2, text


def test_matches_as_the_in_process_suffix_arrays(built: tuple[Path, list[Path]]) -> None:
    source = InfiniSource([built[0]], BYTES.fingerprint)
    texts = [ALPHA["client.py"], ALPHA["util.py"], BETA["deploy.py"]]
    reference = SuffixIndex([np.array(_ids(t)) for t in texts])
    contexts = [
        "def fetch(url, retries=3):\n    return session.",  # two continuations
        "zzz\ndef deploy(env):\n    run('kub",  # one, after an unknown prefix
        "    return session.get(url, time",
        "qqqq",  # nothing
    ]
    for context in contexts:
        ours, theirs = source.match(_ids(context), 8), reference.match(_ids(context), 8)
        if theirs is None:
            assert ours is None
            continue
        assert ours is not None
        assert (ours.length, ours.next_counts) == (theirs.length, theirs.next_counts), context
        assert ours.continuation[0] in ours.next_counts
    found = source.match(_ids(contexts[0]), follow=3, others=2)
    assert found is not None
    assert sorted([bytes(found.continuation), *map(bytes, found.others)]) == [b"get", b"pos"]
    assert len(source) == sum(len(t) for t in texts)


def test_a_suffix_only_a_file_end_follows_continues_nothing(
    built: tuple[Path, list[Path]],
) -> None:
    source = InfiniSource([built[0]], BYTES.fingerprint)
    found = source.match(_ids("ply -f ' + env)\n"))  # the end of deploy.py
    # the whole context ends deploy.py: the match is a shorter suffix that goes on
    assert found is not None and found.length < len("ply -f ' + env)\n")
    assert 0xFFFE not in found.next_counts


def test_a_changed_repository_rebuilds_only_its_shard(tmp_path: Path) -> None:
    roots = [_repo(tmp_path / "alpha", {"a.py": "x = 1\n"}), _repo(tmp_path / "beta", BETA)]
    index = tmp_path / "index"
    build_index(index, roots, BYTES, "bytes", cpus=1, mem_gib=1)
    table = index / SHARDS / "alpha" / "table.0"
    before = os.stat(table).st_ino
    (roots[1] / "deploy.py").write_text("def deploy(env, dry_run=False):\n    pass\n")
    summary = build_index(index, roots, BYTES, "bytes", cpus=1, mem_gib=1)
    assert [(s.name, s.rebuilt) for s in summary.shards] == [("alpha", False), ("beta", True)]
    assert os.stat(table).st_ino == before
    found = InfiniSource([index], BYTES.fingerprint).match(_ids("def deploy(env, dry"))
    assert found is not None and found.length == len("def deploy(env, dry")
    other = ByteTokenizer(offset=1)  # another tokenizer: every shard is rebuilt
    summary = build_index(index, roots, other, "bytes+1", cpus=1, mem_gib=1)
    assert all(s.rebuilt for s in summary.shards)


def test_missing_or_mismatched_indexes_are_clear_errors(
    built: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    with pytest.raises(InfiniIndexError, match="does not exist"):
        InfiniSource([tmp_path / "nowhere"], BYTES.fingerprint)
    with pytest.raises(InfiniIndexError, match="no manifest"):
        InfiniSource([tmp_path], BYTES.fingerprint)
    with pytest.raises(InfiniIndexError, match="another tokenizer"):
        InfiniSource([built[0]], ByteTokenizer(offset=1).fingerprint)
    broken = tmp_path / "broken"
    (broken / SHARDS / "alpha").mkdir(parents=True)
    manifest = json.loads((built[0] / MANIFEST).read_text())
    (broken / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(InfiniIndexError, match="lacks"):
        InfiniSource([broken], BYTES.fingerprint)


def test_index_repo_builds_with_the_infini_gram_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(index_repo_cli, "load_tokenizer", lambda model: ByteTokenizer())
    roots = [_repo(tmp_path / "alpha", {"a.py": "x = 1\n"}), _repo(tmp_path / "beta", BETA)]
    out = tmp_path / "index"
    argv = ["--engine", "infini-gram", "--out", str(out), *map(str, roots)]
    assert index_repo_cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "[1/2] alpha" in printed and "2 shard(s) built" in printed
    assert sorted(json.loads((out / MANIFEST).read_text())["shards"]) == ["alpha", "beta"]
    with pytest.raises(SystemExit):  # several paths only with the infini-gram engine
        index_repo_cli.main([*map(str, roots)])
    with pytest.raises(SystemExit):  # --out is required
        index_repo_cli.main(["--engine", "infini-gram", str(roots[0])])


def test_index_repo_keeps_its_include_and_exclude_globs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--exclude was silently ignored with --engine infini-gram: an excluded folder (say a
    vendored copy of another project) went into the shared index."""
    monkeypatch.setattr(index_repo_cli, "load_tokenizer", lambda model: ByteTokenizer())
    files = {"app.py": "x = 1\n", "notes.md": "# notes\n", "vendor/lib.py": "y = 2\n"}
    root = _repo(tmp_path / "alpha", {})
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    out = tmp_path / "index"
    # The paths may also come after the options (argparse stopped at them: parse_intermixed_args).
    argv = ["--engine", "infini-gram", "--out", str(out), "--exclude", "vendor/**", str(root)]
    assert index_repo_cli.main([*argv, "--include", "*.py"]) == 0
    shard = json.loads((out / MANIFEST).read_text())["shards"]["alpha"]
    assert shard["files"] == 1  # app.py: not the excluded vendor/, not the non-.py notes
