"""What a user reads of the settings is the one table's (issue 53 item 5, issue 52 items 8-9).

lsp_server/settings.py (names, parsers, defaults) and lsp_server/pages/settings_docs.py (words,
order, the editors' own settings) generate package.json's configuration, the READMEs' settings
and the Neovim plugin's settings comment (lsp_server/pages/settings_pages.py): a file edited by
hand,
or a setting added to the table without its words, fails here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lsp_server.pages import settings_pages as pages
from lsp_server.pages.settings_docs import BY_KEY, DOCS, EVERYDAY
from lsp_server.settings import CLIENT_KEYS, KEYS, RESEARCH, RESEARCH_KEY


@pytest.mark.parametrize("path", sorted(pages.generated()), ids=lambda p: p.name)
def test_each_generated_file_is_committed_as_generated(path: Path) -> None:
    run = "run: python -m lsp_server.pages.settings_pages"
    assert path.read_text() == pages.generated()[path], run


def test_every_setting_has_its_words_and_only_the_editors_own_are_client_only() -> None:
    assert len(BY_KEY) == len(DOCS)
    server = {doc.key for doc in DOCS if doc.client is None}
    assert server == set(KEYS)
    client = {doc.key for doc in DOCS if doc.client is not None}
    assert client and client <= set(CLIENT_KEYS) and not client & set(KEYS)


def test_at_most_40_settings_a_user_sees_the_everyday_ones_first() -> None:
    """42 server settings and 3 of the extension's were 45 entries in VS Code's Settings UI;
    the 10 research knobs now sit in one ``research`` object: 36."""
    properties = pages.configuration()["properties"]
    assert len(properties) == len(pages.visible()) <= 40
    everyday = ["model", "languages", "k", "lineMode", "trigger", "nextEdits", "pythonPath"]
    assert pages.visible()[:EVERYDAY] == everyday
    orders = [prop["order"] for prop in properties.values()]
    assert orders == sorted(orders) == list(range(1, len(orders) + 1))
    assert list(properties[f"superposed.{RESEARCH_KEY}"]["properties"]) == list(RESEARCH)


def test_descriptions_point_to_nothing_the_editor_cannot_open() -> None:
    """The Settings UI shows ``description`` as plain text: no file paths, no links."""
    properties = pages.configuration()["properties"]
    research = properties[f"superposed.{RESEARCH_KEY}"]["properties"]
    for key, prop in [*properties.items(), *research.items()]:
        text = prop["description"]
        assert ".md" not in text and "](" not in text and "docs/" not in text, key


def test_the_readme_table_names_every_server_setting_once() -> None:
    """Read back from the generated table, as a reader would."""
    rows = [line for line in pages.readme_tables().splitlines() if line.startswith("| `")]
    named = [row.split("`")[1] for row in rows]
    assert sorted(named) == sorted([*KEYS, *(d.key for d in DOCS if d.client is not None)])


def test_a_block_without_its_markers_is_an_error_not_a_silent_skip() -> None:
    with pytest.raises(ValueError, match="no block"):
        pages.with_block("no markers here", "<!-- a -->", "x", "<!-- b -->")
    done = pages.with_block(
        "head\n<!-- a -->\nold\n<!-- b -->\ntail", "<!-- a -->", "new", "<!-- b -->"
    )
    assert done == "head\n<!-- a -->\nnew\n<!-- b -->\ntail"


def test_the_manifest_keeps_everything_but_the_configuration() -> None:
    current = pages.MANIFEST.read_text()
    rewritten = json.loads(pages.manifest_text(current))
    original = json.loads(current)
    rewritten["contributes"].pop("configuration"), original["contributes"].pop("configuration")
    assert rewritten == original
