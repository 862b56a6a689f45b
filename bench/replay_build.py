"""Freeze the repository-history replay's tasks into bench/data/replay.json.gz.

For each repository (a bare git mirror, as the ``fetch`` tool leaves under
/work/.mirror/<owner>+<name>/repo): the index snapshot is the last first-parent commit before
the cutoff date; the targets are lines that later (non-merge) commits added to .py files. A
target is kept when it is code a user would type: not blank, not a comment, not inside a
docstring or other multi-line string, not only brackets and punctuation, and not moved (its
text was not removed elsewhere in the same commit). Each target has two cursor positions:
after the indentation, and mid-line (the end of the first word that ends at or after the first
third of the line's text). The document is the post-commit file, stored once per blob.

The frozen file holds the snapshots as file texts (the .py files that ``index-repo`` would
index, up to ``MAX_FILE_BYTES``), the documents, the tasks, the split and the repositories'
licence texts, so ``bench/replay.py`` runs without network or git.

Block tasks (issue 23) are frozen apart, into bench/data/replay_blocks.json.gz, so the line
tasks and their documents stay byte-identical (committed results refer to them). A block is a
maximal run of at least ``MIN_BLOCK_LINES`` consecutive added non-blank lines of one file in
one commit, whose first line is code (as a line target's is) and which is not moved code (at
most half its lines' texts were removed elsewhere in the commit, the line targets' rule over the
run). The task's document is the post-commit file; the runner removes the run and puts the
cursor after its first line's indentation (``block-start``); a second cursor (``opener``) sits
at the end of the line before the run when that line opens a block (ends with ``:``). The
blocks file holds no snapshot texts: it names the line file whose snapshots it shares (the same
commits), and carries the licence texts again.

    python -m bench.replay_build [--mirrors /work/.mirror] [--out bench/data/replay.json.gz]
    python -m bench.replay_build --blocks [--out bench/data/replay_blocks.json.gz]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import random
import re
import subprocess
import sys
import tokenize
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

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
MAX_ADDED_PER_FILE = 300  # more in one file and commit: generated tables (rich's unicode data)
MAX_PER_COMMIT = 3  # targets drawn from one commit at most: many commits, not one big one
MIN_MID_REST = 3  # a mid-line cursor must leave at least this many characters to type
SEED = 13
MIN_BLOCK_LINES = 2
BLOCKS_PER_REPO = {"validation": 50, "test": 50}  # a config over the test split: ~5 min here
WORD_END = re.compile(r"\w+")


# ----- which added lines are targets (pure functions, tested on tiny inputs) ------------------


def string_interior_lines(text: str) -> set[int] | None:
    """0-based lines that are docstrings, standalone strings, or inside a multi-line string.

    A line is dropped when a string token covers it but did not start on it (the interior and
    the closing line), or when it starts a logical line with a string (a docstring or a bare
    string statement). None when the file does not tokenize.
    """
    lines: set[int] = set()
    starts_logical = True
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    for tok in tokens:
        if tok.type in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            continue
        if tok.type == tokenize.NEWLINE:
            starts_logical = True
            continue
        if tok.type == tokenize.STRING:
            first, last = tok.start[0] - 1, tok.end[0] - 1
            lines.update(range(first + 1, last + 1))
            if starts_logical:
                lines.add(first)
        starts_logical = False
    return lines


def is_code_line(line: str) -> bool:
    """Not blank, not a comment, and more than brackets and punctuation."""
    body = line.strip()
    return bool(body) and not body.startswith("#") and any(c.isalnum() for c in body)


def mid_cursor(line: str) -> int | None:
    """The mid-line cursor: the end of the first word ending at or after a third of the text.

    The third is of the text after the indentation; None when no word ends there with at least
    ``MIN_MID_REST`` characters left to type.
    """
    body = line.rstrip()
    indent = len(body) - len(body.lstrip())
    third = indent + (len(body) - indent + 2) // 3
    for word in WORD_END.finditer(body, indent):
        if word.end() >= third:
            rest = body[word.end() :]
            return word.end() if len(rest.strip()) >= MIN_MID_REST else None
    return None


@dataclass(frozen=True)
class Added:
    """One line a commit added to a file: its 0-based number in the new file and its text."""

    path: str
    line: int
    text: str


def parse_diff(diff: str) -> tuple[list[Added], set[str]]:
    """Added lines (with new-file line numbers) and the stripped texts of removed lines.

    ``diff`` is ``git diff -U0`` output; removed texts are gathered over the whole commit so a
    line moved from one file to another is recognised as moved.
    """
    added: list[Added] = []
    removed: set[str] = set()
    path: str | None = None
    new_line = 0
    for row in diff.split("\n"):
        if row.startswith("+++ "):
            path = row[6:] if row.startswith("+++ b/") else None
        elif row.startswith("--- "):
            continue
        elif row.startswith("@@"):
            match = re.match(r"@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@", row)
            new_line = int(match.group(1)) - 1 if match else 0
        elif row.startswith("+") and path is not None:
            added.append(Added(path, new_line, row[1:]))
            new_line += 1
        elif row.startswith("-"):
            removed.add(row[1:].strip())
    return added, removed


def targets_of(added: Sequence[Added], removed: set[str], files: dict[str, str]) -> list[Added]:
    """The added lines that are targets; ``files``: the post-commit text of each path.

    A file that gains more than ``MAX_ADDED_PER_FILE`` lines in one commit is left out: such
    bulk additions are generated or vendored, not typed.
    """
    out: list[Added] = []
    interiors: dict[str, set[int] | None] = {}
    per_file: dict[str, int] = defaultdict(int)
    for a in added:
        per_file[a.path] += 1
    for a in added:
        text = files.get(a.path)
        if text is None or per_file[a.path] > MAX_ADDED_PER_FILE:
            continue
        if not is_code_line(a.text) or a.text.strip() in removed:
            continue
        if a.path not in interiors:
            interiors[a.path] = string_interior_lines(text)
        strings = interiors[a.path]
        if strings is None or a.line in strings:
            continue
        if text.split("\n")[a.line] != a.text or mid_cursor(a.text) is None:
            continue
        out.append(a)
    return out


@dataclass(frozen=True)
class Block:
    """A run of added lines: its path, 0-based first line in the new file, and its lines."""

    path: str
    line: int
    lines: tuple[str, ...]


def added_runs(added: Sequence[Added]) -> list[Block]:
    """Maximal runs of added non-blank lines that follow one another in one new file."""
    runs: list[Block] = []
    current: list[Added] = []

    def flush() -> None:
        if current:
            runs.append(Block(current[0].path, current[0].line, tuple(a.text for a in current)))
            current.clear()

    for a in added:
        if not a.text.strip():
            flush()
            continue
        if current and (a.path != current[-1].path or a.line != current[-1].line + 1):
            flush()
        current.append(a)
    flush()
    return runs


def is_moved(block: Block, removed: set[str]) -> bool:
    """Moved code: more than half the run's lines were removed elsewhere in the commit."""
    moved = sum(1 for row in block.lines if row.strip() in removed)
    return 2 * moved > len(block.lines)


