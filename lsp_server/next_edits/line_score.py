"""The model's word on a site (issue 55 item 1): does the rewritten line read better?

A site's score is log P(window + rewritten line) - log P(window + line as it stands) under
the loaded model: positive where the model prefers the rewrite. Only the tokens from the
first one where the two lines' tokens differ count (the ones before are the same in both
and cancel), up to the line's end (its newline included): the rest of a line after a
renamed name is read in the light of the new name.

All candidates of one change go through the model together, in two forward calls on the
runner's cache (its ``ModelRunner`` protocol): the contexts [K, C] (each candidate's edited
line and the tokens before its lines part, left-padded with newlines to the longest), then
each row copied twice and the two endings [2K, S] (right-padded: a causal model's earlier
positions never read the padding). The runner's cache is emptied before and after: the
next completion prefills its prompt from the start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

WINDOW = 32  # tokens of context before the point where the two lines part
EDIT_TOKENS = 24  # tokens of the user's edited line, read before that window
CONTEXT_CHARS = 2_000  # text before the site's line that is tokenized to find that window


@dataclass(frozen=True)
class Rewrite:
    """A site as the model reads it: the text before its line, the line, the line rewritten,
    and the line where the user made the edit (the model reads the new name there)."""

    before: str  # the document's text up to the line's start
    old: str  # the line as it stands (no newline)
    new: str  # the line with the site's rewrite made
    edit: str = ""  # the line the user's edit left, read first ("": none)


@dataclass(frozen=True)
class Scored:
    """A rewrite's log-probabilities: the rewritten ending's and the standing one's, summed
    over their tokens (``new_tokens``, ``old_tokens``)."""

    new_logp: float
    old_logp: float
    new_tokens: int
    old_tokens: int

    @property
    def total(self) -> float:
        """log P(rewritten) - log P(as it stands): the likelihood ratio of the two texts."""
        return self.new_logp - self.old_logp

    @property
    def mean(self) -> float:
        """The same per token of each ending (a longer name costs no more)."""
        return self.new_logp / max(1, self.new_tokens) - self.old_logp / max(1, self.old_tokens)


def _encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


def split(tokenizer: Any, rewrite: Rewrite, window: int) -> tuple[list[int], list[int], list[int]]:
    """(context, old ending, new ending): the edited line's last EDIT_TOKENS tokens and the
    last ``window`` tokens both texts share, then each text's tokens from the first that
    differs to the line's end."""
    before = rewrite.before[-CONTEXT_CHARS:]
    old = _encode(tokenizer, before + rewrite.old + "\n")
    new = _encode(tokenizer, before + rewrite.new + "\n")
    common = 0
    while common < min(len(old), len(new)) - 1 and old[common] == new[common]:
        common += 1
    edit = _encode(tokenizer, rewrite.edit + "\n")[-EDIT_TOKENS:] if rewrite.edit else []
    return edit + old[max(0, common - window) : common], old[common:], new[common:]


@torch.inference_mode()
def score_rewrites(engine: Any, rewrites: Sequence[Rewrite], window: int = WINDOW) -> list[Scored]:
    """Each rewrite's score (see the module), all in one batch. ``engine``: what it reads of
    superposed.api.Engine, its tokenizer and runner; call it where the engine may run (the
    engine thread): the runner's cache is emptied."""
    if not rewrites:
        return []
    tokenizer, runner = engine.tokenizer, engine.runner
    newline = _encode(tokenizer, "\n")[0]
    parts = [split(tokenizer, r, window) for r in rewrites]
    k = len(parts)
    width = max(len(c) for c, _, _ in parts)
    contexts = torch.tensor([[newline] * (width - len(c)) + c for c, _, _ in parts])  # [K, C]
    endings = [e for _, old, new in parts for e in (old, new)]  # 2K: old, new per rewrite
    s = max(len(e) for e in endings)
    padded = torch.tensor([e + [newline] * (s - len(e)) for e in endings])  # [2K, S]
    runner.rewind(0)
    try:
        first = runner.prefill([newline])  # [V]: the row every window follows
        runner.expand(k)
        # [K, V]: what follows each context
        first = runner.score(contexts)[:, -1] if width else first.expand(k, -1)
        runner.select(torch.arange(k).repeat_interleave(2))
        logits = runner.score(padded)  # [2K, S, V]
    finally:
        runner.rewind(0)
    # position j's logits predict token j + 1; the first token is predicted by the window
    predicting = torch.cat([first.repeat_interleave(2, dim=0)[:, None], logits[:, :-1]], dim=1)
    logp = torch.log_softmax(predicting.float(), dim=-1).gather(2, padded[:, :, None])[..., 0]
    sums = [float(logp[i, : len(e)].sum()) for i, e in enumerate(endings)]  # [2K]
    return [
        Scored(sums[2 * i + 1], sums[2 * i], len(new), len(old))
        for i, (_, old, new) in enumerate(parts)
    ]
