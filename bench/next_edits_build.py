"""Freeze the next-edits benchmark's tasks (issue 35 item 7) into bench/data/next_edits.json.gz.

From the replay's repositories (bench/replay_build.py's REPOS and split: tuning on rich, the
report on flask and black), each non-merge commit in [SINCE, the mirror's head) is read as
sites: a changed line of a modified .py file is paired with its new line (``git diff -U0``
hunks, lines paired in order where the counts agree, else by similarity), and the token-level
differences of the pair (difflib over a word/space/punctuation tokenization) are its sites,
each a span of the pre-commit line and its replacement. Whitespace-only differences are
formatting and are left out.

A site's rewrite is its (before, after) text, plus the tokens beside it when it only inserts or
deletes (``, None`` inserted before ``)``). A commit that makes the same rewrite at two or more
sites (in one file or across files) gives a **repetitive** task: its sites in diff order, the
first one the user makes by hand. Other commits give **ordinary** tasks: one site whose rewrite
the commit made once, for false alarms. Each task carries every site the commit made in the
files it opens, so a proposal that the commit made is never counted as a false one.

The file holds the pre-commit texts of the opened files (each stored once, as a line delta
against the previous stored version of the same path: a few hundred KB in all), the tasks, the
split and the repositories' licence texts, so bench/next_edits.py runs without network or git.

    python -m bench.next_edits_build [--mirrors /work/.mirror] [--out bench/data/next_edits.json.gz]
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import itertools
import json
import random
import re
import sys
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.replay_build import REPOS, Git, Repo, write_frozen

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "data" / "next_edits.json.gz"
FORMAT = 1
SINCE = "2020-01-01"  # next edits read no model: the model's training cutoff does not matter
MAX_FILE_BYTES = 60_000  # a task opens its files whole (the frozen file stays small)
MAX_FILES = 4  # files a task opens at most (the first site's file and the group's next ones)
MAX_SITES = 16  # a repetitive task's sites at most (a bulk rename keeps its first ones)
MAX_CHANGED_LINES = 400  # a commit changing more lines than this is a reformat or a vendoring
MIN_PAIR_RATIO = 0.6  # a removed and an added line are one line edited at this token likeness
PER_REPO = {  # tasks drawn per repository: (repetitive, ordinary)
    "validation": (50, 50),
    "test": (40, 40),
}
SEED = 35
TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


# ----- sites of a commit (pure functions, tested on tiny inputs) ------------------------------


@dataclass(frozen=True)
class Site:
    """One change the commit made: a span of a pre-commit line and what replaced it."""

    path: str
    line: int  # 0-based, in the pre-commit file
    start: int  # character offsets in that line (Python str indices)
    end: int
    old: str
    new: str
    key: str  # the rewrite, as JSON: sites with the same key made the same change

    @property
    def kind(self) -> str:
        return kind_of(self.old, self.new)


def tokens(line: str) -> list[str]:
    """Words, runs of whitespace and single punctuation characters, in order."""
    return TOKEN.findall(line)


def kind_of(old: str, new: str) -> str:
    """rename (one word for another), insert, delete or replace."""
    if not old:
        return "insert"
    if not new:
        return "delete"
    if re.fullmatch(r"\w+", old) and re.fullmatch(r"\w+", new):
        return "rename"
    return "replace"


def _neighbour(toks: Sequence[str], index: int, step: int) -> str:
    """The nearest token that is not whitespace from ``index`` in direction ``step``; any
    word is ``\\w`` (the argument before an inserted ``, None`` differs from call to call)."""
    while 0 <= index < len(toks):
        if not toks[index].isspace():
            return "\\w" if re.fullmatch(r"\w+", toks[index]) else toks[index]
        index += step
    return ""


def line_sites(path: str, line: int, old: str, new: str) -> list[Site]:
    """The token-level differences of one edited line, as sites (whitespace-only ones left out).

    A pure insertion or deletion's key carries the nearest non-space token on each side (a
    word as its class), so ``f(a)`` -> ``f(a, b)`` and ``g(c)`` -> ``g(c, b)`` share one; a
    replacement's key is its text alone.
    """
    a, b = tokens(old), tokens(new)
    offsets = list(itertools.accumulate((len(t) for t in a), initial=0))
    out = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        before, after = "".join(a[i1:i2]), "".join(b[j1:j2])
        if not before.strip() and not after.strip():
            continue
        context: list[str] = []
        if not before or not after:
            context = [_neighbour(a, i1 - 1, -1), _neighbour(a, i2, 1)]
        key = json.dumps([before.strip(), after.strip(), *context])
        out.append(Site(path, line, offsets[i1], offsets[i2], before, after, key))
    return out


def likeness(old: str, new: str) -> float:
    return difflib.SequenceMatcher(None, tokens(old), tokens(new), autojunk=False).ratio()


def pair_lines(removed: Sequence[str], added: Sequence[str]) -> list[tuple[int, int]]:
    """(removed index, added index) of the lines that are one line edited, in order.

    Equal counts pair in order; otherwise each removed line takes the first later added line
    it resembles. Either way a pair must be at least ``MIN_PAIR_RATIO`` alike (a line rewritten
    from scratch is no edit of it).
    """
    if len(removed) == len(added):
        candidates = list(zip(range(len(removed)), range(len(added)), strict=True))
        return [(i, j) for i, j in candidates if likeness(removed[i], added[j]) >= MIN_PAIR_RATIO]
    out: list[tuple[int, int]] = []
    next_added = 0
    for i, row in enumerate(removed):
        for j in range(next_added, len(added)):
            if likeness(row, added[j]) >= MIN_PAIR_RATIO:
                out.append((i, j))
                next_added = j + 1
                break
    return out


@dataclass(frozen=True)
class Hunk:
    """One ``-U0`` hunk of a modified file: its first removed line (0-based) and its lines."""

    path: str  # the pre-commit path
    old_start: int
    removed: tuple[str, ...]
    added: tuple[str, ...]


def parse_hunks(diff: str) -> tuple[list[Hunk], int]:
    """The hunks of modified files in a ``git diff -U0`` and how many lines changed in all.

    Added and deleted files have no pre-commit text to edit and give no hunks.
    """
    hunks: list[Hunk] = []
    changed = 0
    old_path: str | None = None
    path: str | None = None
    current: list[Any] | None = None

    def flush() -> None:
        if current is not None and path is not None:
            hunks.append(Hunk(path, current[0], tuple(current[1]), tuple(current[2])))

    for row in diff.split("\n"):
        if row.startswith("diff --git"):
            flush()
            current, path, old_path = None, None, None
        elif row.startswith("--- "):
            old_path = row[6:] if row.startswith("--- a/") else None
        elif row.startswith("+++ "):
            path = old_path if row.startswith("+++ b/") else None
        elif row.startswith("@@"):
            flush()
            match = re.match(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", row)
            if match is None:
                current = None
                continue
            count = 1 if match.group(2) is None else int(match.group(2))
            start = int(match.group(1)) - (1 if count else 0)  # -U0: "-5,0" inserts after 5
            current = [start, [], []]
        elif current is not None and row.startswith("-"):
            current[1].append(row[1:])
            changed += 1
        elif current is not None and row.startswith("+"):
            current[2].append(row[1:])
            changed += 1
    flush()
    return hunks, changed


def commit_sites(hunks: Sequence[Hunk]) -> list[Site]:
    """Every site of a commit's hunks, in diff order."""
    out: list[Site] = []
    for h in hunks:
        for i, j in pair_lines(h.removed, h.added):
            out += line_sites(h.path, h.old_start + i, h.removed[i], h.added[j])
    return out


