"""The baselines, on the same runner: greedy, nucleus (sequential and batched), beam search,
and the paper's combination (section 4.5) of nucleus prefixes expanded by superposition."""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F

from lsp_server.engine.hypotheses import (
    Finisher,
    Hypothesis,
    best_drafts,
    constrain,
    heal_masks,
    settled,
)
from lsp_server.engine.ngram import NgramSource
from lsp_server.engine.prompt import Prompt
from lsp_server.engine.runner import ModelRunner, prefill_reusing_cache
from lsp_server.engine.superposed import superposed_decode
from lsp_server.engine.types import CancelCheck, Cancelled, DecodeConfig, Draft, StopCondition
from lsp_server.engine.vocab import Vocab


def top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of tokens whose probability reaches top_p; logits [B, V]."""
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    cumulative = sorted_logits.softmax(-1).cumsum(-1)
    drop = cumulative - sorted_logits.softmax(-1) >= top_p  # mass before this token suffices
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)


class _RowDecoder:
    """B independent rows, one token per row per step (greedy, nucleus)."""

    def __init__(
        self,
        runner: ModelRunner,
        vocab: Vocab,
        prompt: Prompt,
        cfg: DecodeConfig,
        stop: StopCondition,
        cancel: CancelCheck | None,
    ) -> None:
        self.runner, self.vocab, self.prompt, self.cfg, self.cancel = (
            runner,
            vocab,
            prompt,
            cfg,
            cancel,
        )
        self.finisher = Finisher(vocab, prompt.heal, stop)
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

    def run(self, rows: int, sample: bool, max_new_tokens: int) -> list[Hypothesis | Draft]:
        """Decode ``rows`` rows from the cached prompt; each row ends as a Draft or Hypothesis."""
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
        return [d if d is not None else h for d, h in zip(done, hyps, strict=True)]

    def drafts(self, rows: int, sample: bool) -> list[Draft]:
        return [
            r if isinstance(r, Draft) else self.finisher.unfinished(r)
            for r in self.run(rows, sample, self.cfg.max_new_tokens)
        ]


@torch.inference_mode()
def greedy(
    runner: ModelRunner,
    vocab: Vocab,
    prompt: Prompt,
    cfg: DecodeConfig,
    ngram: NgramSource | None = None,
    stop: StopCondition | None = None,
    cancel: CancelCheck | None = None,
) -> list[Draft]:
    """One draft: the most probable token at every step."""
    cfg.validate()
    return _RowDecoder(runner, vocab, prompt, cfg, stop or StopCondition(), cancel).drafts(1, False)


@torch.inference_mode()
def nucleus_batched(
    runner: ModelRunner,
    vocab: Vocab,
    prompt: Prompt,
    cfg: DecodeConfig,
    ngram: NgramSource | None = None,
    stop: StopCondition | None = None,
    cancel: CancelCheck | None = None,
) -> list[Draft]:
    """k nucleus samples as ONE batch of k rows sharing the prefilled prompt."""
    cfg.validate()
    decoder = _RowDecoder(runner, vocab, prompt, cfg, stop or StopCondition(), cancel)
    return decoder.drafts(cfg.k, True)


@torch.inference_mode()
def nucleus_sequential(
    runner: ModelRunner,
    vocab: Vocab,
    prompt: Prompt,
    cfg: DecodeConfig,
    ngram: NgramSource | None = None,
    stop: StopCondition | None = None,
    cancel: CancelCheck | None = None,
) -> list[Draft]:
    """k nucleus samples as k separate runs (the prompt cache is reused between them)."""
    cfg.validate()
    decoder = _RowDecoder(runner, vocab, prompt, cfg, stop or StopCondition(), cancel)
    return [draft for _ in range(cfg.k) for draft in decoder.drafts(1, True)]


@torch.inference_mode()
def beam_search(
    runner: ModelRunner,
    vocab: Vocab,
    prompt: Prompt,
    cfg: DecodeConfig,
    ngram: NgramSource | None = None,
    stop: StopCondition | None = None,
    cancel: CancelCheck | None = None,
) -> list[Draft]:
    """Beam search of width k; finished beams are set aside; returns the k best."""
    cfg.validate()
    finisher = Finisher(vocab, prompt.heal, stop or StopCondition())
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
def nucleus_superposed(
    runner: ModelRunner,
    vocab: Vocab,
    prompt: Prompt,
    cfg: DecodeConfig,
    ngram: NgramSource | None = None,
    stop: StopCondition | None = None,
    cancel: CancelCheck | None = None,
) -> list[Draft]:
    """Paper 4.5: n nucleus prefixes, each expanded into k superposed drafts (n passes)."""
    cfg.validate()
    stop = stop or StopCondition()
    decoder = _RowDecoder(runner, vocab, prompt, cfg, stop, cancel)
    drafts: list[Draft] = []
    prefix_len = min(cfg.nucleus_prefix_tokens, cfg.max_new_tokens - 1)
    for _ in range(cfg.nucleus_prefixes):
        no_prefix: list[Hypothesis | Draft] = [decoder.finisher.start()]
        (row,) = decoder.run(1, True, prefix_len) if prefix_len > 0 else no_prefix
        if isinstance(row, Draft):  # the prefix alone finished
            drafts.append(row)
            continue
        extended = Prompt(ids=prompt.ids + row.tokens, heal=row.heal)
        rest = cfg.max_new_tokens - len(row.tokens)
        sub = DecodeConfig(**{**cfg.__dict__, "max_new_tokens": rest})
        prefix_text = decoder.finisher.unfinished(row).text
        inner = replace(stop, continue_line=row.blank)  # the prefix may have left the line
        for draft in superposed_decode(runner, vocab, extended, sub, ngram, inner, cancel):
            drafts.append(
                Draft(
                    prefix_text + draft.text,
                    row.tokens + draft.token_ids,
                    row.score + draft.score,
                    draft.finished,
                )
            )
    runner.rewind(len(prompt.ids))
    return best_drafts(drafts, cfg.k * cfg.nucleus_prefixes)
