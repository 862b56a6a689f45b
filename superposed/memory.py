"""Memory in decoding: longest matches over the user's code, mixed with the model, never vetoing.

A draft's context (prompt and draft tokens) is looked up in a MatchSource: the longest
suffix of it that occurs in the codebase, the user store or an open document, and the
tokens that followed it. That evidence joins the model's in probability space,

    p(x) = (1 - lambda) p_model(x) + lambda p_match(x),  lambda = max * l / (l + half)

where l is the matched length: a long exact match dominates, a short one barely counts,
and a candidate the match never saw keeps (1 - lambda) of the model's probability (lambda
< 1), so it can still win. The match's next tokens also join each draft's candidates
(``proposals``): a draft can take the store's next token even when the model's top
candidates lack it, which is how a long match seeds a draft.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from superposed.hypotheses import Finisher, Hypothesis
from superposed.ngram import Match, MatchSource
from superposed.types import DecodeConfig, Draft
from superposed.vocab import Vocab

LOOKUP_TOKENS = 256  # context tokens a lookup reads at most


def lookup(
    memory: MatchSource | None, prompt_ids: list[int], drafts: Sequence[list[int]]
) -> list[Match | None]:
    """The longest match of each draft's context (prompt + draft tokens)."""
    if memory is None:
        return [None] * len(drafts)
    head = prompt_ids[-LOOKUP_TOKENS:]
    return [memory.match((head + tokens)[-LOOKUP_TOKENS:]) for tokens in drafts]


def weight(match: Match | None, cfg: DecodeConfig) -> float:
    """lambda: the match's share against the model, growing with its length, times the
    match's own weight (a shared index's ``sharedWeight``; 1.0 for the user's code)."""
    if match is None or match.length < cfg.memory_min_length:
        return 0.0
    return match.weight * cfg.memory_max * match.length / (match.length + cfg.memory_half)


def proposals(
    matches: list[Match | None], candidates: torch.Tensor, cfg: DecodeConfig
) -> torch.Tensor | None:
    """Extra candidates [D, P]: each match's most frequent next tokens; None when none.

    Rows without proposals repeat their first candidate (a duplicate merges in select).
    """
    if cfg.memory_proposals == 0:
        return None
    rows: list[list[int]] = []
    for match in matches:
        if match is None or weight(match, cfg) == 0.0:
            rows.append([])
            continue
        ranked = sorted(match.next_counts, key=lambda t: -match.next_counts[t])
        rows.append(ranked[: cfg.memory_proposals])
    width = max(len(r) for r in rows)
    if width == 0:
        return None
    firsts = candidates[:, 0].tolist()
    padded = [r + [firsts[d]] * (width - len(r)) for d, r in enumerate(rows)]
    return torch.tensor(padded, dtype=candidates.dtype, device=candidates.device)  # [D, P]


def mix(
    scores: torch.Tensor,
    candidates: torch.Tensor,
    matches: list[Match | None],
    cfg: DecodeConfig,
) -> torch.Tensor:
    """log((1 - lambda_d) exp(scores) + lambda_d p_match_d(x)) for candidates [D, C].

    A candidate whose score is -inf (not allowed: token healing) stays -inf.
    """
    out = scores.clone()
    for d, match in enumerate(matches):
        lam = weight(match, cfg)
        if match is None or lam == 0.0:
            continue
        dist = match.distribution()
        p_match = torch.tensor(
            [dist.get(int(t), 0.0) for t in candidates[d].tolist()],
            dtype=scores.dtype,
            device=scores.device,
        )  # [C]
        mixed = torch.log((1 - lam) * scores[d].exp() + lam * p_match)
        out[d] = torch.where(torch.isfinite(scores[d]), mixed, scores[d])
    return out


def prompt_match(
    memory: MatchSource | None, prompt_ids: list[int], cfg: DecodeConfig
) -> Match | None:
    """The prompt's longest match, with the other continuations that seeds may take."""
    if memory is None:
        return None
    others = 4 * (cfg.memory_seeds - 1) if cfg.memory_seed else 0  # some end alike: spares
    return memory.match(prompt_ids[-LOOKUP_TOKENS:], follow=cfg.memory_follow, others=others)


