"""Which lines and runs of lines a commit added are the replay's tasks (bench/replay_build.py
freezes them): pure functions over a diff and the post-commit files, tested on tiny inputs.

A target line is code a user would type: not blank, not a comment, not inside a docstring or
other multi-line string, not only brackets and punctuation, and not moved (its text was not
removed elsewhere in the same commit); its mid-line cursor is the end of the first word that
ends at or after the first third of the line's text. A block is a maximal run of at least
``MIN_BLOCK_LINES`` consecutive added non-blank lines of one file whose first line is code and
which is not moved code (at most half its lines' texts were removed elsewhere in the commit).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

MAX_ADDED_PER_FILE = 300  # more in one file and commit: generated tables (rich's unicode data)
MIN_MID_REST = 3  # a mid-line cursor must leave at least this many characters to type
MIN_BLOCK_LINES = 2
WORD_END = re.compile(r"\w+")


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


def in_string(interiors: dict[str, set[int] | None], path: str, text: str, line: int) -> bool:
    """Whether row ``line`` of file ``path`` (its ``text``) lies inside a string literal, or
    the file does not tokenize; each file's string rows found once (``interiors``)."""
    if path not in interiors:
        interiors[path] = string_interior_lines(text)
    strings = interiors[path]
    return strings is None or line in strings


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
        if in_string(interiors, a.path, text, a.line):
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
        if in_string(interiors, block.path, text, block.line):
            continue
        rows = text.split("\n")
        if tuple(rows[block.line : block.line + len(block.lines)]) != block.lines:
            continue
        out.append(block)
    return out
