"""Drafts ranked by what they are (lsp_server/completion/evidence.py): a long verbatim copy
leads."""

from __future__ import annotations

from typing import Any

import pytest

from lsp_server.completion.cleanup import Suggestion
from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.decode import Sources, decode
from lsp_server.completion.evidence import LEAD_TOKENS, leading_text, says
from lsp_server.completion.wellformed import Cursor, malformed
from lsp_server.settings import DecodingSettings
from lsp_server.stores.match_indexes import MatchIndexes
from superposed import ranking
from superposed.api import Engine
from superposed.ngram import Match
from superposed.prompt import Prompt
from superposed.vocab import Vocab

COPY = "registry.attach_quuxifier(settings.quux_level, strict=True, retries=7)"


def ids(vocab: Vocab, tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


@pytest.mark.parametrize(
    "length, counts, weight, leads",
    [
        (LEAD_TOKENS, {1: 3}, 1.0, True),
        (LEAD_TOKENS - 1, {1: 3}, 1.0, False),  # a short match: a common idiom
        (LEAD_TOKENS, {1: 1, 2: 1, 3: 1}, 1.0, False),  # its occurrences disagree
        (LEAD_TOKENS * 2, {1: 3}, 0.4, False),  # a shared index's weight scales it down
    ],
)
def test_only_long_agreeing_matches_lead(
    vocab: Vocab, tokenizer: Any, length: int, counts: dict[int, int], weight: float, leads: bool
) -> None:
    heal = b"\n    "
    continuation = ids(vocab, tokenizer, "\n    " + COPY + "\n    registry.finalize()\n")
    match = Match(length, counts, continuation, weight=weight)
    copied = leading_text(match, Prompt([1, 2], heal), vocab)
    assert (copied is not None) == leads
    if leads:
        assert copied is not None and copied.startswith(COPY)


def test_the_copy_moves_first_with_the_best_score() -> None:
    drafts = [Suggestion("registry.attach_fake(mode)", -2.0), Suggestion("x = 1", -2.5)]
    drafts.append(Suggestion(COPY, -3.0, "memory"))
    copied = COPY + "\n    registry.finalize()\n"
    out = ranking.led(lambda text: says(text, copied))(drafts)
    assert [s.text for s in out] == [COPY, drafts[0].text, drafts[1].text]
    assert out[0].score == -2.0 and out[0].source == "memory"
    assert ranking.led(lambda text: says(text, "y = 2"))(drafts) == drafts
    # a draft that stops short of the copy's line, or goes elsewhere, says something else
    assert not says("registry.attach_quuxifier(", copied)
    assert says(COPY + "\n    registry.finalize()", copied)
    assert says(COPY, COPY[:30])  # the copy cut short by its file's end


FIRST_LINES = '''from frob import Registry, Settings


def configure_frobnicator(registry: Registry, settings: Settings) -> None:
    """Set up the frobnicator."""
    registry.register_frobnicator(settings.frob_mode)
'''


@pytest.mark.model
def test_the_open_documents_copy_leads_the_frobnicator_drafts(real_engine: Engine) -> None:
    """Issue 38: another open document goes on from the same function with the quuxifier
    line. Before, the copy came third (the displaced draft's rank and score), behind
    ``...retries=_frob_frob_frob...``, a line the budget cut in an open call."""
    first = FIRST_LINES + "    " + COPY + "\n"
    second = FIRST_LINES
    memory = MatchIndexes(real_engine.tokenizer)
    docs = {"file:///a.py": first, "file:///b.py": second}
    context = CursorContext.at(second, len(second), "python")
    source = memory.source("file:///b.py", len(second), docs)
    answer = decode(real_engine, context, DecodingSettings(), Sources(memory=source))
    texts = [s.text.strip() for s in answer.suggestions]
    assert COPY in texts[:2], texts
    cursor = Cursor(context.before, context.following, "python")
    assert malformed([s.text for s in answer.suggestions], cursor) == [""] * len(texts)