def seeds(match: Match | None, cfg: DecodeConfig, vocab: Vocab, finisher: Finisher) -> list[Draft]:
    """Up to cfg.memory_seeds drafts copied from the match's distinct continuations."""
    if not cfg.memory_seed or match is None or match.length < cfg.memory_seed_length:
        return []
    found: list[Draft] = []
    for continuation in [match.continuation, *match.others]:
        draft = seed(continuation, cfg, vocab, finisher)
        if draft is not None and all(d.text != draft.text for d in found):
            draft.score = copy_score(match, continuation, len(draft.token_ids), cfg)
            found.append(draft)
            if len(found) == cfg.memory_seeds:
                break
    return found


def reserves(
    memory: MatchSource | None,
    prompt_ids: list[int],
    cfg: DecodeConfig,
    vocab: Vocab,
    finisher: Finisher,
) -> list[Draft]:
    """Up to cfg.memory_reserves drafts copied from the distinct continuations of the context
    as typed: the prompt and the bytes token healing took back (after ``NgramStore.`` the
    continuations of ``.``, where the prompt's own match stops before it). Each copy begins
    with those bytes, as every draft does; its score is its memory evidence (``copy_score``).
    None where the match is shorter than a seed's (memory_seed_length), or seeds are off."""
    if memory is None or not cfg.memory_seed or cfg.memory_reserves == 0:
        return []
    healed = vocab.spell(finisher.heal) if finisher.heal else []
    if healed is None:
        return []
    context = (prompt_ids + healed)[-LOOKUP_TOKENS:]
    match = memory.match(context, follow=cfg.memory_follow, others=cfg.memory_reserves)
    if match is None or match.length < cfg.memory_seed_length:
        return []
    found: list[Draft] = []
    for continuation in [match.continuation, *match.others]:
        draft = seed([*healed, *continuation], cfg, vocab, finisher)
        if draft is not None and all(d.text != draft.text for d in found):
            draft.score = copy_score(match, continuation, len(draft.token_ids), cfg)
            found.append(draft)
    return found[: cfg.memory_reserves]


def copy_score(match: Match, continuation: list[int], tokens: int, cfg: DecodeConfig) -> float:
    """A seed's own score: the log-probability the memory's side of the mix (``mix``) gives
    its ``tokens`` copied from ``continuation``, in the decoded drafts' units.

    Each token gets lambda at its match's length (the prompt's match, one token longer per
    token copied, the match's weight) times the match's share of it: its occurrences' share
    of the continuation's first token, then 1 (the copy follows one occurrence; the lookups
    that would say more are left out, decoding makes them). The model's own share of the mix
    only adds, so a decoded draft of the same tokens would score at least about this.
    -inf where the memory gives the copy nothing (ranking.settle then places it without).
    """
    total = sum(match.next_counts.values())
    share = match.next_counts.get(continuation[0], 0) / total if continuation and total else 0.0
    lams = [
        match.weight * cfg.memory_max * n / (n + cfg.memory_half)
        for n in range(match.length, match.length + tokens)
    ]
    if share <= 0.0 or any(lam <= 0.0 for lam in lams):
        return -math.inf
    return math.log(share) + sum(math.log(lam) for lam in lams)


def realign(continuation: list[int], heal: bytes, vocab: Vocab) -> list[int] | None:
    """The continuation's lines at the cursor's own line break and indentation.

    At a line start the healed text is the cursor's line break and indentation; a match
    ends before it, so its continuation starts with the line break and indentation of
    where it was found. Code copied into a deeper block, or after an added blank line, has
    other ones: the tokens spell them and the line that follows would be lost. Returns the
    healed bytes' tokens followed by the continuation past its own leading whitespace (a
    token that straddles it cut to its part past it); None where nothing needs realigning.
    The later lines (a block copied whole) move by the same indentation (``reindent``).
    """
    if not heal or heal.strip() or b"\n" not in heal:
        return None
    data = vocab.decode(continuation)
    lead = data[: len(data) - len(data.lstrip())]
    if lead == heal or b"\n" not in lead or len(lead) == len(data):
        return None
    head = vocab.spell(heal)
    if head is None:
        return None
    at = 0
    for i, token in enumerate(continuation):
        piece = vocab.token_bytes[token]
        if at + len(piece) > len(lead):
            cut = vocab.spell(piece[len(lead) - at :]) if at < len(lead) else [token]
            if cut is None:
                return None
            old, new = _indentation(lead), _indentation(heal)
            return [*head, *reindent([*cut, *continuation[i + 1 :]], old, new, vocab)]
        at += len(piece)
    return None


