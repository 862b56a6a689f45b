"""What a long verbatim match from the memory says: the draft that says it leads.

A memory seed (superposed/memory.py: the prompt's longest match copied as a draft) is placed
at a fixed rank (superposed/ranking.py ``place``), whatever its evidence: where another open
document goes on from the same 70 tokens with
``registry.attach_quuxifier(settings.quux_level, strict=True, retries=7)``, that copy came
third, behind drafts the model made up (issue 38). Here the evidence decides: where the
prompt's match is long (``LEAD_TOKENS``, scaled by the match's weight: a shared index counts
less) and its occurrences agree on the next token, the draft that says what the match goes
on with (``says``: a seed, or a decoded draft that says the same) comes first (the ranking
stage ``ranking.led``, in lsp_server/completion/decode.py's list).
"""

from __future__ import annotations

from superposed.api import Engine
from superposed.memory import LOOKUP_TOKENS
from superposed.ngram import Match, MatchSource
from superposed.prompt import Prompt
from superposed.vocab import Vocab

# Matched prompt tokens from which a verbatim copy leads: about two lines of code. A shorter
# match (a common idiom) leaves the seed where the engine placed it.
LEAD_TOKENS = 32
AGREEING = 0.5  # the commonest next token's share of the match's occurrences, at least


def _lines(text: str) -> list[str]:
    return [row.strip() for row in text.split("\n") if row.strip()]


def says(text: str, copied: str) -> bool:
    """Whether ``text`` says what ``copied`` goes on with: its lines (indentation aside) are
    the copy's first lines; the copy's last line may be cut short (the match's end)."""
    mine, theirs = _lines(text), _lines(copied)
    if not mine or not theirs:
        return False
    n = len(mine)
    if n < len(theirs):
        return mine == theirs[:n]
    whole = mine[: len(theirs) - 1] == theirs[:-1]
    return whole and mine[len(theirs) - 1].startswith(theirs[-1])


def leading_text(match: Match | None, prompt: Prompt, vocab: Vocab) -> str | None:
    """What the prompt's match goes on with past the healed bytes, where its evidence is
    long and agreeing enough to lead; None where it is not."""
    if match is None or not match.next_counts or not match.continuation:
        return None
    if match.length * match.weight < LEAD_TOKENS:
        return None
    counts = match.next_counts.values()
    if max(counts) < AGREEING * sum(counts):
        return None
    data = vocab.decode(match.continuation)
    if not data.startswith(prompt.heal):
        return None
    return data[len(prompt.heal) :].decode("utf-8", "replace")


def prompt_match(memory: MatchSource | None, prompt: Prompt, follow: int) -> Match | None:
    """The prompt's match in ``memory`` (one more lookup: the engine's is inside its
    decoding); None without a memory."""
    if memory is None:
        return None
    return memory.match(prompt.ids[-LOOKUP_TOKENS:], follow=follow)


def prompt_lead(
    memory: MatchSource | None, prompt: Prompt, engine: Engine, follow: int
) -> str | None:
    """``leading_text`` of the prompt's match in ``memory``; None without a memory."""
    return leading_text(prompt_match(memory, prompt, follow), prompt, engine.vocab)
