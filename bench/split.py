"""The next-line protocol's data: one CPython standard library, split into parts, and its tasks.

The split hashes each file's top-level package directory (a top-level module is its own unit)
of one standard library (one version only: versions share most lines, so mixing them leaks
test lines into the index): 10% test, 5% validation (for tuning alpha and tau), 85% indexed.
Whole packages stay on one side, so the index never holds a sibling module of a held-out file.
"""

from __future__ import annotations

import hashlib
import os
import random
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SPLIT_SALT = "superposed-lsp-split-v1"  # the fixed seed of the split
TEST_BUCKETS = range(0, 10)  # of 100: 10% of the package directories
VALIDATION_BUCKETS = range(10, 15)  # 5%: tuning only, never indexed, never reported as test
SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "__pycache__"}
# Generated code, not written by people: the codec tables of encodings/ (gencodec.py output).
GENERATED_UNITS = {"encodings"}
MAX_FILE_BYTES = 400_000  # generated data tables, not code


def stdlib_root() -> Path:
    """The one standard library the benchmarks read: BENCH_STDLIB, else the running Python's."""
    return Path(os.environ.get("BENCH_STDLIB") or sysconfig.get_paths()["stdlib"])


def split_unit(rel: Path) -> str:
    """The unit the split hashes: the top-level package directory, or the top-level module."""
    return rel.parts[0]


def bucket(unit: str, salt: str = SPLIT_SALT) -> int:
    """A stable bucket 0..99 for a unit (sha256, not Python's salted hash)."""
    return int(hashlib.sha256(f"{salt}:{unit}".encode()).hexdigest(), 16) % 100


def part_of(rel: Path) -> str:
    """'test', 'validation' or 'train' for a file path relative to the library root."""
    b = bucket(split_unit(rel))
    if b in TEST_BUCKETS:
        return "test"
    if b in VALIDATION_BUCKETS:
        return "validation"
    return "train"


def is_source(rel: Path) -> bool:
    """A non-test Python module of the library."""
    return (
        rel.suffix == ".py"
        and not SKIP_DIRS.intersection(rel.parts[:-1])
        and not rel.name.startswith("test_")
        and not rel.parts[0].startswith("config-")
        and rel.parts[0] not in GENERATED_UNITS
    )


def library_files(root: Path) -> dict[str, list[Path]]:
    """The library's source files (relative paths, sorted) in each part of the split."""
    parts: dict[str, list[Path]] = {"train": [], "validation": [], "test": []}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if is_source(rel) and path.stat().st_size <= MAX_FILE_BYTES:
            parts[part_of(rel)].append(rel)
    return parts


def read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


@dataclass(frozen=True)
class LineTask:
    """Complete one line: the cursor sits after the line's indentation (as an editor leaves it)."""

    source: str  # file (relative path) or item id
    line: int  # 0-based line number
    prompt: str  # all text before the cursor
    target: str  # the rest of the line, without its newline and trailing whitespace


def line_tasks(name: str, text: str) -> list[LineTask]:
    """Every non-blank line after the first of a file, as a task."""
    lines = text.splitlines(keepends=True)
    tasks: list[LineTask] = []
    offset = len(lines[0]) if lines else 0
    for i in range(1, len(lines)):
        line = lines[i]
        body = line.rstrip()
        target = body.lstrip()
        if target:
            indent = body[: len(body) - len(target)]
            tasks.append(LineTask(name, i, text[:offset] + indent, target))
        offset += len(line)
    return tasks


def sample_tasks(files: Mapping[str, str], n: int, seed: int = 0) -> list[LineTask]:
    """n tasks drawn without replacement, in a fixed shuffled order: a smaller n is a prefix."""
    every = [t for name in sorted(files) for t in line_tasks(name, files[name])]
    random.Random(seed).shuffle(every)
    return every[:n]