def repeated(sites: Sequence[Site]) -> list[list[Site]]:
    """The groups of sites that made the same rewrite (two or more), the biggest first."""
    groups: dict[str, list[Site]] = defaultdict(list)
    for s in sites:
        groups[s.key].append(s)
    found = [g for g in groups.values() if len(g) >= 2]
    found.sort(key=lambda g: (-len(g), g[0].path, g[0].line, g[0].start))
    return found


def opened_files(first: Site, group: Sequence[Site]) -> list[str]:
    """The files a task opens: the first site's, then the group's others in diff order."""
    return list(dict.fromkeys([first.path, *(s.path for s in group)]))[:MAX_FILES]


# ----- documents stored as deltas ---------------------------------------------------------------


def blob_id(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def delta(base: str, text: str) -> list[list[Any]]:
    """``text`` as line replacements of ``base``: [[i1, i2, [lines...]], ...], in order."""
    a, b = base.split("\n"), text.split("\n")
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    return [[i1, i2, b[j1:j2]] for op, i1, i2, j1, j2 in ops if op != "equal"]


def apply_delta(base: str, ops: Sequence[Sequence[Any]]) -> str:
    a = base.split("\n")
    out: list[str] = []
    at = 0
    for i1, i2, lines in ops:
        out += a[at:i1] + list(lines)
        at = i2
    return "\n".join(out + a[at:])


def document_text(documents: Mapping[str, Any], doc: str) -> str:
    """A stored document's text: whole, or its delta applied to its base's text."""
    chain = []
    while "base" in documents[doc]:
        chain.append(documents[doc]["ops"])
        doc = documents[doc]["base"]
    text = str(documents[doc]["text"])
    for ops in reversed(chain):
        text = apply_delta(text, ops)
    return text


class Documents:
    """The frozen documents: each text once, as a delta against the stored version of its path
    that it differs least from (tasks drawn across years touch a file at many versions)."""

    def __init__(self) -> None:
        self.stored: dict[str, Any] = {}
        self.versions: dict[str, list[tuple[str, str]]] = defaultdict(list)  # path -> (id, text)

    def add(self, path: str, text: str) -> str:
        doc = blob_id(text)
        if doc in self.stored:
            return doc
        best: dict[str, Any] = {"text": text}
        size = len(text)
        for base, base_text in self.versions[path]:
            ops = delta(base_text, text)
            if len(json.dumps(ops)) < size:
                best, size = {"base": base, "ops": ops}, len(json.dumps(ops))
        self.stored[doc] = best
        self.versions[path].append((doc, text))
        return doc


# ----- git ----------------------------------------------------------------------------------


@dataclass
class Commit:
    commit: str
    date: str
    parent: str
    sites: list[Site]


def commits(git: Git, since: str) -> Iterator[Commit]:
    """Each non-merge commit since ``since``, oldest first, with its sites (small ones only)."""
    revs = git("rev-list", "--reverse", "--no-merges", f"--since={since}", "HEAD").split()
    for commit in revs:
        parents = git("rev-list", "--parents", "-1", commit).split()[1:]
        if len(parents) != 1:
            continue
        diff = git("diff", "-U0", "-M", "--no-color", parents[0], commit, "--", "*.py")
        hunks, changed = parse_hunks(diff)
        if not hunks or changed > MAX_CHANGED_LINES:
            continue
        sites = commit_sites(hunks)
        if sites:
            date = git("log", "-1", "--format=%cI", commit).strip()
            yield Commit(commit, date, parents[0], sites)


def candidates(git: Git) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The repetitive and the ordinary candidate tasks of a mirror, oldest commit first.

    Per commit: its biggest repeated rewrite is a repetitive candidate (at most
    ``MAX_SITES`` of its sites, within ``MAX_FILES`` files); a commit with no repeated rewrite
    gives an ordinary candidate, a site drawn at random.
    """
    repetitive: list[dict[str, Any]] = []
    ordinary: list[dict[str, Any]] = []
    rng = random.Random(SEED)
    texts: dict[tuple[str, str], str | None] = {}

    def text(c: Commit, path: str) -> str | None:
        if (c.parent, path) not in texts:
            t = git.text(c.parent, path)
            texts[(c.parent, path)] = t if t is not None and len(t) <= MAX_FILE_BYTES else None
        return texts[(c.parent, path)]

    for c in commits(git, SINCE):
        groups = repeated(c.sites)
        if groups:
            group = groups[0]
            files = opened_files(group[0], group)
            group = [s for s in group if s.path in files][:MAX_SITES]
            first = group[0]
            files = [f for f in files if any(s.path == f for s in group)]
        else:
            first = rng.choice(c.sites)
            files, group = [first.path], [first]
        pre = {f: text(c, f) for f in files}
        if any(t is None for t in pre.values()) or not consistent(c.sites, pre):
            continue
        task = {
            "commit": c.commit,
            "date": c.date,
            "files": pre,
            "sites": [s for s in c.sites if s.path in pre],
            "group": group,
        }
        (repetitive if groups else ordinary).append(task)
    return repetitive, ordinary


def consistent(sites: Sequence[Site], files: Mapping[str, str | None]) -> bool:
    """Every site's old text stands where the diff says in the pre-commit files."""
    for s in sites:
        text = files.get(s.path)
        if text is None:
            continue
        rows = text.split("\n")
        if s.line >= len(rows) or rows[s.line][s.start : s.end] != s.old:
            return False
    return True


def draw(cands: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """n candidates in a fixed shuffled order (one per commit already)."""
    order = list(cands)
    random.Random(SEED).shuffle(order)
    return order[:n]


def frozen_task(
    repo: Repo, kind: str, n: int, c: Mapping[str, Any], documents: Documents
) -> dict[str, Any]:
    sites: list[Site] = c["sites"]
    index = {s: i for i, s in enumerate(sites)}
    return {
        "id": f"{repo.name}#{kind[0]}{n}",
        "repo": repo.name,
        "split": repo.split,
        "kind": kind,
        "commit": c["commit"],
        "date": c["date"],
        "files": {path: documents.add(path, text) for path, text in c["files"].items()},
        "sites": [{k: v for k, v in asdict(s).items() if k != "key"} for s in sites],
        "group": [index[s] for s in c["group"]],
        "rewrite": c["group"][0].kind,
    }


def build(mirrors: Path) -> dict[str, Any]:
    documents = Documents()
    data: dict[str, Any] = {
        "format": FORMAT,
        "about": __doc__.split("\n\n")[0],
        "split": {s: [r.name for r in REPOS if r.split == s] for s in ("validation", "test")},
        "repos": {},
        "documents": documents.stored,
        "tasks": [],
    }
    for repo in REPOS:
        git = Git(mirrors / repo.name.replace("/", "+") / "repo")
        head = git("rev-parse", "HEAD").strip()
        repetitive, ordinary = candidates(git)
        want_rep, want_ord = PER_REPO[repo.split]
        chosen = {"repetitive": draw(repetitive, want_rep), "ordinary": draw(ordinary, want_ord)}
        data["repos"][repo.name] = {
            "name": repo.name,
            "split": repo.split,
            "url": f"https://github.com/{repo.name}",
            "since": SINCE,
            "head": head,
            "head_date": git("log", "-1", "--format=%cI", head).strip(),
            "licenses": list(repo.licenses),
            "license_texts": {p: git.text(head, p) or "" for p in repo.licenses},
            "candidates": {"repetitive": len(repetitive), "ordinary": len(ordinary)},
        }
        for kind, tasks in chosen.items():
            tasks.sort(key=lambda c: c["date"])  # documents' deltas follow the history
            for n, c in enumerate(tasks):
                data["tasks"].append(frozen_task(repo, kind, n, c, documents))
        print(
            f"{repo.name}: {len(repetitive)} repetitive and {len(ordinary)} ordinary candidates, "
            f"{len(chosen['repetitive'])} + {len(chosen['ordinary'])} drawn",
            file=sys.stderr,
        )
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    write_frozen(build(args.mirrors), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
