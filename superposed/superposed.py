"""Superposed Decoding (Shen et al., 2024): k drafts from one autoregressive pass.

Each step feeds the model ONE input: the weighted sum of the k drafts' newest token
embeddings, weighted by the drafts' normalised probabilities. The model's next-token
distribution is shared; each draft re-scores its candidates with n-gram statistics of its
own context, which keeps the drafts apart and coherent:

    log p_f(x) = (1 - alpha) log p_theta(x) + alpha log p_ngram(x | draft)

and the k best (draft, candidate) extensions by cumulative score become the new drafts.

Two departures from the paper, both settings (DecodeConfig.mix, memory=None): the default
mix interpolates probabilities instead, (1 - alpha) p_theta + alpha p_ngram, because a
codebase store is small and the paper's log-linear mix vetoes (log 0) every candidate it
never saw; and longest matches over the user's code (superposed/memory.py) propose candidates
and mix in with a weight that grows with the matched length.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from superposed import memory as mem
from superposed import ranking, rows
from superposed.hypotheses import (
    Finisher,
    Hypothesis,
    constrain,
    heal_masks,
    settled,
)
from superposed.ngram import Match, NgramSource
from superposed.request import DecodeRequest
from superposed.runner import ModelRunner, prefill_reusing_cache
from superposed.types import Cancelled, DecodeConfig, Draft
from superposed.vocab import Vocab


def superposition_weights(hyps: list[Hypothesis]) -> torch.Tensor:
    """gamma [D]: the drafts' normalised probabilities (softmax of cumulative log-scores)."""
    return torch.softmax(torch.tensor([h.score for h in hyps], dtype=torch.float64), 0)


def superposed_input(runner: ModelRunner, hyps: list[Hypothesis]) -> torch.Tensor:
    """sum_i gamma_i * E(x_i) over the drafts' newest tokens -> [1, 1, H]."""
    newest = torch.tensor([[h.tokens[-1] for h in hyps]], device=runner.device)  # [1, D]
    embeds = runner.embed(newest)[0]  # [D, H]
    gamma = superposition_weights(hyps).to(embeds.device, embeds.dtype)  # [D]
    return (gamma[:, None] * embeds).sum(0)[None, None, :]  # [1, 1, H]


def superposed_step(runner: ModelRunner, hyps: list[Hypothesis]) -> torch.Tensor:
    """One step on the superposed input -> logits [1, V].

    A runner with ``step_mixture`` (cuda_graph.GraphRunner) takes the drafts' newest tokens
    and weights and mixes their embeddings inside its captured step; others get the mixed
    input made here.
    """
    step_mixture = getattr(runner, "step_mixture", None)
    if step_mixture is None:
        return runner.step(superposed_input(runner, hyps))
    newest = torch.tensor([[h.tokens[-1] for h in hyps]])  # [1, D]
    return step_mixture(newest, superposition_weights(hyps)[None])  # type: ignore[no-any-return]


def branch(
    logits: torch.Tensor,
    base: Hypothesis,
    cfg: DecodeConfig,
    vocab: Vocab,
    match: Match | None = None,
) -> list[Hypothesis]:
    """First step: the k best (allowed) tokens start k drafts from ``base``.

    With a memory match, its next tokens are candidates too, and scores are mixed with it.
    """
    logp = F.log_softmax(logits.float() / cfg.temperature, dim=-1)[None]  # [1, V]
    logp = constrain(logp, heal_masks(vocab, [base], logp.shape[-1], logp.device))
    top, ids = logp.topk(min(cfg.k, logp.shape[-1]))  # [1, k]
    top, ids = with_proposals(logp, top, ids, [match], cfg)
    scores = mem.mix(top, ids, [match], cfg)[0]
    return select([base], ids, scores[None], cfg.k, vocab)


