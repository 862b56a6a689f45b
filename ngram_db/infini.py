"""Shared read-only indexes of many repositories, built with infini-gram's own indexer.

An organisation's code does not fit one laptop's memory (ngram_db/suffix.py holds its suffix
arrays in the server's process). ``index-repo --engine infini-gram --out DIR PATH...`` builds,
once (in CI), an index that every developer's server maps read-only through infini-gram's
C++ engine (ngram_db/infini_source.py). The layout of DIR:

    DIR/manifest.json                 model, tokenizer fingerprint, engine, one entry a shard
    DIR/shards/<name>/tokenized.0     u16 token ids, each file after a 0xFFFF separator
    DIR/shards/<name>/offset.0        u64 byte offset of each file (document)
    DIR/shards/<name>/table.0         the suffix array (infini-gram's Rust indexer)

One shard per repository: a repository whose files changed (by content: the same hash of
(path, sha256) pairs as the stores use) rebuilds its own shard and leaves the others; a
changed tokenizer rebuilds all. The files are chosen and read by the stores' own rules
(ngram_db/files.py: ignored, generated, secret, binary and oversized files are never indexed).

We tokenize with the default model's tokenizer ourselves and write ``tokenized.0`` and
``offset.0`` in infini-gram's v4 layout; its indexer (``python -m infini_gram.indexing``)
sees them, skips its own tokenizing step (which only knows gpt2/llama/olmo) and builds the
suffix array. It runs as a child process: it changes its working directory and calls exit().
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ngram_db.files import DEFAULT_MAX_FILE_BYTES, Skipped, list_candidates, read_text
from ngram_db.infini_check import ENGINE_WORDS, InfiniIndexError, plain_path, read_manifest_file
from ngram_db.store import content_hash
from ngram_db.tokenizer import as_tokenizer

FORMAT = "superposed-infini-gram/1"
MANIFEST = "manifest.json"
SHARDS = "shards"
# A document starts with this u16 (infini-gram's doc separator for u16 tokens).
DOC_SEPARATOR = 0xFFFF
# The engine reports a document's end as this token (its eos_token_id): above every id of a
# vocabulary that fits (ids must stay below it), so it is never a real token.
END_TOKEN = 0xFFFE
TOKENIZE_BATCH = 256  # files tokenized at a time (the Rust tokenizer uses every core)
Progress = Callable[[str], None]


@dataclass
class ShardSummary:
    """What building (or keeping) one repository's shard did."""

    name: str
    root: str
    commit: str | None
    content: str  # hash of the (path, sha256) pairs indexed: decides a rebuild
    files: int = 0
    tokens: int = 0
    bytes: int = 0  # on disk: tokens, offsets and suffix array
    skipped: dict[str, int] = field(default_factory=dict)
    tokenize_seconds: float = 0.0
    index_seconds: float = 0.0
    rebuilt: bool = True


@dataclass
class BuildSummary:
    out: str
    shards: list[ShardSummary]
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        shards = [s.__dict__ for s in self.shards]
        return {"out": self.out, "seconds": self.seconds, "shards": shards}

    def format(self) -> str:
        rebuilt = [s for s in self.shards if s.rebuilt]
        tokens = sum(s.tokens for s in self.shards)
        size = sum(s.bytes for s in self.shards)
        return (
            f"infini-gram index {self.out}: {len(rebuilt)} shard(s) built, "
            f"{len(self.shards) - len(rebuilt)} unchanged; {tokens:,} tokens, "
            f"{size / 1e6:.1f} MB on disk; {self.seconds:.1f} s"
        )


def read_manifest(out: Path) -> dict[str, Any] | None:
    """The index's manifest, None when there is none; raises InfiniIndexError if unreadable
    (also when it is no regular file: a FIFO would hang the reader, /dev/zero fill memory)."""
    path = out / MANIFEST
    data = read_manifest_file(path)
    if data is not None and data.get("format") != FORMAT:
        raise InfiniIndexError(f"{path} is not a {FORMAT} manifest")
    return data


def _write_manifest(out: Path, manifest: dict[str, Any]) -> None:
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, out / MANIFEST)  # readers see the old manifest or the new, whole


