"""The baselines, on the same runner: greedy, nucleus (sequential and batched), beam search,
and the paper's combination (section 4.5) of nucleus prefixes expanded by superposition."""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F

from superposed.hypotheses import (
    Finisher,
    Hypothesis,
    constrain,
    heal_masks,
    settled,
)
from superposed.prompt import Prompt
from superposed.ranking import best_drafts
from superposed.request import DecodeRequest
from superposed.runner import prefill_reusing_cache
from superposed.superposed import superposed_decode
from superposed.types import Cancelled, Draft


def top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of tokens whose probability reaches top_p; logits [B, V]."""
    if top_p >= 1.0:
        return logits  # every token: no sort of the vocabulary needed
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    cumulative = sorted_logits.softmax(-1).cumsum(-1)
    drop = cumulative - sorted_logits.softmax(-1) >= top_p  # mass before this token suffices
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)


class _RowDecoder:
    """B independent rows, one token per row per step (greedy, nucleus)."""

    def __init__(self, request: DecodeRequest) -> None:
        cfg = request.cfg
        self.runner, self.vocab, self.prompt = request.runner, request.vocab, request.prompt
        self.cfg, self.cancel = cfg, request.cancel
        self.finisher = Finisher(self.vocab, self.prompt.heal, request.stop)
        self.generator = torch.Generator().manual_seed(cfg.seed if cfg.seed is not None else 0)
        if cfg.seed is None:
            self.generator.seed()

    def choose(self, logits: torch.Tensor, sample: bool) -> torch.Tensor:
        """Next token per row from constrained logits [B, V]."""
        if not sample:
            return logits.argmax(-1)
        filtered = top_p_filter(logits / self.cfg.nucleus_temperature, self.cfg.top_p)
        probs = filtered.softmax(-1).cpu()
        return torch.multinomial(probs, 1, generator=self.generator)[:, 0].to(logits.device)

    def run(self, rows: int, sample: bool, max_new_tokens: int) -> list[Hypothesis]:
        """Decode ``rows`` rows from the cached prompt; a finished row stops growing."""
        logits = prefill_reusing_cache(self.runner, self.prompt.ids)[None].expand(rows, -1)
        prompt_len = self.runner.length
        hyps = [self.finisher.start() for _ in range(rows)]
        done: list[Draft | None] = [None] * rows
        try:
            self.runner.expand(rows)
            for step in range(max_new_tokens):
                if self.cancel is not None and self.cancel():
                    raise Cancelled()
                logp = F.log_softmax(logits.float(), dim=-1)  # [B, V]
                masked = constrain(logp, heal_masks(self.vocab, hyps, logp.shape[-1], logp.device))
                tokens = self.choose(masked, sample)  # [B]
                for r, token in enumerate(tokens.tolist()):
                    if done[r] is None:
                        score = hyps[r].score + float(logp[r, token])
                        hyps[r] = hyps[r].extend(token, score, self.vocab)
                        done[r] = self.finisher.finished(hyps[r])
                if all(d is not None for d in done) or step == max_new_tokens - 1:
                    break
                logits = self.runner.step(self.runner.embed(tokens[:, None]))  # [B, V]
        finally:
            self.runner.rewind(prompt_len)
        return hyps

    def draft(self, hyp: Hypothesis) -> Draft:
        """A row as a draft: finished (EOS, a stop) or cut off at the token limit."""
        done = self.finisher.finished(hyp)
        return done if done is not None else self.finisher.unfinished(hyp)

    def drafts(self, rows: int, sample: bool) -> list[Draft]:
        return [self.draft(h) for h in self.run(rows, sample, self.cfg.max_new_tokens)]


@torch.inference_mode()
def greedy(request: DecodeRequest) -> list[Draft]:
    """One draft: the most probable token at every step."""
    return _RowDecoder(request).drafts(1, False)


@torch.inference_mode()
def nucleus_batched(request: DecodeRequest) -> list[Draft]:
    """k nucleus samples as ONE batch of k rows sharing the prefilled prompt."""
    return _RowDecoder(request).drafts(request.cfg.k, True)


@torch.inference_mode()
def nucleus_sequential(request: DecodeRequest) -> list[Draft]:
    """k nucleus samples as k separate runs (the prompt cache is reused between them)."""
    decoder = _RowDecoder(request)
    return [draft for _ in range(request.cfg.k) for draft in decoder.drafts(1, True)]


@torch.inference_mode()
def beam_search(request: DecodeRequest) -> list[Draft]:
    """Beam search of width k; finished beams are set aside; returns the k best."""
    runner, vocab, prompt, cfg = request.runner, request.vocab, request.prompt, request.cfg
    cancel = request.cancel
    finisher = Finisher(vocab, prompt.heal, request.stop)
    logits = prefill_reusing_cache(runner, prompt.ids)[None]  # [1, V]
    prompt_len = runner.length
    beams = [finisher.start()]
    finished: list[Draft] = []
    try:
        for step in range(cfg.max_new_tokens):
            if cancel is not None and cancel():
                raise Cancelled()
            logp = F.log_softmax(logits.float(), dim=-1)  # [B, V]
            logp = constrain(logp, heal_masks(vocab, beams, logp.shape[-1], logp.device))
            total = torch.tensor([b.score for b in beams], device=logp.device)[:, None] + logp
            values, flat = total.flatten().topk(min(2 * cfg.k, total.numel()))
            parents: list[int] = []
            survivors: list[Hypothesis] = []
            for value, index in zip(values.tolist(), flat.tolist(), strict=True):
                if value == float("-inf") or len(survivors) == cfg.k:
                    break
                parent, token = divmod(index, logp.shape[-1])
                hyp = beams[parent].extend(token, value, vocab)
                draft = finisher.finished(hyp)
                if draft is not None:
                    finished.append(draft)
                else:
                    parents.append(parent)
                    survivors.append(hyp)
            beams = survivors
            if not beams or settled(finished, beams, cfg.k) or step == cfg.max_new_tokens - 1:
                break
            if step == 0:
                runner.expand(len(beams))
            else:
                runner.select(torch.tensor(parents, device=runner.device))
            newest = torch.tensor([[b.tokens[-1]] for b in beams], device=runner.device)
            logits = runner.step(runner.embed(newest))
    finally:
        runner.rewind(prompt_len)
    return best_drafts(finished + [finisher.unfinished(b) for b in beams], cfg.k)


@torch.inference_mode()
def nucleus_superposed(request: DecodeRequest) -> list[Draft]:
    """Paper 4.5: n nucleus prefixes, each expanded into k superposed drafts (n passes)."""
    prompt, cfg = request.prompt, request.cfg
    decoder = _RowDecoder(request)
    drafts: list[Draft] = []
    prefix_len = min(cfg.nucleus_prefix_tokens, cfg.max_new_tokens - 1)
    try:
        for _ in range(cfg.nucleus_prefixes):
            no_prefix = [decoder.finisher.start()]
            (row,) = decoder.run(1, True, prefix_len) if prefix_len > 0 else no_prefix
            done = decoder.finisher.finished(row) if row.tokens else None  # no prefix: not done
            if done is not None:  # the prefix alone finished
                drafts.append(done)
                continue
            extended = Prompt(ids=prompt.ids + row.tokens, heal=row.heal)
            rest = cfg.max_new_tokens - len(row.tokens)
            inner = replace(
                request.stop, continue_line=row.blank
            )  # the prefix may have left the line
            sub = replace(
                request, prompt=extended, cfg=replace(cfg, max_new_tokens=rest), stop=inner
            )
            prefix_text = decoder.finisher.unfinished(row).text
            for draft in superposed_decode(sub):
                drafts.append(
                    Draft(
                        prefix_text + draft.text,
                        row.tokens + draft.token_ids,
                        row.score + draft.score,
                        draft.finished,
                    )
                )
    finally:
        request.runner.rewind(len(prompt.ids))  # the superposed passes leave their prefix
    return best_drafts(drafts, cfg.k * cfg.nucleus_prefixes)
