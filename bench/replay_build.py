"""Freeze the repository-history replay's tasks into bench/data/replay.json.gz.

For each repository (a bare git mirror, as the ``fetch`` tool leaves under
/work/.mirror/<owner>+<name>/repo): the index snapshot is the last first-parent commit before
the cutoff date; the targets are lines that later (non-merge) commits added to .py files, kept
by bench/replay_targets.py's rules (code a user would type, not moved), each with two cursor
positions: after the indentation, and mid-line. The document is the post-commit file, stored
once per blob.

The frozen file holds the snapshots as file texts (the .py files that ``index-repo`` would
index, up to ``MAX_FILE_BYTES``), the documents, the tasks, the split and the repositories'
licence texts, so ``bench/replay.py`` runs without network or git.

Block tasks (issue 23) are frozen apart, into bench/data/replay_blocks.json.gz, so the line
tasks and their documents stay byte-identical (committed results refer to them); a block is
bench/replay_targets.py's run of added lines. The task's document is the post-commit file;
the runner removes the run and puts the cursor after its first line's indentation
(``block-start``); a second cursor (``opener``) sits at the end of the line before the run when
that line opens a block (ends with ``:``). The blocks file holds no snapshot texts: it names the
line file whose snapshots it shares (the same commits), and carries the licence texts again.

    python -m bench.replay_build [--mirrors /work/.mirror] [--out bench/data/replay.json.gz]
    python -m bench.replay_build --blocks [--out bench/data/replay_blocks.json.gz]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.replay_targets import (
    Added,
    blocks_of,
    mid_cursor,
    opener_cursor,
    parse_diff,
    targets_of,
)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "data" / "replay.json.gz"
BLOCKS_OUT = ROOT / "bench" / "data" / "replay_blocks.json.gz"
FORMAT = 1
BLOCKS_FORMAT = 1


@dataclass(frozen=True)
class Repo:
    """One replayed repository and its part of the split."""

    name: str  # owner/name on GitHub
    split: str  # validation | test
    cutoff: str  # ISO date: the snapshot is the last first-parent commit before it
    until: str  # ISO date: targets come from commits in [cutoff, until)
    targets: int  # how many targets to draw
    licenses: tuple[str, ...]  # the licence files' paths in the repository


# Cutoffs after 2024-07-01 (the default model's training data ends before). Split by
# repository: all tuning on rich, the report on flask and black.
REPOS = (
    Repo("Textualize/rich", "validation", "2025-01-01", "2027-01-01", 100, ("LICENSE",)),
    Repo("pallets/flask", "test", "2025-01-01", "2027-01-01", 50, ("LICENSE.txt",)),
    Repo("psf/black", "test", "2025-01-01", "2027-01-01", 50, ("LICENSE", "src/blib2to3/LICENSE")),
)
MAX_FILE_BYTES = 200_000  # generated data (black's profiling/*_huge.py) stays out
MAX_PER_COMMIT = 3  # targets drawn from one commit at most: many commits, not one big one
SEED = 13
BLOCKS_PER_REPO = {"validation": 50, "test": 50}  # a config over the test split: ~5 min here

# ----- git --------------------------------------------------------------------------------


class Git:
    """Read-only access to one bare mirror."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir

    def __call__(self, *args: str) -> str:
        out = subprocess.run(
            ["git", f"--git-dir={self.git_dir}", *args], capture_output=True, check=True
        )
        return out.stdout.decode("utf-8", errors="replace")

    def blobs(self, rev: str) -> Iterator[tuple[str, str, int]]:
        """(path, blob id, size) of each file of a commit's tree."""
        for row in self("ls-tree", "-r", "-l", rev).splitlines():
            meta, path = row.split("\t", 1)
            _mode, kind, blob, size = meta.split()
            if kind == "blob":
                yield path, blob, int(size)

    def text(self, rev: str, path: str) -> str | None:
        """A file's text at a revision; None when missing or not UTF-8."""
        out = subprocess.run(
            ["git", f"--git-dir={self.git_dir}", "show", f"{rev}:{path}"], capture_output=True
        )
        if out.returncode != 0:
            return None
        try:
            return out.stdout.decode("utf-8")
        except UnicodeDecodeError:
            return None


