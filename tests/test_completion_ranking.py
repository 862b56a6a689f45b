"""lsp_server's ranking stages (completion.rank_stages), after the engine's."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lsp_server.completion.cleanup import Suggestion
from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.decode import rank
from lsp_server.models import TINY_ENV
from lsp_server.settings import DecodingSettings

BODY = "def read(path):\n    data = None\n    "
AFTER = "\n    return data\n"


def test_drafts_that_do_not_parse_go_before_the_memory_lead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The memory's copy says ``data = read(path)``; a malformed draft that starts alike is
    dropped first, so the lead goes to the one that parses, with the best score."""
    monkeypatch.delenv(TINY_ENV, raising=False)
    drafts = [Suggestion("data = load(path)", -1.0), Suggestion("data = read(path))", -2.0)]
    drafts.append(Suggestion("data = read(path)", -3.0))
    settings = replace(DecodingSettings(), k=3, line_mode="single")
    context = CursorContext(BODY, "", following=AFTER, language="python")
    out = rank(drafts, context, settings, "data = read(path)")
    assert [(s.text, s.score) for s in out] == [
        ("data = read(path)", -1.0),
        ("data = load(path)", -1.0),
    ]