def opener_cursor(rows: Sequence[str], line: int) -> int | None:
    """The end of the line before ``line`` when it opens a block (its code ends with ``:``)."""
    if line == 0:
        return None
    before = rows[line - 1].rstrip()
    code = before.split("#", 1)[0].rstrip() if "#" in before else before
    return len(before) if code.endswith(":") and code.strip() else None


def blocks_of(added: Sequence[Added], removed: set[str], files: dict[str, str]) -> list[Block]:
    """The runs that are block tasks; ``files``: the post-commit text of each path.

    A run is kept when it has at least ``MIN_BLOCK_LINES`` lines, its file gained at most
    ``MAX_ADDED_PER_FILE`` lines in the commit, it is not moved code, its first line is code
    (not a comment, not in a docstring or multi-line string) and the file holds it as the diff
    says.
    """
    per_file: dict[str, int] = defaultdict(int)
    for a in added:
        per_file[a.path] += 1
    interiors: dict[str, set[int] | None] = {}
    out: list[Block] = []
    for block in added_runs(added):
        text = files.get(block.path)
        if text is None or per_file[block.path] > MAX_ADDED_PER_FILE:
            continue
        if len(block.lines) < MIN_BLOCK_LINES or is_moved(block, removed):
            continue
        if not is_code_line(block.lines[0]):
            continue
        if block.path not in interiors:
            interiors[block.path] = string_interior_lines(text)
        strings = interiors[block.path]
        if strings is None or block.line in strings:
            continue
        rows = text.split("\n")
        if tuple(rows[block.line : block.line + len(block.lines)]) != block.lines:
            continue
        out.append(block)
    return out


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--out", type=Path, help=f"default: {OUT.name}, or {BLOCKS_OUT.name}")
    parser.add_argument("--blocks", action="store_true", help="the block tasks (issue 23)")
    args = parser.parse_args(argv)
    args.out = args.out or (BLOCKS_OUT if args.blocks else OUT)
    data = build_blocks(args.mirrors) if args.blocks else build(args.mirrors)
    raw = json.dumps(data, separators=(",", ":"), sort_keys=True).encode()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(gzip.compress(raw, compresslevel=9, mtime=0))
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