def with_proposals(
    rows: torch.Tensor,
    top: torch.Tensor,
    candidates: torch.Tensor,
    matches: list[Match | None],
    cfg: DecodeConfig,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Candidates [D, C] and their log-probabilities, plus the matches' proposals [D, C + P].

    rows: [D, V] (or [1, V], shared) model log-probabilities, -inf where not allowed.
    """
    extra = mem.proposals(matches, candidates, cfg)
    if extra is None:
        return top, candidates
    rows = rows.expand(len(matches), -1)
    return torch.cat([top, rows.gather(1, extra)], 1), torch.cat([candidates, extra], 1)


def rescore(
    logp: torch.Tensor,
    candidates: torch.Tensor,
    contexts: list[list[int]],
    cfg: DecodeConfig,
    ngram: NgramSource | None,
) -> torch.Tensor:
    """log p_f [D, C] of each draft's candidates, mixing in the draft's n-gram probability.

    logp: [D, C] tempered model log-probabilities of candidates [D, C].
    """
    if ngram is None or cfg.alpha == 0.0:
        return logp
    result = ngram.probabilities(contexts, candidates.cpu().numpy())
    probs = torch.from_numpy(result.probs).to(logp.device, logp.dtype)  # [D, C]
    if cfg.mix == "interpolate":  # an unseen candidate keeps (1 - alpha) of the model's word
        mixed = torch.log((1 - cfg.alpha) * logp.exp() + cfg.alpha * probs)
        return torch.where(torch.isfinite(logp), mixed, logp)
    supported = torch.from_numpy(result.supported).to(logp.device)[:, None]  # [D, 1]
    log_ngram = torch.where(probs > 0, probs.log(), torch.full_like(probs, float("-inf")))
    mixed = (1 - cfg.alpha) * logp + cfg.alpha * log_ngram
    return torch.where(supported, mixed, (1 - cfg.alpha) * logp - cfg.delta)


def select(
    hyps: list[Hypothesis],
    candidates: torch.Tensor,
    scores: torch.Tensor,
    k: int,
    vocab: Vocab,
) -> list[Hypothesis]:
    """The k best extensions by cumulative score; identical texts are merged.

    Two drafts can spell the same bytes with different tokens ("Snd"+"Headers" and
    "S"+"nd"+"Headers"); keeping both would waste one of the k drafts on a duplicate.
    """
    total = torch.tensor([h.score for h in hyps], dtype=scores.dtype)[:, None] + scores.cpu()
    order = total.flatten().argsort(descending=True).tolist()
    width = candidates.shape[1]
    chosen: list[Hypothesis] = []
    seen: set[bytes] = set()
    for flat in order:
        value = float(total.flatten()[flat])
        if len(chosen) == k or value == float("-inf"):
            break
        parent, token = hyps[flat // width], int(candidates.flatten()[flat])
        key = vocab.decode([*parent.tokens, token])
        if key in seen:  # the first occurrence has the better score
            continue
        seen.add(key)
        chosen.append(parent.extend(token, value, vocab))
    return chosen


class SuperposedDecoder:
    """One superposed decoding request over a runner whose cache holds the prompt."""

    def __init__(self, request: DecodeRequest) -> None:
        self.runner, self.vocab, self.prompt = request.runner, request.vocab, request.prompt
        self.cfg, self.ngram = request.cfg, request.ngram
        self.cancel, self.memory = request.cancel, request.memory
        self.deadline = request.deadline
        self.finisher = Finisher(self.vocab, self.prompt.heal, request.stop)
        self.context_len = max(self.ngram.orders) - 1 if self.ngram is not None else 0
        self.finished: list[Draft] = []
        self.branch = self.cfg.branch
        reason = rows.fallback_reason(self.runner)
        if self.branch != "off" and reason is not None:
            rows.say_once(reason)
            self.branch = "off"

    def sort_out(self, hyps: list[Hypothesis]) -> list[Hypothesis]:
        """Set finished drafts aside; return the ones that go on."""
        alive = []
        for hyp in hyps:
            draft = self.finisher.finished(hyp)
            if draft is None:
                alive.append(hyp)
                continue
            self.finished.append(draft)
        return alive

    def _step(self, alive: list[Hypothesis]) -> list[Hypothesis]:
        """One forward on the superposed input; extend and re-score every draft."""
        logits = superposed_step(self.runner, alive)  # [1, V]
        logp = F.log_softmax(logits.float() / self.cfg.temperature, dim=-1)  # [1, V]
        width = min(self.cfg.candidates, logp.shape[-1])
        masks = heal_masks(self.vocab, alive, logp.shape[-1], logp.device)
        rows = logp if masks is None else constrain(logp.expand(len(alive), -1), masks)
        if masks is None:  # every draft draws from the same distribution: one top-k serves all
            top, candidates = (t.expand(len(alive), -1) for t in logp.topk(width, dim=-1))
        else:
            top, candidates = rows.topk(width, dim=-1)
        scores, candidates = self.score(alive, rows, top, candidates)
        return select(alive, candidates, scores, self.cfg.k, self.vocab)

    def score(
        self,
        alive: list[Hypothesis],
        rows: torch.Tensor,
        top: torch.Tensor,
        candidates: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each draft's scores of its candidates and its memory's proposals, re-scored with the
        n-gram source on its own context: (scores, candidates), [D, C] (with memory [D, C + P]).

        rows: [D, V] (or [1, V], shared) log-probabilities; top, candidates: [D, C].
        """
        matches = mem.lookup(self.memory, self.prompt.ids, [h.tokens for h in alive])
        top, candidates = with_proposals(rows, top, candidates, matches, self.cfg)
        contexts = [(self.prompt.ids + h.tokens)[-self.context_len :] for h in alive]
        scores = rescore(top, candidates, contexts, self.cfg, self.ngram)
        return mem.mix(scores, candidates, matches, self.cfg), candidates

    def _reset(self, alive: list[Hypothesis], prompt_len: int) -> list[Hypothesis]:
        """Paper 5.3: make the best draft the new prefix (prefill it) and branch again."""
        best = max(alive, key=lambda h: h.score)
        self.runner.rewind(prompt_len)
        logits = self.runner.prefill(best.tokens)
        match = mem.lookup(self.memory, self.prompt.ids, [best.tokens])[0]
        return self.sort_out(branch(logits, best, self.cfg, self.vocab, match))

    def _out_of_steps(self, hyp: Hypothesis) -> Draft:
        """A draft still going when the steps ran out: finished from its memory match where
        that reaches its stop (no model steps), else as it is."""
        match = mem.lookup(self.memory, self.prompt.ids, [hyp.tokens])[0]
        copied = mem.finish_from(hyp, match, self.cfg, self.vocab, self.finisher)
        return copied if copied is not None else self.finisher.unfinished(hyp)

    def run(self) -> list[Draft]:
        cfg = self.cfg
        logits = prefill_reusing_cache(self.runner, self.prompt.ids)  # [V]
        prompt_len = self.runner.length
        try:
            start = self.finisher.start()
            match = mem.prompt_match(self.memory, self.prompt.ids, cfg)
            seeded = mem.seeds(match, cfg, self.vocab, self.finisher)
            alive = self.sort_out(branch(logits, start, cfg, self.vocab, match))
            for step in range(1, cfg.max_new_tokens):
                if settled(self.finished, alive, cfg.settle):
                    break
                if self.cancel is not None and self.cancel():
                    raise Cancelled()
                if self.deadline is not None and self.deadline.passed(step):
                    break  # due: the drafts as far as they got (finished from the memory)
                if rows.branch_now(self.branch, alive, self.vocab):  # each draft its own row
                    alive = rows.decode_rows(self, alive, prompt_len, step)
                    break
                if cfg.reset_every and step % cfg.reset_every == 0:
                    alive = self._reset(alive, prompt_len)
                else:
                    alive = self.sort_out(self._step(alive))
        finally:
            self.runner.rewind(prompt_len)  # never leave drafts in the cached prompt
        ran_out = not settled(self.finished, alive, cfg.settle)  # the steps ran out first
        out = self._out_of_steps if ran_out else self.finisher.unfinished
        drafts = self.finished + [out(h) for h in alive]
        reserve = mem.reserves(self.memory, self.prompt.ids, cfg, self.vocab, self.finisher)
        return ranking.apply(drafts, ranking.engine_stages(seeded, cfg, reserve))


@torch.inference_mode()
def superposed_decode(request: DecodeRequest) -> list[Draft]:
    """k drafts from one superposed pass; best first. Without an n-gram source alpha is 0."""
    return SuperposedDecoder(request).run()