def snapshot(git: Git, repo: Repo) -> tuple[str, str, dict[str, str]]:
    """The snapshot commit, its date and its .py files (path -> text)."""
    commit = git("rev-list", "-1", "--first-parent", f"--before={repo.cutoff}", "HEAD").strip()
    date = git("log", "-1", "--format=%cI", commit).strip()
    files: dict[str, str] = {}
    for path, _blob, size in git.blobs(commit):
        if path.endswith(".py") and size <= MAX_FILE_BYTES:
            text = git.text(commit, path)
            if text is not None:
                files[path] = text
    return commit, date, files


def commits(
    git: Git, repo: Repo
) -> Iterator[tuple[str, str, list[Added], set[str], dict[str, str]]]:
    """Each non-merge commit in [cutoff, until), oldest first: its id, date, added lines,
    removed texts and the post-commit text of each file it added lines to."""
    revs = git(
        "rev-list", "--reverse", "--no-merges", f"--since={repo.cutoff}",
        f"--until={repo.until}", "HEAD",
    ).split()  # fmt: skip
    for commit in revs:
        parents = git("rev-list", "--parents", "-1", commit).split()[1:]
        if len(parents) != 1:
            continue
        diff = git("diff", "-U0", "-M", "--no-color", parents[0], commit, "--", "*.py")
        added, removed = parse_diff(diff)
        files: dict[str, str] = {}
        for path in {a.path for a in added}:
            text = git.text(commit, path)
            if text is not None and len(text.encode()) <= MAX_FILE_BYTES:
                files[path] = text
        date = git("log", "-1", "--format=%cI", commit).strip()
        yield commit, date, added, removed, files


def candidates(git: Git, repo: Repo) -> list[dict[str, Any]]:
    """Every target of every non-merge commit in [cutoff, until), oldest commit first."""
    out: list[dict[str, Any]] = []
    for commit, date, added, removed, files in commits(git, repo):
        for a in targets_of(added, removed, files):
            out.append({"commit": commit, "date": date, **asdict(a), "document": files[a.path]})
    return out


def block_candidates(git: Git, repo: Repo) -> list[dict[str, Any]]:
    """Every block task of every non-merge commit in [cutoff, until), oldest commit first."""
    out: list[dict[str, Any]] = []
    for commit, date, added, removed, files in commits(git, repo):
        for b in blocks_of(added, removed, files):
            out.append(
                {"commit": commit, "date": date, "path": b.path, "line": b.line,
                 "lines": list(b.lines), "document": files[b.path]}
            )  # fmt: skip
    return out


def draw(cands: list[dict[str, Any]], n: int, seed: int = SEED) -> list[dict[str, Any]]:
    """n targets in a fixed shuffled order, at most ``MAX_PER_COMMIT`` from one commit."""
    order = list(cands)
    random.Random(seed).shuffle(order)
    per_commit: dict[str, int] = defaultdict(int)
    out: list[dict[str, Any]] = []
    for c in order:
        if per_commit[c["commit"]] < MAX_PER_COMMIT:
            per_commit[c["commit"]] += 1
            out.append(c)
        if len(out) == n:
            break
    return out


