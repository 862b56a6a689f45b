"""A hostile repository runs nothing through our git calls (issue 21, item 1).

Each case sets git settings that name a program (a script that appends to a marker file),
then lists the tree, judges saves and runs the index-repo command as the product does: the
marker must never appear. Where a plain git command runs the program, the test runs it last,
to show that the setting is live in this git.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from ngram_db import ByteTokenizer, files
from ngram_db import cli as index_repo_cli
from ngram_db.files import git_files, list_candidates, save_skip_reason

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

# Variables of the test's own shell that would stop plain git from running the trap.
_OVERRIDES = (
    "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "EDITOR", "VISUAL", "GIT_PAGER", "PAGER",
    "GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_EXTERNAL_DIFF",
)  # fmt: skip
PLAIN_ENV = {k: v for k, v in os.environ.items() if k not in _OVERRIDES} | {
    "GIT_TERMINAL_PROMPT": "0"
}


def git(repo: Path, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """Plain git, as a user would run it (settings and all), with a fixed identity."""
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo), *args]
    return subprocess.run(command, input=input, capture_output=True, env=PLAIN_ENV, timeout=60)


@dataclass
class Trap:
    program: Path  # an executable script that appends a line to marker and fails
    marker: Path

    def ran(self) -> str:
        return self.marker.read_text() if self.marker.exists() else ""


@pytest.fixture()
def trap(tmp_path_factory: pytest.TempPathFactory) -> Trap:
    folder = tmp_path_factory.mktemp("trap")  # no brackets or spaces: it goes into commands
    marker = folder / "PWNED"
    program = folder / "evil"
    program.write_text(f'#!/bin/sh\necho "ran: $0 $*" >> {marker}\nexit 1\n')
    program.chmod(0o755)
    return Trap(program, marker)


def make_repo(root: Path) -> Path:
    """A repository with a commit: a.py tracked, b.py untracked, ignored.py gitignored."""
    root.mkdir(parents=True)
    assert git(root, "init", "-q").returncode == 0
    (root / "a.py").write_text("x = 1\n")
    (root / ".gitignore").write_text("ignored.py\n")
    assert git(root, "add", "a.py", ".gitignore").returncode == 0
    assert git(root, "commit", "-qm", "x").returncode == 0
    (root / "b.py").write_text("y = 2\n")
    (root / "ignored.py").write_text("z = 3\n")
    return root


def use_the_product(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every path that runs git: listing, a save of each kind of file, the index-repo command."""
    assert set(git_files(repo) or ()) >= {"a.py", "b.py"}  # git answered (not the walk)
    listed, _ = list_candidates(repo)
    assert {c.rel for c in listed} >= {"a.py", "b.py"}
    assert save_skip_reason(repo / "a.py", repo, "x = 1\n") is None
    assert save_skip_reason(repo / "b.py", repo, "y = 2\n") is None
    assert save_skip_reason(repo / "ignored.py", repo, "z = 3\n") == "gitignored"
    monkeypatch.setattr(index_repo_cli, "load_tokenizer", lambda model: ByteTokenizer())
    assert index_repo_cli.main([str(repo), "--db", str(tmp_path / "s.sqlite")]) == 0


def config(repo: Path, *pairs: tuple[str, str]) -> None:
    for key, value in pairs:
        assert git(repo, "config", key, value).returncode == 0


HOOKS = ("pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-checkout",
         "post-index-change", "reference-transaction", "pre-auto-gc", "fsmonitor-watchman",
         "query-watchman")  # fmt: skip


