"""Next-line metrics (exact match, edit similarity, characters saved, diversity) and
bootstrap intervals over items."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np


def normalize(text: str) -> str:
    """Whitespace-normalised text: runs of whitespace become one space, ends stripped."""
    return " ".join(text.split())


def exact_match(drafts: Sequence[str], target: str) -> bool:
    """Does any draft equal the target, whitespace-normalised?"""
    want = normalize(target)
    return any(normalize(d) == want for d in drafts)


def edit_similarity(a: str, b: str) -> float:
    """1 - Levenshtein(a, b) / max(len a, len b); 1 for two empty strings."""
    from rapidfuzz.distance import Levenshtein

    return float(Levenshtein.normalized_similarity(a, b))


def chars_saved(draft: str, target: str) -> float:
    """The share of the target's characters a draft types correctly before it first differs."""
    n = 0
    for x, y in zip(draft, target, strict=False):
        if x != y:
            break
        n += 1
    return n / len(target) if target else 0.0


def line_metrics(drafts: Sequence[str], target: str) -> dict[str, float]:
    """Exact match, edit similarity and characters saved at 1 (first draft) and at k (best)."""
    drafts = [d.rstrip() for d in drafts]
    first = drafts[:1] or [""]
    return {
        "em1": float(exact_match(first, target)),
        "emk": float(exact_match(drafts, target)),
        "es1": edit_similarity(first[0], target),
        "esk": max((edit_similarity(d, target) for d in drafts), default=0.0),
        "cs1": chars_saved(first[0], target),
        "csk": max((chars_saved(d, target) for d in drafts), default=0.0),
        "empty": float(not first[0].strip()),
        "empty_any": float(any(not d.strip() for d in drafts) or not drafts),
    }


def shared_prefix_share(drafts: Sequence[str]) -> float:
    """How much of the first draft every draft shares: the common prefix of all drafts over
    the first's length (1: the others only extend or repeat it); nan for fewer than two
    drafts or an empty first one."""
    if len(drafts) < 2 or not drafts[0]:
        return float("nan")
    n = 0
    for chars in zip(*drafts, strict=False):
        if any(c != chars[0] for c in chars):
            break
        n += 1
    return n / len(drafts[0])


def pairwise_distance(drafts: Sequence[str]) -> float:
    """Mean normalised edit distance (Levenshtein over the longer length) between each pair of
    drafts: 0 for identical drafts, 1 for nothing in common; nan for fewer than two."""
    from rapidfuzz.distance import Levenshtein

    pairs = [(a, b) for i, a in enumerate(drafts) for b in drafts[i + 1 :]]
    if not pairs:
        return float("nan")
    return float(np.mean([Levenshtein.normalized_distance(a, b) for a, b in pairs]))


def distinct_ratio(tokens: Sequence[Any], n: int) -> float:
    """Unique n-grams / all n-grams of one sequence (1: no repetition); nan if too short."""
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(set(grams)) / len(grams) if grams else float("nan")


def self_bleu(drafts: Sequence[str]) -> float:
    """Mean sentence BLEU (0..100) of each draft against the other drafts: high = alike."""
    from sacrebleu.metrics import BLEU

    if len(drafts) < 2:
        return float("nan")
    bleu = BLEU(effective_order=True, tokenize="13a")
    scores = [
        bleu.sentence_score(d, [o for j, o in enumerate(drafts) if j != i]).score
        for i, d in enumerate(drafts)
    ]
    return float(np.mean(scores))


def bootstrap_ci(
    values: Sequence[float], n_boot: int = 2000, seed: int = 0, level: float = 0.95
) -> dict[str, float]:
    """Mean and percentile bootstrap interval over items (nan items are dropped)."""
    x = np.asarray(values, dtype=np.float64)
    x = x[~np.isnan(x)]
    if len(x) == 0:
        return {"mean": float("nan"), "lo": float("nan"), "hi": float("nan"), "n": 0}
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(n_boot, len(x)))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return {"mean": float(x.mean()), "lo": float(lo), "hi": float(hi), "n": int(len(x))}