def blob_id(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def build(mirrors: Path) -> dict[str, Any]:
    data: dict[str, Any] = {
        "format": FORMAT,
        "about": __doc__.split("\n\n")[0],
        "split": {s: [r.name for r in REPOS if r.split == s] for s in ("validation", "test")},
        "repos": {},
        "documents": {},
        "tasks": [],
    }
    for repo in REPOS:
        git = Git(mirrors / repo.name.replace("/", "+") / "repo")
        commit, date, files = snapshot(git, repo)
        licenses = {path: git.text(commit, path) or "" for path in repo.licenses}
        cands = candidates(git, repo)
        chosen = draw(cands, repo.targets)
        data["repos"][repo.name] = {
            **asdict(repo),
            "url": f"https://github.com/{repo.name}",
            "snapshot": commit,
            "snapshot_date": date,
            "license_texts": licenses,
            "candidates": len(cands),
            "files": files,
        }
        for n, c in enumerate(chosen):
            doc = blob_id(c["document"])
            data["documents"][doc] = c["document"]
            data["tasks"].append(
                {
                    "id": f"{repo.name}#{n}",
                    "repo": repo.name,
                    "split": repo.split,
                    "commit": c["commit"],
                    "date": c["date"],
                    "path": c["path"],
                    "line": c["line"],
                    "text": c["text"],
                    "document": doc,
                    "cursors": {
                        "line-start": len(c["text"]) - len(c["text"].lstrip()),
                        "mid-line": mid_cursor(c["text"]),
                    },
                }
            )
        print(
            f"{repo.name}: snapshot {commit[:10]} ({date}), {len(files)} files, "
            f"{len(cands)} candidate targets, {len(chosen)} drawn",
            file=sys.stderr,
        )
    return data


def build_blocks(mirrors: Path, lines_file: Path = OUT) -> dict[str, Any]:
    """The block tasks: the same repositories, snapshots and split as the line file's."""
    lines = json.loads(gzip.decompress(lines_file.read_bytes()))
    data: dict[str, Any] = {
        "format": BLOCKS_FORMAT,
        "about": "Block tasks of the repository-history replay (issue 23); snapshots: lines_file",
        "lines_file": lines_file.relative_to(ROOT).as_posix()
        if lines_file.is_relative_to(ROOT)
        else str(lines_file),
        "lines_sha256": hashlib.sha256(lines_file.read_bytes()).hexdigest(),
        "split": {s: [r.name for r in REPOS if r.split == s] for s in ("validation", "test")},
        "repos": {},
        "documents": {},
        "tasks": [],
    }
    for repo in REPOS:
        git = Git(mirrors / repo.name.replace("/", "+") / "repo")
        frozen = lines["repos"][repo.name]
        commit = git("rev-list", "-1", "--first-parent", f"--before={repo.cutoff}", "HEAD").strip()
        if commit != frozen["snapshot"]:
            raise SystemExit(f"{repo.name}: snapshot {commit} is not the line file's")
        head = git("rev-parse", "HEAD").strip()
        cands = block_candidates(git, repo)
        chosen = draw(cands, BLOCKS_PER_REPO[repo.split])
        data["repos"][repo.name] = {
            **{k: frozen[k] for k in ("name", "split", "cutoff", "until", "url", "licenses")},
            "snapshot": commit,
            "snapshot_date": frozen["snapshot_date"],
            "head": head,
            "license_texts": frozen["license_texts"],
            "candidates": len(cands),
        }
        for n, c in enumerate(chosen):
            doc = blob_id(c["document"])
            data["documents"][doc] = c["document"]
            rows = c["document"].split("\n")
            first = c["lines"][0]
            opener = opener_cursor(rows, c["line"])
            data["tasks"].append(
                {
                    "id": f"{repo.name}#b{n}",
                    "repo": repo.name,
                    "split": repo.split,
                    "commit": c["commit"],
                    "date": c["date"],
                    "path": c["path"],
                    "line": c["line"],
                    "lines": c["lines"],
                    "document": doc,
                    "cursors": {
                        "block-start": len(first) - len(first.lstrip()),
                        "opener": None if opener is None else [c["line"] - 1, opener],
                    },
                }
            )
        print(
            f"{repo.name}: snapshot {commit[:10]}, head {head[:10]}, {len(cands)} candidate "
            f"blocks, {len(chosen)} drawn",
            file=sys.stderr,
        )
    return data


def write_frozen(data: dict[str, Any], out: Path) -> None:
    """The tasks as gzipped JSON, keys sorted and no timestamp: the same mirrors build the same
    bytes (the file's sha256 is what a run records)."""
    raw = json.dumps(data, separators=(",", ":"), sort_keys=True).encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(gzip.compress(raw, compresslevel=9, mtime=0))
    print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB)", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--out", type=Path, help=f"default: {OUT.name}, or {BLOCKS_OUT.name}")
    parser.add_argument("--blocks", action="store_true", help="the block tasks (issue 23)")
    args = parser.parse_args(argv)
    args.out = args.out or (BLOCKS_OUT if args.blocks else OUT)
    write_frozen(build_blocks(args.mirrors) if args.blocks else build(args.mirrors), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
