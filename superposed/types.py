"""Configuration, results and errors shared by every decoding method."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from superposed.options import BRANCHES, MIXES


class EngineError(Exception):
    """A decoding request that cannot be served; the message says what to change."""


class NonFiniteLogits(EngineError):
    """The model produced NaN or infinite logits: try dtype float32 or another model."""


class Cancelled(Exception):
    """Decoding was stopped between steps because a newer request superseded it."""


@dataclass(frozen=True)
class Setting:
    """What a client may set a DecodeConfig field to: a number within [low, high] (``(low``
    when ``open_low``), one of ``choices``, or true/false for a bool field. The server's
    settings table parses, checks and names the field (camelCase) from this, so an engine
    setting is declared once, here (lsp_server/settings.py)."""

    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    open_low: bool = False


def setting(default: Any, **spec: Any) -> Any:
    """A DecodeConfig field that clients may set (``Setting``'s arguments)."""
    return field(default=default, metadata={"setting": Setting(**spec)})


@dataclass
class DecodeConfig:
    """Parameters of one decoding request (defaults from Shen et al., 2024).

    Fields made with ``setting`` are server settings too (lsp_server/settings.py); the
    others are the engine's and the benchmarks'.
    """

    k: int = setting(3, low=1, high=16)  # number of drafts returned
    # Tokens per draft (a single-line draft ends at its line's end before that). On the
    # replay's validation split 10 tokens cut many lines short; 24 and 32 scored alike
    # (bench/results/replay_memory_validation.json).
    max_new_tokens: int = setting(24, low=1, high=256)
    alpha: float = setting(0.54, low=0.0, high=1.0)  # the n-gram probability's weight
    # How the n-gram probability joins the model's: "interpolate" mixes probabilities,
    # (1 - alpha) p_theta + alpha p_ngram, so a candidate the store never saw keeps the
    # model's word; "loglinear" is the paper's (1 - alpha) log p_theta + alpha log p_ngram,
    # which vetoes it (log 0). With a small codebase store the veto drops the new names a
    # line introduces; the memory carries the store's idioms instead (bench/results/replay*.json).
    mix: str = setting("interpolate", choices=MIXES)
    # tau: the tempered distribution superposed candidates come from. At least 1e-3: the
    # logits (float32, |logit| < ~1e3) divided by it stay far from float32's overflow, and
    # a logit gap of 0.01 is already a factor e^10 there (as greedy as any smaller tau);
    # 1e-300 overflowed every logit to inf and every request answered nothing.
    temperature: float = setting(0.06, low=1e-3, high=100.0)
    n_candidates: int | None = None  # c: candidates per draft per step; None -> k
    delta: float = 200.0  # penalty (log space) for a draft none of whose candidates has support
    reset_every: int | None = None  # resets (paper 5.3): restart from the best draft every s steps
    top_p: float = 0.9  # nucleus sampling
    nucleus_temperature: float = 0.6
    nucleus_prefixes: int = 2  # n, for nucleus x superposed (paper 4.5)
    nucleus_prefix_tokens: int = 2  # tokens sampled before each prefix is superposed
    seed: int | None = 0
    # Memory (longest matches over the user's code, superposed/memory.py): a match of length l
    # gets weight memory_max * l / (l + memory_half) against the model; shorter than
    # memory_min_length tokens it is ignored; memory_proposals of its next tokens join each
    # draft's candidates.
    memory_half: float = 8.0
    memory_max: float = 0.9
    memory_min_length: int = 3
    memory_proposals: int = 2
    # The prompt's match (at least memory_seed_length tokens) copied to the end of its line
    # is a draft, at place memory_seed_rank (0: first) unless a decoded draft says the same.
    memory_seed: bool = setting(True)
    memory_seed_length: int = 4
    memory_seed_rank: int = 2
    # Seeded drafts at most: the continuations of the match's distinct occurrences (the
    # commonest next token's latest first, then the latest others), placed from
    # memory_seed_rank backwards. Two: on the replay's validation split (rich, 50 targets)
    # the second changed 7 of 200 answers, none for the worse (mid-line ES@3 61.3 -> 62.1%).
    memory_seeds: int = 2
    # Reserves: copies of the memory's other matches of the context as typed (the prompt and
    # the bytes token healing took back), after every decoded draft, at most this many. They
    # show only where the ranking drops or merges drafts until fewer than k are left (issue
    # 51: after ``return NgramStore.`` every draft followed a docstring and failed to parse,
    # and ``open(`` followed the same text three times in the indexed package). 0: none.
    memory_reserves: int = 4
    # Tokens of a match's continuation looked up (MatchSource.match's follow): what a seed can
    # copy. A seed's tokens are no model steps, so max_new_tokens does not cut it: a 70-character
    # line copied from an open document lost its closing ")" to 24 tokens (issue 23). A block
    # request asks for more (completion.decode).
    memory_follow: int = 64
    # Superposed decoding returns once this many finished drafts beat every live one (None:
    # k). completion asks for the k shown, not the spare drafts decoded beside them: a block
    # draft runs for many steps, and waiting for the spares too cost steps no one sees.
    settle_k: int | None = None
    # Where the drafts leave the superposition, each for its own row of a k-row batch with
    # its own history (superposed/rows.py): "off" never, "first" after the first token,
    # "split" once their texts differ beyond whitespace.
    branch: str = setting("off", choices=BRANCHES)

    def validate(self) -> None:
        """Raise EngineError naming the first invalid field."""
        if self.k < 1:
            raise EngineError(f"k must be at least 1 (got {self.k})")
        if self.max_new_tokens < 1:
            raise EngineError(f"max_new_tokens must be at least 1 (got {self.max_new_tokens})")
        if not 0.0 <= self.alpha <= 1.0:
            raise EngineError(f"alpha must lie in [0, 1] (got {self.alpha})")
        if not self.temperature > 0:
            raise EngineError(f"temperature must be positive (got {self.temperature})")
        if self.n_candidates is not None and self.n_candidates < 1:
            raise EngineError(f"n_candidates must be at least 1 (got {self.n_candidates})")
        if not 0.0 < self.top_p <= 1.0:
            raise EngineError(f"top_p must lie in (0, 1] (got {self.top_p})")
        if not self.nucleus_temperature > 0:
            raise EngineError("nucleus_temperature must be positive")
        if self.branch not in BRANCHES:
            raise EngineError(f"unknown branch {self.branch!r}: use {', '.join(BRANCHES)}")
        if self.mix not in MIXES:
            raise EngineError(f"unknown mix {self.mix!r}: use {' or '.join(MIXES)}")
        if not 0.0 <= self.memory_max < 1.0:
            raise EngineError(f"memory_max must lie in [0, 1) (got {self.memory_max})")
        if not self.memory_half > 0:
            raise EngineError(f"memory_half must be positive (got {self.memory_half})")
        if self.reset_every is not None and self.reset_every < 1:
            raise EngineError(f"reset_every must be at least 1 (got {self.reset_every})")

    @property
    def settle(self) -> int:
        return self.k if self.settle_k is None else max(1, min(self.settle_k, self.k))

    @property
    def candidates(self) -> int:
        return self.k if self.n_candidates is None else self.n_candidates


@dataclass(frozen=True)
class StopCondition:
    """When a draft is finished, besides EOS and max_new_tokens."""

    # Single-line: the draft ends at the first newline after its first non-blank character
    # (the newline is not part of it). Leading line breaks and indentation are kept: after
    # `def f():` or a complete line, the useful draft is the next line.
    single_line: bool = False
    stop_strings: tuple[str, ...] = ()
    # The draft continues the cursor's line (blank so far: indentation or nothing, and
    # nothing after the cursor): its first visible character may not be a line break, else
    # the draft would leave the line the user is on blank (superposed/hypotheses.py).
    continue_line: bool = False
    # ... and the cursor follows that line's whole indentation (the caller decides, from the
    # document): the draft adds no more spaces or tabs before its first visible character.
    indented: bool = False
    # A block (not single_line; completion.block_stop fills these): the draft ends before a
    # later line indented less than ``floor`` columns (it left the cursor's block: the next
    # sibling); a line of closing brackets there ends it after that line. It ends before a
    # line equal, stripped, to ``repeat`` (the first non-blank line after the cursor: the
    # draft would type the rest of the file again), at ``blank_lines`` blank lines in a row,
    # and after ``max_lines`` lines with content. 0 / None / "": that rule is off.
    floor: int | None = None
    repeat: str = ""
    blank_lines: int = 0
    max_lines: int = 0
    # At the end of a block opener: the indentation of the block's body (the opener's and one
    # level); a body copied from the memory is moved to it (memory.reopen). "": none.
    body: str = ""

    @property
    def block(self) -> bool:
        """Whether any block rule is on."""
        return not self.single_line and bool(
            self.floor is not None or self.repeat or self.blank_lines or self.max_lines
        )

    def cut(self, text: str) -> str | None:
        """The draft's text up to the first stop, or None if it has not stopped."""
        ends = [text.find(s) for s in self.stop_strings if s in text]
        if self.single_line:
            content = len(text) - len(text.lstrip())
            newline = text.find("\n", content)
            if newline >= 0:
                ends.append(newline)
        elif self.block:
            end = self.block_end(text)
            if end is not None:
                ends.append(end)
        return text[: min(ends)] if ends else None

    def block_end(self, text: str, final: bool = False) -> int | None:
        """Where the block rules end ``text`` (an index; the text before it is kept), or None.

        Rules that need a whole line wait for its line break, unless ``final`` (the draft
        ended: its last line is whole)."""
        rows = text.split("\n")
        at, lines, blanks, blank_from = 0, 0, 0, 0
        for i, row in enumerate(rows):
            start, at = at, at + len(row) + 1
            whole = final or i < len(rows) - 1
            content = row.strip()
            if not content:
                if i > 0 and whole:
                    blanks, blank_from = blanks + 1, blank_from if blanks else start - 1
                    if self.blank_lines and blanks >= self.blank_lines and lines:
                        return blank_from
                continue
            blanks = 0
            if i > 0 and self.floor is not None and _columns(row) < self.floor:
                if content[0] not in ")]}":
                    return start - 1  # the next sibling: before its line break
                if not whole:
                    return None
                return at - 1 if content != self.repeat else start - 1
            if self.repeat and whole and content == self.repeat:
                return start - 1 if i > 0 else start
            if whole:
                lines += 1
                if self.max_lines and lines >= self.max_lines:
                    return min(at - 1, len(text))
        return None


def _columns(row: str) -> int:
    """The row's indentation in columns (a tab to the next multiple of 4)."""
    return len(row.expandtabs(4)) - len(row.expandtabs(4).lstrip())


@dataclass
class Draft:
    """One completion draft: the text after the cursor and how it was scored."""

    text: str
    token_ids: list[int]
    score: float
    finished: bool = False
    # Where the draft came from: "model" (decoded), "memory" (a longest match copied whole,
    # a memory seed). The editors' drafts view shows it (issue 24).
    source: str = "model"


CancelCheck = Callable[[], bool]


@dataclass
class Deadline:
    """When a request's drafts are due (``clock()`` seconds): a method asks between steps,
    and stops where the drafts hold at least ``min_tokens`` tokens and one more step would
    end past it (a step lasts as long as the last one did); the drafts as far as they got are
    the answer (cut at a token boundary). ``cut`` says it stopped there."""

    at: float
    min_tokens: int = 1
    cut: bool = False
    clock: Callable[[], float] = time.perf_counter
    _asked: float | None = None  # when the method last asked: a step ago

    def passed(self, tokens: int) -> bool:
        """Whether to stop with drafts of ``tokens`` tokens (and note that they were cut)."""
        now = self.clock()
        step = 0.0 if self._asked is None else now - self._asked
        self._asked = now
        if tokens >= self.min_tokens and now + step >= self.at:
            self.cut = True
        return self.cut
