"""No draft with broken text (issue 52 item 7): a draft holding U+FFFD or a lone surrogate,
bytes that were not UTF-8 (a token cut inside a character, then another), is never shown
unless the document holds that character itself."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lsp_server.completion.cleanup import unreadable
from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.decode import decode
from lsp_server.models import TINY_ENV
from lsp_server.settings import DecodingSettings
from superposed.api import Completion, Engine
from superposed.types import Draft

BODY = "def read(path):\n    data = None\n    "
AFTER = "\n    return data\n"


def test_text_that_was_not_utf8_is_unreadable_unless_the_document_holds_it() -> None:
    draft = "for reasons def\ufffd\ufffd Meet En\ufffd\ufffdillsalamentU solesto"
    assert unreadable(draft, BODY, AFTER)
    assert unreadable("name = '\udcff'", BODY, AFTER)  # undecodable bytes (surrogateescape)
    assert not unreadable("for line in data:", BODY, AFTER)
    assert not unreadable("caf\u00e9 = '\u00e9t\u00e9'", BODY, AFTER)
    assert not unreadable("x = '\ufffd'", "bad = '\ufffd'\n" + BODY, AFTER)  # the file has it


def test_a_draft_with_broken_text_is_never_shown(
    tiny_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 52's draft at ``for ``, whatever the settings (``wellFormed`` off too): the
    next draft takes its slot. The tiny test model's word salad is shown as decoded."""
    monkeypatch.delenv(TINY_ENV, raising=False)
    texts = ["reasons def\ufffd\ufffd Meet En\ufffd\ufffdillsalamentU solesto", "line in data:"]
    done = Completion([Draft(t, [], -float(i)) for i, t in enumerate(texts)], {"total": 1.0})
    monkeypatch.setattr(tiny_engine, "run", lambda *a, **kw: done)
    before = BODY + "for "
    context = CursorContext.at(before + AFTER, len(before), "python")
    off = replace(DecodingSettings(), k=3, line_mode="single", well_formed=False)
    for settings in (replace(off, well_formed=True), off):
        assert [s.text for s in decode(tiny_engine, context, settings).suggestions] == texts[1:]
    monkeypatch.setenv(TINY_ENV, "1")
    assert [s.text for s in decode(tiny_engine, context, off).suggestions] == texts
