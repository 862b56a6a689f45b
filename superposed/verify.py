"""Verified drafts: the final drafts scored under the model exactly, in one batched forward.

Superposed decoding scores a draft by the shared distribution of the superposition and by
memory evidence, not by the model's probability of that draft alone; a draft carrying
cross-talk ("for len(f.readlines())") can outrank a clean one. Before answering, every
draft's tokens run through the model over the cached prompt, as a batch of rows (the
prompt's last token first, for the first draft token's logits), and the drafts are ordered
by their mean log-probability per token; drafts far below the best are dropped. It is one
of the ranking stages (superposed/ranking.py ``rescored``), applied after the method's own.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from superposed import ranking
from superposed.runner import ModelRunner
from superposed.types import DecodeConfig, Draft


@torch.inference_mode()
def draft_logprobs(runner: ModelRunner, prompt_ids: list[int], drafts: list[Draft]) -> list[float]:
    """Mean model log-probability per token of each draft's tokens after the prompt.

    The runner's cache holds ``prompt_ids``; it is left holding all but the prompt's last
    token (the next request recomputes that token anyway, see reusable_prefix).
    """
    lengths = [len(d.token_ids) for d in drafts]
    width = max(lengths, default=0)
    if width == 0 or not prompt_ids:
        return [0.0] * len(drafts)
    base = len(prompt_ids) - 1
    rows = [
        [prompt_ids[-1], *d.token_ids, *[prompt_ids[-1]] * (width - len(d.token_ids))]
        for d in drafts
    ]
    ids = torch.tensor(rows, dtype=torch.long, device=runner.device)  # [D, 1 + T]
    try:
        runner.rewind(base)
        runner.expand(len(drafts))
        logits = runner.score(ids)  # [D, 1 + T, V]
    finally:
        runner.rewind(base)
    logp = F.log_softmax(logits[:, :-1].float(), dim=-1)  # [D, T]: predicts ids[:, 1:]
    picked = logp.gather(-1, ids[:, 1:, None].to(logp.device))[..., 0]  # [D, T]
    valid = torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]  # [D, T]
    total = (picked.cpu() * valid).sum(1)
    return [float(t) / n if n else 0.0 for t, n in zip(total.tolist(), lengths, strict=True)]


def verified(
    runner: ModelRunner, prompt_ids: list[int], cfg: DecodeConfig
) -> ranking.Stage[Draft]:
    """The verify stage (ranking.rescored): the drafts ordered by their model log-probability
    per token (``draft_logprobs``), which becomes their score; those more than
    ``cfg.verify_margin`` below the best are dropped."""
    return ranking.rescored(
        lambda drafts: draft_logprobs(runner, prompt_ids, drafts), cfg.verify_margin
    )
