"""The ghost text and :SuperposedStatus in a real terminal without truecolor: Neovim 0.12 in tmux,
as a person sees them (issue 52, items 5 and 7).

Neovim runs in a detached tmux session ('termguicolors' off, as in a terminal without
truecolor), with the 256-colour terminal type and with the 8-colour one (``screen``). It opens
a file at the end of a ``return`` line in Insert mode before the model is in; the test reads
the pane (``tmux capture-pane -e``: the characters and their colours) until the loading float
shows, then until the ghost text shows, then types ``:SuperposedStatus`` as a person would and
reads the pane again. Before,
the drafts were drawn with ComplHint, which has no terminal colour: they had the code's.

The captures are rendered to HTML (rich) and screenshotted with headless Chromium into
test-output/; SUPERPOSED_UPDATE_DOCS=1 copies the 256-colour ones to docs/images/ for the
READMEs. The server is tests/e2e/hooked_server.py with fixed drafts and the tiny model.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console
from rich.terminal_theme import MONOKAI
from rich.text import Text

from tests.e2e.nvim_harness import ROOT, make_workspace, nvim_012, tiny_model_env

pytestmark = pytest.mark.editor

OUTPUT = ROOT / "test-output"
DOCS = ROOT / "docs" / "images"
WAIT_S = 240  # for the model and each screen; the machine is shared and slow
COLUMNS, LINES = 92, 20
SOURCE = (
    "import math\n\n\n"
    "def area(width, height):\n"
    '    """The area of a rectangle."""\n'
    "    return width * height\n\n\n"
    "def diagonal(width, height):\n"
    '    """The length of the diagonal."""\n'
    "    return "
)
TYPED = "    return "
DRAFTS = [
    "math.hypot(width, height)",
    "math.sqrt(width ** 2 + height ** 2)",
    "(width + height) / 2",
]

INIT = r"""
vim.o.termguicolors = false  -- a terminal without truecolor
vim.opt.rtp:prepend(vim.env.SUPERPOSED_PLUGIN)
vim.cmd('filetype on')
vim.cmd('syntax on')
local cfg = vim.json.decode(vim.fn.readfile(vim.env.SUPERPOSED_TEST_CONFIG)[1])
require('superposed').setup({
  cmd = { cfg.python, cfg.hooked, '--load-delay', '3', '--drafts', cfg.drafts, '--',
    '--log-file', cfg.log },
  settings = { k = 3, compile = 'off', answerWithinMs = 0,
    codebaseDb = cfg.codebase_db, userDb = cfg.user_db },
})
vim.cmd.edit(cfg.file)
vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(0), 0 })
vim.cmd('startinsert!')
"""


def require_tmux() -> str:
    found = shutil.which("tmux")
    if found is None:
        message = "no tmux: scripts/setup-editors.sh (make setup) installs it"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


class Pane:
    """Neovim in a detached tmux session of its own (its own tmux server): a headless Neovim
    running ``command``'s arguments, and in the pane its terminal UI (``--remote-ui``: the
    editors cache's 0.12 is a loader wrapper, through which the UI cannot start its own
    server)."""

    def __init__(self, tmp_path: Path, term: str, args: list[str], env: dict[str, str]):
        self.socket = f"superposed-{os.getpid()}-{term}"
        address = str(tmp_path / "nvim.sock")
        self.editor = subprocess.Popen(
            [nvim_012(), "--headless", "--listen", address, *args],
            env={**env, "TERM": term},
            stdout=subprocess.DEVNULL,
            stderr=open(tmp_path / "nvim.err", "w"),  # noqa: SIM115 (closed with the process)
        )
        deadline = time.monotonic() + WAIT_S
        while not Path(address).exists():
            if self.editor.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Neovim did not start: {(tmp_path / 'nvim.err').read_text()}")
            time.sleep(0.1)  # polling for the socket: the wait is for it to exist
        conf = tmp_path / "tmux.conf"
        conf.write_text(
            f'set -g default-terminal "{term}"\nset -g status off\nset -g remain-on-exit on\n'
        )
        ui = shlex.join([nvim_012(), "--server", address, "--remote-ui"])
        self.tmux(
            "-f",
            str(conf),
            "new-session",
            "-d",
            "-x",
            str(COLUMNS),
            "-y",
            str(LINES),
            f"env -u COLORTERM {ui}",
        )

    def tmux(self, *args: str) -> str:
        run = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True
        )
        return run.stdout

    def capture(self) -> str:
        """The pane's lines with their colours (SGR escapes)."""
        return self.tmux("capture-pane", "-e", "-p", "-t", "0")

    def wait_for(self, what: str, seen: Callable[[str], bool]) -> str:
        """The pane once ``seen(its plain text)``; fails after WAIT_S with what it showed."""
        deadline = time.monotonic() + WAIT_S
        while True:
            screen = self.capture()
            if seen(Text.from_ansi(screen).plain):
                return screen
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} on the screen:\n{Text.from_ansi(screen).plain}")
            time.sleep(0.2)  # polling the screen: the wait is for what it shows

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)
        self.editor.terminate()
        self.editor.wait(timeout=WAIT_S)


