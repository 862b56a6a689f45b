"""How sure a request's first draft is, from what decoding already knows (issue 57).

``features`` reads the engine's drafts as decoded (before the distinct-drafts stage makes them
differ on purpose), the drafts as cleaned up, the first one shown and the memory's lead;
``confidence`` weighs them with a logistic fit (``COEFFICIENTS``) into the probability that
the first draft shown is right. bench/confidence.py fits the weights on the replay's validation
split (bench/results/confidence.json, which a test holds ``COEFFICIENTS`` to). A few
arithmetic operations over at most k + 2 drafts: far under a millisecond
(``timing_ms["confidence"]``).

What the engine does not hand up, and is read from its drafts instead: the first token's
probability is the share of the drafts' probability mass (a softmax of their scores, which
mix in the n-grams and the memory) on the first draft's first token.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from lsp_server.completion.cleanup import Suggestion
from lsp_server.completion.evidence import says
from lsp_server.settings import DecodingSettings
from superposed.ngram import Match
from superposed.types import Draft

MARGIN_CAP = 10.0  # a score margin beyond this says nothing more (and one draft alone has it)

# The features, in the order of the fit's weights; "bias" is the constant 1.
FEATURES = (
    "bias",
    "mean_logp",  # the first decoded draft's mean log-probability per token
    "share",  # its share of the drafts' probability mass (softmax of their scores)
    "margin",  # its score over the second's, at most MARGIN_CAP
    "first_token_share",  # the mass on drafts that start with its first token
    "agree",  # cleaned drafts equal to the first shown, over all cleaned drafts
    "prefix",  # their mean shared prefix with it, over its length
    "memory_length",  # log(1 + tokens the prompt's memory match is long, by its weight)
    "memory_agree",  # the commonest next token's share of the match's occurrences
    "memory_lead",  # the match is long and agreeing enough to lead (evidence.py)
    "memory_says",  # the memory's lead says the first shown draft
    "from_memory",  # the first shown draft is a memory copy
    "length",  # log(1 + its length in characters)
    "mid_line",  # the cursor has code before it on its line
)

# bench/confidence.py's fit on the validation split (bench/results/confidence.json).
COEFFICIENTS: dict[str, float] = {
    "bias": -0.6202,
    "mean_logp": 1.3243,
    "share": 0.3807,
    "margin": 0.0439,
    "first_token_share": 0.1293,
    "agree": 0.0697,
    "prefix": 0.3358,
    "memory_length": 0.0142,
    "memory_agree": 0.2663,
    "memory_lead": 0.0545,
    "memory_says": 0.1861,
    "from_memory": -0.1618,
    "length": -0.5334,
    "mid_line": 0.6968,
}


def features(
    drafts: Sequence[Draft],
    cleaned: Sequence[Suggestion],
    first: Suggestion | None,
    match: Match | None,
    evidence: str | None,
    mid_line: bool,
) -> dict[str, float]:
    """What decoding knows of the first draft shown (``FEATURES``); empty when none is shown.

    drafts: the engine's, best first, as decoded; cleaned: the same after the clean-up, before
    the ranking stages; first: the draft shown first; match: the prompt's memory match;
    evidence: what it goes on with where it leads (evidence.py).
    """
    scored = [d for d in drafts if math.isfinite(d.score)]
    if first is None or not first.text.strip() or not scored:
        return {}
    top = scored[0]
    high = max(d.score for d in scored)
    weights = [math.exp(d.score - high) for d in scored]
    total = sum(weights)
    head = top.token_ids[:1]
    want = first.text.strip()
    texts = [s.text.strip() for s in cleaned] or [want]
    counts = match.next_counts if match is not None else {}
    margin = scored[0].score - scored[1].score if len(scored) > 1 else MARGIN_CAP
    return {
        "bias": 1.0,
        "mean_logp": top.score / max(1, len(top.token_ids)),
        "share": weights[0] / total,
        "margin": min(margin, MARGIN_CAP),
        "first_token_share": sum(
            w for w, d in zip(weights, scored, strict=True) if d.token_ids[:1] == head
        )
        / total,
        "agree": sum(t == want for t in texts) / len(texts),
        "prefix": sum(shared_prefix(t, want) for t in texts) / (len(texts) * len(want)),
        "memory_length": math.log1p(match.length * match.weight) if match else 0.0,
        "memory_agree": max(counts.values()) / sum(counts.values()) if counts else 0.0,
        "memory_lead": float(evidence is not None),
        "memory_says": float(evidence is not None and says(first.text, evidence)),
        "from_memory": float(first.source.startswith("memory")),
        "length": math.log1p(len(want)),
        "mid_line": float(mid_line),
    }


def shared_prefix(a: str, b: str) -> int:
    """How many characters ``a`` and ``b`` share at their start."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def confidence(values: Mapping[str, float], weights: Mapping[str, float] = COEFFICIENTS) -> float:
    """The probability that the first draft shown is right: the logistic fit over
    ``values`` (``features``); 0 where nothing is shown."""
    if not values:
        return 0.0
    z = sum(weights.get(name, 0.0) * value for name, value in values.items())
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def shows(sure: float, settings: DecodingSettings) -> bool:
    """Whether a request's drafts are shown (``showWhen``): always, or where its confidence
    ``sure`` is at least ``showThreshold``."""
    return settings.show_when == "always" or sure >= settings.show_threshold
