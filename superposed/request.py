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
from superposed.types import CancelCheck, Deadline, DecodeConfig, Draft, StopCondition
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
    deadline: Deadline | None = None  # the drafts as far as they got by then (superposed)


@dataclass(frozen=True)
class Plan:
    """One request's decode as its caller planned it, which ``Engine.run`` takes whole: the
    prompt, the method and its config, where the drafts end, the sources and the cancel
    check. The engine adds its runner and vocabulary (``DecodeRequest``)."""

    prompt: Prompt
    method: str = "superposed"
    cfg: DecodeConfig = field(default_factory=DecodeConfig)
    stop: StopCondition = field(default_factory=StopCondition)
    ngram: NgramSource | None = None  # per-draft n-gram re-scoring (the superposed methods)
    memory: MatchSource | None = None  # for a method that takes it (takes_memory)
    cancel: CancelCheck | None = None  # polled between steps; True raises Cancelled
    deadline: Deadline | None = None  # when the drafts are due, as far as they got


Method = Callable[[DecodeRequest], list[Draft]]