def style_at(screen: str, line_start: str, text: str) -> str:
    """The style (rich's words) of the first character of ``text`` on the screen's line that
    starts with ``line_start``."""
    for line in screen.splitlines():
        parsed = Text.from_ansi(line)
        if parsed.plain.startswith(line_start) and text in parsed.plain:
            return str(parsed.get_style_at_offset(Console(), parsed.plain.index(text)))
    raise AssertionError(f"no line {line_start!r} with {text!r}:\n{Text.from_ansi(screen).plain}")


def screenshot(screen: str, name: str) -> Path:
    """``screen`` rendered as a dark terminal would (rich's HTML, headless Chromium's PNG)."""
    console = Console(record=True, width=COLUMNS, file=io.StringIO(), color_system="256")
    for line in screen.rstrip("\n").split("\n"):
        console.print(Text.from_ansi(line), no_wrap=True, crop=True)
    OUTPUT.mkdir(exist_ok=True)
    html = OUTPUT / f"{name}.html"
    template = (
        '<!DOCTYPE html><html><head><meta charset="UTF-8"><style>{stylesheet}'
        "body {{ margin: 0; background: {background}; }}"
        "pre {{ margin: 0; padding: 12px; color: {foreground}; background: {background};"
        " font: 15px/1.25 'DejaVu Sans Mono', monospace; }}</style></head>"
        "<body><pre><code>{code}</code></pre></body></html>"
    )
    html.write_text(console.export_html(theme=MONOKAI, code_format=template, inline_styles=True))
    png = OUTPUT / f"{name}.png"
    size = f"{COLUMNS * 9 + 24},{LINES * 19 + 24}"
    subprocess.run(
        [
            "/usr/bin/chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={size}",
            f"--screenshot={png}",
            html.as_uri(),
        ],
        capture_output=True,
        timeout=WAIT_S,
        check=True,
    )
    return png


def run_in_tmux(tmp_path: Path, term: str) -> dict[str, str]:
    """Neovim 0.12 in tmux with TERM ``term``: the screen with the ghost text, then with
    :SuperposedStatus."""
    require_tmux()
    workspace = make_workspace(tmp_path / "workspace", "geometry", {"geometry.py": SOURCE})
    drafts = tmp_path / "drafts.json"
    drafts.write_text(json.dumps([{"after": TYPED, "drafts": DRAFTS}]))
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "python": sys.executable,
                "hooked": str(ROOT / "tests" / "e2e" / "hooked_server.py"),
                "drafts": str(drafts),
                "log": str(tmp_path / "server.log"),
                "file": str(workspace / "geometry.py"),
                "codebase_db": str(tmp_path / "stores" / "codebase.sqlite"),
                "user_db": str(tmp_path / "stores" / "user.sqlite"),
            }
        )
    )
    init = tmp_path / "init.lua"
    init.write_text(INIT)
    env = {
        **tiny_model_env(tmp_path),
        "SUPERPOSED_TEST_CONFIG": str(config),
        "SUPERPOSED_PLUGIN": str(ROOT / "neovim"),
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),  # no user config, shada or state from the machine
    }
    pane = Pane(tmp_path, term, ["-u", str(init), "-i", "NONE", "-n"], env)
    try:
        loading = pane.wait_for("loading", lambda s: "superposed: loading" in s)
        ghost = pane.wait_for("ghost text", lambda s: TYPED + DRAFTS[0] in s)
        pane.tmux("send-keys", "-t", "0", "Escape")
        pane.tmux("send-keys", "-t", "0", ":SuperposedStatus", "Enter")
        status = pane.wait_for("status", lambda s: "Press ENTER" in s and "k 3" in s)
        pane.tmux("send-keys", "-t", "0", "Enter", ":qa!", "Enter")
    finally:
        pane.close()
    return {"loading": loading, "ghost": ghost, "status": status}


@pytest.mark.parametrize("term", ["screen-256color", "screen"], ids=["256-colour", "8-colour"])
def test_ghost_text_is_drawn_apart_from_the_code(tmp_path: Path, term: str) -> None:
    screens = run_in_tmux(tmp_path, term)
    # the draft's colour, against plain code's (an identifier: Normal, as the draft was before)
    ghost = style_at(screens["ghost"], TYPED, DRAFTS[0])
    code = style_at(screens["ghost"], "    return width", "width")
    assert ghost != code and ghost != "none", (ghost, code)
    plain = Text.from_ansi(screens["ghost"]).plain
    assert f"{TYPED}{DRAFTS[0]} (1/3)" in plain
    # loading said in Insert mode (the float: "-- INSERT --" stays on the command line)
    loading = Text.from_ansi(screens["loading"]).plain.splitlines()
    assert any(line.rstrip().endswith("superposed: loading smollm2-135m") for line in loading)
    assert loading[-1].startswith("-- INSERT --")
    status = Text.from_ansi(screens["status"]).plain
    assert "superposed: ready (tiny-random, k=3)" in status
    assert "vim.NIL" not in status
    suffix = "" if term == "screen-256color" else "-8-colour"
    shots = [screenshot(screens["ghost"], "neovim-ghost-text" + suffix)]
    shots.append(screenshot(screens["loading"], "neovim-loading" + suffix))
    shots.append(screenshot(screens["status"], "neovim-status" + suffix))
    if os.environ.get("SUPERPOSED_UPDATE_DOCS") and not suffix:
        for shot in shots:
            shutil.copy(shot, DOCS / shot.name)
