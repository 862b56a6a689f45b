"""One decoding request: everything a decoding method reads, and what a method is.

Apart from superposed/types.py (the config, drafts and errors, which the runners and sources
raise and return) so that types.py imports none of the modules that import it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from superposed.ngram import MatchSource, NgramSource
from superposed.prompt import Prompt
from superposed.runner import ModelRunner
from superposed.types import CancelCheck, DecodeConfig, Draft, StopCondition
from superposed.vocab import Vocab


@dataclass(frozen=True)
class DecodeRequest:
    """One decoding request: everything a decoding method reads.

    The runner's cache may hold a prefix of the prompt (it is reused); a method leaves it
    holding exactly the prompt, whether it returns or raises. ``cfg`` is valid: whoever
    builds the request checks it once (``Engine.complete`` does), the methods do not.
    """

    runner: ModelRunner
    vocab: Vocab
    prompt: Prompt
    cfg: DecodeConfig
    ngram: NgramSource | None = None  # per-draft n-gram re-scoring (the superposed methods)
    stop: StopCondition = field(default_factory=StopCondition)
    cancel: CancelCheck | None = None  # polled between steps; True raises Cancelled
    memory: MatchSource | None = None  # longest matches over the user's code (superposed)
    # Whether drafts (best first, after the engine's ranking) fix what the caller shows, what
    # lower-scored drafts follow them or not: the superposed method then stops (issue 54 item
    # 1: no step past what is shown). None: decode until the k drafts settle.
    shown_fixed: ShownFixed | None = None


ShownFixed = Callable[[list[Draft]], bool]


Method = Callable[[DecodeRequest], list[Draft]]