def _commit(root: Path) -> str | None:
    """The repository's HEAD commit (None: not a git work tree, or git missing)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=20, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def shard_name(root: Path) -> str:
    """A repository's shard: its folder's name (a safe file name)."""
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in root.resolve().name)
    return name.strip(".") or "root"


def _read_repo(
    root: Path,
    max_file_bytes: int,
    skip_secrets: bool,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """(relative path, text) of every file the stores' rules index, and the skip counts."""
    candidates, skipped = list_candidates(root, include, exclude, skip_secrets)
    texts: list[tuple[str, str]] = []
    for cand in candidates:
        try:
            texts.append((cand.rel, read_text(cand, root.resolve(), max_file_bytes, skip_secrets)))
        except Skipped as why:
            skipped[str(why)] = skipped.get(str(why), 0) + 1
    return texts, skipped


def _content(texts: Sequence[tuple[str, str]]) -> str:
    digest = hashlib.sha256()
    for rel, text in texts:
        digest.update(f"{rel}\0{content_hash(text)}\n".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:16]


def _write_tokens(folder: Path, tokenizer: Any, texts: Sequence[tuple[str, str]]) -> int:
    """tokenized.0 and offset.0 in infini-gram's layout; returns the tokens written."""
    tokens = 0
    offset = 0
    with open(folder / "tokenized.0", "wb") as ds, open(folder / "offset.0", "wb") as od:
        for start in range(0, len(texts), TOKENIZE_BATCH):
            batch = [text for _, text in texts[start : start + TOKENIZE_BATCH]]
            for ids in tokenizer.encode_batch(batch):
                if len(ids) and int(ids.max()) >= END_TOKEN:
                    raise InfiniIndexError(
                        f"token id {int(ids.max())} does not fit: ids must be below {END_TOKEN}"
                    )
                doc = np.empty(len(ids) + 1, dtype=np.uint16)
                doc[0], doc[1:] = DOC_SEPARATOR, ids
                od.write(np.array([offset], dtype=np.uint64).tobytes())
                ds.write(doc.tobytes())
                offset += doc.nbytes
                tokens += len(ids)
    return tokens


def _plain_folder() -> str:
    """A new empty temporary folder whose path infini-gram's indexer cannot misread.

    The indexer derives ``table.0``'s path by replacing ``tokenized`` anywhere in the path of
    ``tokenized.0``, and passes paths to shell commands unquoted: a path with a file word
    (ENGINE_WORDS) or a space broke the build (``/mnt/portable disk/...``) or wrote the table
    elsewhere (``/srv/tokenized/...``). So it only sees paths under this folder."""
    for base in (None, "/tmp"):
        for _ in range(4):
            path = tempfile.mkdtemp(prefix="superposed-index-", dir=base)
            if plain_path(path):
                return path
            os.rmdir(path)
    raise InfiniIndexError(
        f"no temporary folder with a plain path ({tempfile.gettempdir()!r} holds one of "
        f"{', '.join(ENGINE_WORDS)} or a character a shell splits): set TMPDIR to a folder "
        "whose path has only letters, digits and - _ . /"
    )