def install_hooks(folder: Path, program: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in HOOKS:
        shutil.copy(program, folder / name)


def touch_a(repo: Path) -> None:
    (repo / "a.py").write_text("x = 2\n")


@dataclass
class Case:
    """Settings a repository can carry, and a plain git command that runs their program."""

    name: str
    setup: Callable[[Path, Path], None]  # (repo, program)
    arm: Callable[[Path], object] | None  # None: no plain command runs it here (a pager)


CASES = [
    Case(
        "core.fsmonitor as a command",
        lambda r, p: config(r, ("core.fsmonitor", f"{p} fsmonitor; false")),
        lambda r: git(r, "status"),
    ),
    Case(
        "core.fsmonitor as a hook script",
        lambda r, p: (
            install_hooks(r / ".git" / "hooks", p),
            config(r, ("core.fsmonitor", str(r / ".git" / "hooks" / "query-watchman"))),
        ),
        lambda r: git(r, "ls-files", "-co", "--exclude-standard"),
    ),
    Case(
        "core.fsmonitor through include.path",
        lambda r, p: (
            (r / ".git" / "more.config").write_text(f"[core]\n\tfsmonitor = {p}\n"),
            config(r, ("include.path", "more.config")),
        ),
        lambda r: git(r, "check-ignore", "-q", "b.py"),
    ),
    Case(
        "hooks in .git/hooks",
        lambda r, p: install_hooks(r / ".git" / "hooks", p),
        lambda r: git(r, "commit", "--allow-empty", "-qm", "x"),
    ),
    Case(
        "core.hooksPath",
        lambda r, p: (
            install_hooks(r / "hooks", p),
            config(r, ("core.hooksPath", str(r / "hooks"))),
        ),
        lambda r: git(r, "commit", "--allow-empty", "-qm", "x"),
    ),
    Case(
        "filters",
        lambda r, p: (
            (r / ".gitattributes").write_text("* filter=evil\n"),
            config(
                r,
                ("filter.evil.clean", str(p)),
                ("filter.evil.smudge", str(p)),
                ("filter.evil.process", str(p)),
                ("filter.evil.required", "true"),
            ),
            touch_a(r),  # a stale index entry: git status would clean it to compare
        ),
        lambda r: git(r, "add", "a.py"),
    ),
    Case(
        "diff.external",
        lambda r, p: (config(r, ("diff.external", str(p))), touch_a(r)),
        lambda r: git(r, "diff"),
    ),
    Case(
        "diff textconv",
        lambda r, p: (
            (r / ".gitattributes").write_text("*.py diff=evil\n"),
            config(r, ("diff.evil.textconv", str(p))),
            touch_a(r),
        ),
        lambda r: git(r, "diff"),
    ),
    Case(
        "pagers",  # git pages only on a terminal: no plain command here runs them
        lambda r, p: config(
            r, ("core.pager", str(p)), ("pager.ls-files", str(p)), ("pager.check-ignore", str(p))
        ),
        None,
    ),
    Case(
        "core.sshCommand",
        lambda r, p: config(r, ("core.sshCommand", str(p))),
        lambda r: git(r, "ls-remote", "ssh://example.invalid/r"),
    ),
    Case(
        "credential.helper and core.askPass",
        lambda r, p: config(r, ("credential.helper", f"!{p}"), ("core.askPass", str(p))),
        lambda r: git(r, "credential", "fill", input=b"protocol=https\nhost=example.invalid\n\n"),
    ),
    Case(
        "core.editor",
        lambda r, p: config(r, ("core.editor", str(p))),
        lambda r: git(r, "commit", "--allow-empty"),
    ),
    Case(
        "sequence.editor",
        lambda r, p: config(r, ("sequence.editor", str(p))),
        lambda r: git(r, "rebase", "-i", "HEAD"),
    ),
    Case(
        "gpg.program",
        lambda r, p: config(r, ("commit.gpgSign", "true"), ("gpg.program", str(p))),
        lambda r: git(r, "commit", "--allow-empty", "-qm", "x"),
    ),
    Case(
        "remotes: ext:: URL, uploadpack, alternateRefsCommand, packObjectsHook",
        lambda r, p: config(
            r,
            ("remote.origin.url", f"ext::{p}"),
            ("protocol.ext.allow", "always"),
            ("remote.origin.uploadpack", str(p)),
            ("core.alternateRefsCommand", str(p)),
            ("uploadpack.packObjectsHook", str(p)),
        ),
        lambda r: git(r, "ls-remote", "origin"),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_setting_that_names_a_program_never_runs_it(
    case: Case, trap: Trap, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    case.setup(repo, trap.program)
    use_the_product(repo, tmp_path, monkeypatch)
    assert trap.ran() == ""
    if case.arm is not None:
        case.arm(repo)
        assert trap.ran() != "", "plain git did not run the trap: the case tests nothing"


def test_every_setting_at_once(trap: Trap, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo(tmp_path / "repo")
    for case in CASES:
        case.setup(repo, trap.program)
    use_the_product(repo, tmp_path, monkeypatch)
    assert trap.ran() == ""


def test_a_partial_clone_fetches_nothing(
    trap: Trap, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A .gitignore only in the index is fetched from the promisor remote: its URL runs."""
    source = make_repo(tmp_path / "source")
    config(source, ("uploadpack.allowFilter", "true"))
    clone = tmp_path / "clone"
    made = git(tmp_path, "clone", "-q", "--filter=blob:none", "--no-checkout",
               source.as_uri(), str(clone))  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert git(clone, "read-tree", "HEAD").returncode == 0
    assert git(clone, "update-index", "--skip-worktree", "a.py", ".gitignore").returncode == 0
    (clone / "b.py").write_text("y = 2\n")  # untracked: git reads the ignore files for it
    config(clone, ("remote.origin.url", f"ext::{trap.program}"), ("protocol.ext.allow", "always"))

    listed, _ = list_candidates(clone)
    assert "b.py" in {c.rel for c in listed}
    assert save_skip_reason(clone / "b.py", clone, "y = 2\n") is None
    monkeypatch.setattr(index_repo_cli, "load_tokenizer", lambda model: ByteTokenizer())
    assert index_repo_cli.main([str(clone), "--db", str(tmp_path / "s.sqlite")]) == 0
    assert trap.ran() == ""
    git(clone, "ls-files", "-co", "--exclude-standard")
    assert trap.ran() != "", "plain git did not run the trap: the case tests nothing"


def test_the_callers_git_variables_do_not_reach_git(
    trap: Trap, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    other = make_repo(tmp_path / "other")
    (other / "other.py").write_text("o = 1\n")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.fsmonitor")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", str(trap.program))
    assert set(git_files(repo) or ()) == {".gitignore", "a.py", "b.py"}
    assert save_skip_reason(repo / "ignored.py", repo, "z = 3\n") == "gitignored"
    assert trap.ran() == ""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("in_git", [True, False])
def test_a_fifo_for_a_gitignore_blocks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_git: bool
) -> None:
    """git waits for ever on a FIFO .gitignore: it is stopped, and the walk never opens one."""
    monkeypatch.setattr(files, "GIT_LIST_TIMEOUT_S", 0.2)
    monkeypatch.setattr(files, "GIT_CHECK_TIMEOUT_S", 0.2)
    root = tmp_path / "tree"
    root.mkdir()
    if in_git:
        assert git(root, "init", "-q").returncode == 0
    (root / "a.py").write_text("x = 1\n")
    os.mkfifo(root / ".gitignore")
    listed, _ = list_candidates(root)
    assert "a.py" in {c.rel for c in listed}
    assert save_skip_reason(root.resolve() / "a.py", root.resolve(), "x = 1\n") is None


def test_a_linked_gitignore_is_not_followed_outside_git(tmp_path: Path) -> None:
    """As git does since 2.32: a link could name /dev/zero or a file outside the tree."""
    root = tmp_path / "tree"
    root.mkdir()
    (tmp_path / "rules").write_text("a.py\n")
    (root / "a.py").write_text("x = 1\n")
    (root / ".gitignore").symlink_to(tmp_path / "rules")
    listed, _ = list_candidates(root)
    assert "a.py" in {c.rel for c in listed}