def paired_diff_ci(a: Sequence[float], b: Sequence[float], **kw: Any) -> dict[str, float]:
    """Bootstrap interval of mean(a - b) over the same items (pairs with a nan are dropped)."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return bootstrap_ci(list(d), **kw)


# ----- blocks (issue 23): drafts of several lines against a run of lines ----------------------


def block_text(text: str) -> str:
    """A block as compared: each line's trailing whitespace and the trailing blank lines cut
    (an editor shows neither; leading indentation stays and is compared exactly)."""
    return "\n".join(row.rstrip() for row in text.split("\n")).rstrip("\n")


def lines_accepted(draft: str, target: str) -> int:
    """How many of the target's lines a user keeps: the draft's leading lines that equal the
    target's (trailing whitespace aside), up to the first wrong one. The first line is what
    follows the cursor; an empty first target line (a cursor at the end of a block opener)
    must be matched too but is not counted."""
    n = 0
    for got, want in zip(
        block_text(draft).split("\n"), block_text(target).split("\n"), strict=False
    ):
        if got != want:
            break
        n += 1 if want else 0
    return n


def block_metrics(drafts: Sequence[str], target: str) -> dict[str, float]:
    """Lines accepted, characters saved over the whole block, whole-block EM and edit
    similarity, at 1 (the first draft) and at k (the best draft for each); drafts uncut."""
    want = block_text(target)
    got = [block_text(d) for d in drafts]
    first = got[0] if got else ""
    return {
        "la1": float(lines_accepted(first, want)),
        "lak": float(max((lines_accepted(d, want) for d in got), default=0)),
        "cs1": chars_saved(first, want),
        "csk": max((chars_saved(d, want) for d in got), default=0.0),
        "em1": float(first == want),
        "emk": float(want in got),
        "es1": edit_similarity(first, want),
        "esk": max((edit_similarity(d, want) for d in got), default=0.0),
        # the drafts' shape: how many have more than one non-blank line, and the first's lines
        "multi": float(sum(1 for d in got if len([r for r in d.split("\n") if r.strip()]) > 1)),
        "lines1": float(len([r for r in first.split("\n") if r.strip()])),
        "empty": float(not any(d.strip() for d in got)),
    }


def paired_ratio_ci(
    a: Sequence[float], b: Sequence[float], n_boot: int = 2000, seed: int = 0, level: float = 0.95
) -> dict[str, float]:
    """Bootstrap interval of mean(a) / mean(b) over the same items, resampled in pairs (pairs
    with a nan are dropped); nan where b's mean is 0, an infinite bound where resamples of b
    have mean 0."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    nan = float("nan")
    if len(x) == 0 or y.mean() == 0:
        return {"mean": nan, "lo": nan, "hi": nan, "n": int(len(x))}
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    den = y[idx].mean(axis=1)
    ratios = np.where(den > 0, x[idx].mean(axis=1) / np.where(den > 0, den, 1), np.inf)
    tail = (1 - level) / 2 * 100  # nearest rank: a resample with mean(b) = 0 is +inf, not nan
    lo, hi = np.percentile(ratios, [tail, 100 - tail], method="nearest")
    return {"mean": float(x.mean() / y.mean()), "lo": float(lo), "hi": float(hi), "n": int(len(x))}


Rows = Mapping[str, Sequence[Mapping[str, float]]]  # method name -> one row of metrics an item


def summarize(rows: Rows, metrics: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each method's mean and 95% bootstrap interval in each metric."""
    return {
        name: {m: bootstrap_ci([r[m] for r in method_rows]) for m in metrics}
        for name, method_rows in rows.items()
    }


def compare_first(
    rows: Rows, metric: str, other_metric: Callable[[str], str] | None = None
) -> list[dict[str, Any]]:
    """The first method against each other one, paired by item: the difference in ``metric``
    (against ``other_metric(name)`` of the other method where given, e.g. greedy's pass@1 for
    the first method's pass@k)."""
    names = list(rows)
    first = names[0]
    out = []
    for b in names[1:]:
        mb = other_metric(b) if other_metric is not None else metric
        diff = paired_diff_ci([r[metric] for r in rows[first]], [r[mb] for r in rows[b]])
        out.append({"a": first, "b": b, "metric": metric, **diff})
    return out