def reopen(continuation: list[int], heal: bytes, body: str, vocab: Vocab) -> list[int] | None:
    """At the end of a block opener, a copied body moved to the cursor's block: its first
    line at ``body`` (the opener's indentation and one level) and every later line by the same
    step; None where nothing needs moving.

    The match ends at the opener's end, so its continuation's lines keep the indentation of
    where they were found: a method's body copied after a function's ``def`` came one level
    too deep, and a function's body after a method's fell below the block's floor and was
    lost. (A cursor after a line break heals it: ``realign`` does that case.)"""
    if not body or b"\n" in heal:
        return None
    data = vocab.decode(continuation)
    if not data.startswith(heal + b"\n"):  # the healed end of the opener, then its body
        return None
    first = data[len(heal) + 1 :].split(b"\n", 1)[0]
    old = first[: len(first) - len(first.lstrip(b" \t"))]
    if not first.strip() or not old or old == body.encode():
        return None
    moved = reindent(continuation, old, body.encode(), vocab)
    return None if moved is continuation else moved


def _indentation(whitespace: bytes) -> bytes:
    """The indentation a run of line breaks and indentation ends with."""
    return whitespace[whitespace.rfind(b"\n") + 1 :]


def reindent(tokens: list[int], old: bytes, new: bytes, vocab: Vocab) -> list[int]:
    """The tokens with each later line's leading ``old`` indentation made ``new`` (a block
    moved deeper or out). Lines that do not start with ``old`` (shallower: past the copied
    block, where the block's end rules stop it) and the first line are kept as they are;
    the tokens from the first changed line on are spelled again (where they cannot be,
    the tokens are kept as they are)."""
    if old == new:
        return tokens
    data = vocab.decode(tokens)
    rows = data.split(b"\n")
    moved = [rows[0]] + [new + r[len(old) :] if r.startswith(old) else r for r in rows[1:]]
    if moved == rows:
        return tokens
    first = next(i for i, (a, b) in enumerate(zip(rows, moved, strict=True)) if a != b)
    keep = len(b"\n".join(rows[:first])) + 1  # the bytes before that line's start
    text = b"\n".join(moved)
    at = 0
    for i, token in enumerate(tokens):
        end = at + len(vocab.token_bytes[token])
        if end > keep:  # the first token past the unchanged bytes: spelled again from here
            tail = vocab.spell(text[at:])
            return tokens if tail is None else [*tokens[:i], *tail]
        at = end
    return tokens


def seed(
    continuation: list[int], cfg: DecodeConfig, vocab: Vocab, finisher: Finisher
) -> Draft | None:
    """A match's continuation copied as a draft up to its stop (the line's end), or None when
    it disagrees with the healed text (or breaks the line the draft must continue).

    At a line start, the continuation's next line is re-indented to the cursor's (realign).
    """
    ended = len(continuation) < cfg.memory_follow  # the copied file ends there
    continuation = (
        realign(continuation, finisher.heal, vocab)
        or reopen(continuation, finisher.heal, finisher.stop.body, vocab)
        or continuation
    )
    hyp = finisher.start()
    for token in continuation:  # no model steps: max_new_tokens does not bound a copy
        if token in vocab.eos_ids:
            break
        if not hyp.allows(token, vocab):
            return None
        hyp = hyp.extend(token, 0.0, vocab)
        draft = finisher.finished(hyp)
        if draft is not None:
            return draft if draft.text.strip() else None
    draft = finisher.unfinished(hyp)
    draft.finished = ended
    return draft if draft.text.strip() and not hyp.heal else None


def finish_from(
    hyp: Hypothesis, match: Match | None, cfg: DecodeConfig, vocab: Vocab, finisher: Finisher
) -> Draft | None:
    """A draft the step budget stopped, finished from its own match's continuation, or None.

    The budget counts model steps: a draft that follows a long match (a line from another
    open document) would otherwise come back cut (without its closing ")", issue 23). Its
    tokens copied up to its stop; None where the match is short, disagrees with what the
    draft may emit, or ends first."""
    if match is None or match.length < cfg.memory_seed_length:
        return None
    for token in match.continuation:
        if token in vocab.eos_ids or not hyp.allows(token, vocab):
            return None
        hyp = hyp.extend(token, hyp.score, vocab)
        draft = finisher.finished(hyp)
        if draft is not None:
            return draft
    return None