def _suffix_array(folder: Path, cpus: int, mem_gib: int) -> None:
    """table.0 from tokenized.0, by infini-gram's indexer (a child process), through links
    from a plain folder (``_plain_folder``) to ``folder`` and a scratch folder beside it."""
    with tempfile.TemporaryDirectory(prefix="infini-", dir=folder.parent) as scratch:
        links = _plain_folder()
        try:
            os.symlink(folder, os.path.join(links, "shard"))
            os.symlink(scratch, os.path.join(links, "work"))
            (Path(scratch) / "data").mkdir()  # the raw-text folder: unused (tokenized.0 exists)
            command = [
                sys.executable, "-m", "infini_gram.indexing", "--data_dir", f"{links}/work/data",
                "--save_dir", f"{links}/shard", "--temp_dir", f"{links}/work/tmp",
                "--token_dtype", "u16", "--cpus", str(cpus), "--mem", str(mem_gib),
                "--ulimit", "1024",
            ]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, check=False)
        finally:
            shutil.rmtree(links, ignore_errors=True)  # the links, not what they point to
    if done.returncode != 0 or not (folder / "table.0").exists():
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        raise InfiniIndexError(f"infini-gram's indexer failed: {' / '.join(tail)}")


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def build_index(
    out: Path,
    roots: Sequence[Path],
    tokenizer: Any,
    model: str,
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    skip_secrets: bool = True,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    cpus: int | None = None,
    mem_gib: int = 4,
    progress: Progress | None = None,
) -> BuildSummary:
    """Build or refresh the index at ``out`` with one shard per root (see the module doc).

    A shard whose repository's indexed content is unchanged, with the same tokenizer, is
    kept; shards of repositories not named stay as they are. ``include``/``exclude`` are
    index-repo's globs, applied in every repository as the stores apply them.
    """
    say = progress or (lambda _: None)
    started = time.perf_counter()
    tok = as_tokenizer(tokenizer)
    names = [shard_name(r) for r in roots]
    if len(set(names)) != len(names):
        raise InfiniIndexError(f"two repositories would share a shard name: {names}")
    for root in roots:
        if not root.is_dir():
            raise InfiniIndexError(f"{root} is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(out)
    if manifest is None or manifest.get("tokenizer") != tok.fingerprint:
        if manifest is not None:
            old = manifest.get("tokenizer")
            say(f"tokenizer changed ({old} -> {tok.fingerprint}): every shard is rebuilt")
            shutil.rmtree(out / SHARDS, ignore_errors=True)
        manifest = {"format": FORMAT, "tokenizer": tok.fingerprint, "shards": {}}
    from importlib.metadata import version

    manifest.update(
        model=model, engine=f"infini-gram {version('infini-gram')}", token_dtype="u16",
        end_token=END_TOKEN,
    )  # fmt: skip
    (out / SHARDS).mkdir(exist_ok=True)
    summaries: list[ShardSummary] = []
    for i, (root, name) in enumerate(zip(roots, names, strict=True), 1):
        t0 = time.perf_counter()
        texts, skipped = _read_repo(root, max_file_bytes, skip_secrets, include, exclude)
        summary = ShardSummary(name, str(root.resolve()), _commit(root), _content(texts))
        summary.files, summary.skipped = len(texts), skipped
        known = manifest["shards"].get(name)
        folder = out / SHARDS / name
        if known and known.get("content") == summary.content and (folder / "table.0").exists():
            summary.rebuilt = False
            summary.tokens, summary.bytes = known["tokens"], known["bytes"]
            say(f"[{i}/{len(roots)}] {name}: unchanged ({summary.files} files)")
            manifest["shards"][name] = {**known, "commit": summary.commit, "root": summary.root}
            summaries.append(summary)
            continue
        if not texts:
            shutil.rmtree(folder, ignore_errors=True)
            manifest["shards"].pop(name, None)
            say(f"[{i}/{len(roots)}] {name}: no file to index")
            summaries.append(summary)
            continue
        staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=out / SHARDS))
        os.chmod(staging, 0o755)  # shared: readable by every developer (mkdtemp: 0o700)
        try:
            summary.tokens = _write_tokens(staging, tok, texts)
            summary.tokenize_seconds = time.perf_counter() - t0
            say(f"[{i}/{len(roots)}] {name}: {summary.files} files, {summary.tokens:,} "
                f"tokens read in {summary.tokenize_seconds:.1f} s; suffix array...")  # fmt: skip
            t1 = time.perf_counter()
            # a thread per megabyte at most: its concat step panics on parts of a few bytes
            size = (staging / "tokenized.0").stat().st_size
            threads = max(1, min(cpus or os.cpu_count() or 1, size // 1_000_000))
            _suffix_array(staging, threads, mem_gib)
            summary.index_seconds = time.perf_counter() - t1
            summary.bytes = _folder_bytes(staging)
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(staging, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        say(f"[{i}/{len(roots)}] {name}: built in {summary.index_seconds:.1f} s, "
            f"{summary.bytes / 1e6:.1f} MB")  # fmt: skip
        manifest["shards"][name] = {
            k: v for k, v in summary.__dict__.items() if k not in ("name", "rebuilt")
        }
        _write_manifest(out, manifest)  # after each shard: an interrupted run keeps them
        summaries.append(summary)
    _write_manifest(out, manifest)
    return BuildSummary(str(out), summaries, time.perf_counter() - started)
