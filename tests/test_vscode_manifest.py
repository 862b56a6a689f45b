"""The extension's settings (package.json) match the server's: same names, same defaults.

package.json's contributes.configuration is the extension's one list of setting keys (its
TypeScript reads SERVER_KEYS from it; vscode-extension/test checks that; the research knobs sit
inside its one ``research`` object). lsp_server/pages/settings_pages.py writes it from the server's
table (tests/test_settings_pages.py); these tests read it as VS Code does. VS Code sends only
the settings a user changed, so package.json's defaults are what the user reads in the
Settings UI; they must be the server's. Fast: no editor runs.
"""

from __future__ import annotations

import json
from pathlib import Path

from lsp_server.settings import KEYS, RESEARCH, RESEARCH_KEY, Settings, to_dict

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = json.loads((ROOT / "vscode-extension" / "package.json").read_text())
PROPERTIES = MANIFEST["contributes"]["configuration"]["properties"]
EXTENSION_ONLY = {"pythonPath", "languages", "trace.server"}


def declared() -> dict[str, dict[str, object]]:
    """Every setting package.json declares, the research object's knobs among them."""
    top = {key.removeprefix("superposed."): value for key, value in PROPERTIES.items()}
    research = top.pop(RESEARCH_KEY)
    assert isinstance(research, dict)
    knobs = research["properties"]
    assert isinstance(knobs, dict) and set(knobs) == set(RESEARCH)
    return top | knobs


def test_every_server_setting_is_declared_and_nothing_else() -> None:
    assert set(declared()) - EXTENSION_ONLY == set(KEYS)


def test_defaults_are_the_servers() -> None:
    server = to_dict(Settings())
    for key in KEYS:
        default = declared()[key]["default"]
        expected = server[key]
        if expected is None:  # a path the server chooses: the empty string in VS Code
            assert default == "", key
        else:
            assert default == expected, key


def test_choices_are_the_servers() -> None:
    """Every setting that takes one of a few names lists the server's names, in its order."""
    from lsp_server.settings import CHOICES

    assert {"method", "mix", "lineMode", "trigger"} <= set(CHOICES)
    for key, allowed in CHOICES.items():
        assert declared()[key].get("enum") == list(allowed), key


def test_every_listed_language_activates_the_extension() -> None:
    """The default languages activate it by name; languages a user adds, by any language opening.

    VS Code reads no setting before activation, so a language added to superposed.languages can
    only activate the extension through the generic "onLanguage" event; the extension then starts
    the server for files in the listed languages only (wantsServer in config.ts, unit-tested in
    vscode-extension/test).
    """
    events = MANIFEST["activationEvents"]
    defaults = declared()["languages"]["default"]
    assert isinstance(defaults, list) and defaults
    for language in defaults:
        assert f"onLanguage:{language}" in events, language
    assert "onLanguage" in events
