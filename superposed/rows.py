"""Branching into rows: after the branch point, every superposed draft goes on in its own row.

One superposed input (the weighted sum of the drafts' newest embeddings) is dominated by
the best draft, so drafts 2 and 3 decoded in it read as the best draft's text with a
corruption in it (issue 38). At the branch point (DecodeConfig.branch) the cache is rewound
to the prompt and replicated into one row per draft; each draft's tokens become its row's
history in one batched forward (the superposed steps' cache positions are no draft's
history), and from then on each row extends its own draft with its own logits, re-scored
with the n-gram source on its own context and mixed with its own memory match as the
superposed step does. A row whose draft finishes leaves the batch.

Where to branch:
- "off": never (the superposed path all the way);
- "first": right after the first token (the k best first tokens start k rows);
- "split": at the first step whose drafts differ beyond whitespace (near-duplicates such as
  " return" and "return" are decoded superposed a step longer).

A runner without batches (no expand/score/select) stays on the superposed path; the log
says so once.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

import torch
import torch.nn.functional as F

from superposed.hypotheses import Hypothesis, constrain, heal_masks, settled
from superposed.types import Cancelled

if TYPE_CHECKING:
    from superposed.runner import ModelRunner
    from superposed.types import CancelCheck, DecodeConfig, Draft
    from superposed.vocab import Vocab

log = logging.getLogger(__name__)
_BATCHED = ("expand", "score", "select")
_said: set[str] = set()  # the fallbacks already logged (once per process each)


class RowDecoder(Protocol):
    """What decoding in rows needs of the decoder that branches (superposed.py's
    SuperposedDecoder, which rows.py does not import): the request's parts, the finished
    drafts, and the two parts of a superposed step that each row's step shares."""

    runner: ModelRunner
    vocab: Vocab
    cfg: DecodeConfig
    cancel: CancelCheck | None
    finished: list[Draft]

    def score(
        self,
        alive: list[Hypothesis],
        rows: torch.Tensor,
        top: torch.Tensor,
        candidates: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each draft's candidates and memory proposals re-scored: (scores, candidates)."""
        ...

    def sort_out(self, hyps: list[Hypothesis]) -> list[Hypothesis]:
        """Set finished drafts aside (into ``finished``); return the ones that go on."""
        ...


def fallback_reason(runner: ModelRunner) -> str | None:
    """Why this request cannot branch into rows, or None when it can."""
    missing = [name for name in _BATCHED if not callable(getattr(runner, name, None))]
    if missing:
        return f"runner {type(runner).__name__} has no {', '.join(missing)}: no batched rows"
    return None


def say_once(reason: str) -> None:
    """Log a fallback to the superposed path the first time it happens."""
    if reason not in _said:
        _said.add(reason)
        log.warning("branch: staying superposed: %s", reason)


def differ(alive: list[Hypothesis], vocab: Vocab) -> bool:
    """Whether the drafts' texts are pairwise different once whitespace is taken out."""
    texts = [b"".join(vocab.decode(h.tokens).split()) for h in alive]
    return len(set(texts)) == len(texts)


def branch_now(mode: str, alive: list[Hypothesis], vocab: Vocab) -> bool:
    """Whether the live drafts leave the superposition for their own rows now."""
    if mode == "off" or len(alive) < 2 or len({len(h.tokens) for h in alive}) != 1:
        return False  # rows start together: one history length (every superposed step adds one)
    return mode == "first" or differ(alive, vocab)


def extend_rows(
    dec: RowDecoder, alive: list[Hypothesis], logits: torch.Tensor
) -> list[Hypothesis | None]:
    """Each row's draft extended by its own best re-scored candidate (None: nothing allowed).

    logits: [D, V], row i's next-token logits after draft i's tokens.
    """
    cfg = dec.cfg
    logp = F.log_softmax(logits.float() / cfg.temperature, dim=-1)  # [D, V]
    logp = constrain(logp, heal_masks(dec.vocab, alive, logp.shape[-1], logp.device))
    top, candidates = logp.topk(min(cfg.candidates, logp.shape[-1]), dim=-1)  # [D, C]
    scores, candidates = dec.score(alive, logp, top, candidates)  # as the superposed step
    scores = scores.cpu()  # [D, C + P]
    best = scores.argmax(1)  # [D]
    out: list[Hypothesis | None] = []
    for i, hyp in enumerate(alive):
        value = float(scores[i, best[i]])
        token = int(candidates[i, best[i]])
        out.append(
            None if value == float("-inf") else hyp.extend(token, hyp.score + value, dec.vocab)
        )
    return out


def decode_rows(
    dec: RowDecoder, alive: list[Hypothesis], prompt_len: int, step: int
) -> list[Hypothesis]:
    """Decode the live drafts in rows from ``step`` on; return those the steps ran out on.

    Finished drafts go to ``dec.finished``; the caller rewinds the cache to the prompt.
    """
    runner, cfg = dec.runner, dec.cfg
    runner.rewind(prompt_len)
    runner.expand(len(alive))
    history = torch.tensor([h.tokens for h in alive], device=runner.device)  # [D, T]
    logits: torch.Tensor | None = runner.score(history)[:, -1]  # [D, V]
    rows = len(alive)  # rows in the cache
    kept = list(range(rows))  # the cache rows of the live drafts
    for _ in range(step, cfg.max_new_tokens):
        if settled(dec.finished, alive, cfg.settle):
            break
        if dec.cancel is not None and dec.cancel():
            raise Cancelled()
        if logits is None:  # the newest tokens of the rows still going, in their rows
            if len(kept) < rows:  # finished rows leave the batch
                runner.select(torch.tensor(kept, device=runner.device))
                rows = len(kept)
            newest = torch.tensor([[h.tokens[-1]] for h in alive], device=runner.device)
            logits = runner.step(runner.embed(newest))  # [D, V]
        extended = extend_rows(dec, alive, logits)
        kept, alive = [], []
        for row, hyp in enumerate(extended):
            if hyp is not None and dec.sort_out([hyp]):  # neither stuck nor finished
                kept.append(row)
                alive.append(hyp)
        if not alive:
            break
        logits = None
    return alive
