"""Document + cursor -> prompt -> drafts -> suggestions the editor can show.

Protocol-free: the server turns ``Suggestion`` objects into LSP items. The steps:

1. ``CursorContext.at``: split the document at the cursor (text before it is the prompt,
   the rest of the line is what a draft must not merely repeat);
2. ``TypingCache.along``: if the user typed characters that continue drafts just shown,
   answer from those drafts without calling the model;
3. ``decode``: ``Engine.complete`` with the settings' method and n-gram source;
4. ``postprocess``: the document's line ending and indentation (lsp_server/layout.py),
   single-line cut (or a block's end rules, ``block_stop``), stop each
   draft where it runs into the text after the cursor (``stop_at_suffix``), drop empty and
   whitespace-only drafts, merge duplicates, drop drafts that only repeat the text after
   the cursor; drop drafts that do not parse there (lsp_server/wellformed.py: a spare
   draft takes the place) and put a long verbatim copy from the memory first
   (lsp_server/evidence.py).

``lineMode: auto`` (the default) asks the syntax at the cursor (lsp_server/syntax.py)
whether a line or a block is wanted there; ``single`` always drafts a line, ``multi`` a
block.

Models trained for fill-in-the-middle also see the text after the cursor in their prompt
(superposed/fim.py; the ``fim`` setting).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field, replace

from lsp_server.evidence import lead, prompt_lead
from lsp_server.layout import Layout
from lsp_server.models import testing_tiny
from lsp_server.settings import DecodingSettings
from lsp_server.syntax import Decision, decide
from lsp_server.wellformed import Cursor, well_formed
from ngram_db.tokenizer import clean_text
from superposed import fim
from superposed.api import Completion, Engine
from superposed.diversity import first_word_key
from superposed.knn import HiddenSource
from superposed.ngram import MatchSource, NgramSource
from superposed.prompt import Prompt
from superposed.runner import reusable_prefix
from superposed.types import CancelCheck, DecodeConfig, StopCondition

# Drafts decoded beyond k: drafts that differ only after their first line, or only in
# whitespace, merge in postprocess; superposed decoding makes the spares in the same pass.
SPARE_DRAFTS = 2

# Characters of text before the cursor tokenized per token of the prompt window: a token of
# code is about 4 characters, rarely more than 16; this bounds the work on huge files.
CHARS_PER_CONTEXT_TOKEN = 8
WINDOW_STEPS = 4  # the prompt window's start moves in steps of about 1/4 of its length
PROMPT_MARGIN = 8  # tokens kept free: the engine's re-tokenization may differ by one or two
# Characters after the cursor kept for a fill-in-the-middle prompt (which uses at most a
# quarter of the prompt window, a few thousand characters): bounds the copy on huge files.
FOLLOWING_CHARS = 32_768
_OPENING = {")": "(", "]": "[", "}": "{"}
INDENT_UNIT = 4  # spaces per indentation level, to tell a dedent from indentation being typed
TRAILING_PUNCTUATION = ",;:.\\"  # what near_key drops from a draft's end
# A block request's token budget: max_new_tokens per line of max_lines, at most this many
# model steps (twice a line's default budget: issue 23 asks a block's p50 to stay within 2x a
# line's); drafts end earlier by the block's rules (block_stop), and a draft the steps stop
# mid-line ends at its last whole line. Lines copied from the memory cost no steps.
BLOCK_MAX_TOKENS = 48
# Tokens of a memory match's continuation looked up per line of a block: a seed copies at
# most max_lines lines of it.
BLOCK_FOLLOW_PER_LINE = 16
BLOCK_BLANK_LINES = 2  # blank lines in a row that end a block draft
REPEAT_SCAN_LINES = 64  # lines after the cursor searched for the first non-blank one


@dataclass(frozen=True)
class CursorContext:
    """The document split at the cursor."""

    before: str  # all text before the cursor (the prompt comes from its end)
    after: str  # the rest of the cursor's line
    following: str = ""  # the text after the cursor, up to FOLLOWING_CHARS (for FIM prompts)
    # The document's language: an LSP language id, its file name or URI; "": unknown (then
    # lineMode auto decides by the text alone, syntax.py).
    language: str = ""
    # The user did not ask (ghost text as you type): where the syntax wants nothing there
    # (syntax.decide's "none"), such a request is answered with no drafts.
    automatic: bool = False
    # The codebase in the prompt (the ``context`` setting, lsp_server/context.py): text laid
    # before the window, stable across requests so the KV cache keeps it; "": none.
    preamble: str = ""

    @property
    def line_before(self) -> str:
        """The cursor's line up to the cursor."""
        return self.before[self.before.rfind("\n") + 1 :]

    @functools.cached_property
    def layout(self) -> Layout:
        """The document's line ending and indentation around the cursor (layout.py), read
        once per request: the block's end rules and the drafts' layout both use it."""
        return Layout.of(self.before, self.following, self.language)

    @property
    def blank_line(self) -> bool:
        """The cursor's line is blank (indentation at most): a draft continues this line."""
        return not self.before[self.before.rfind("\n") + 1 :].strip() and not self.after.strip()

    @property
    def indentation_complete(self) -> bool:
        """The cursor is on a blank line after its whole indentation: a draft indents no
        further. Whole: as deep as the line above's (unless that line opens a block: ends
        with ``:`` or an opening bracket), or deeper or shallower by whole levels (tabs, or
        multiples of four spaces). Other indentation may still be being typed (3 of 8
        spaces): drafts may complete it."""
        start = self.before.rfind("\n") + 1
        indentation = self.before[start:]
        if not indentation or not self.blank_line:
            return False
        above, end = "", start - 1  # end: the line break before the cursor's line
        while end > 0 and not above.strip():
            begin = self.before.rfind("\n", 0, end) + 1
            above, end = self.before[begin:end], begin - 1
        level = len(above) - len(above.lstrip())
        opens = above.rstrip().endswith((":", "(", "[", "{"))
        if len(indentation) == level:
            return not opens  # after a block opener the block's indentation is still to come
        # Deeper (a block's body) or shallower (a dedent) by whole levels; otherwise it may
        # still be being typed.
        return "\t" in indentation or (len(indentation) - level) % INDENT_UNIT == 0

    @classmethod
    def at(
        cls, text: str, offset: int, language: str = "", automatic: bool = False
    ) -> CursorContext:
        end = text.find("\n", offset)
        return cls(
            before=text[:offset],
            after=text[offset : len(text) if end < 0 else end],
            following=text[offset : offset + FOLLOWING_CHARS],
            language=language,
            automatic=automatic,
        )


@dataclass(frozen=True)
class Suggestion:
    """One draft as shown to the user: the text to insert at the cursor, its score, and
    where it came from (``Draft.source``; "model+store" where the stores' n-grams were mixed
    into the model's)."""

    text: str
    score: float
    source: str = "model"


@dataclass
class Answer:
    """Suggestions for one request, and where they came from."""

    suggestions: list[Suggestion]
    timing_ms: dict[str, float] = field(default_factory=dict)
    from_cache: bool = False
    short_window: bool = False  # the cache was cold: the prompt was the short recent window
    prompt_tokens: int = 0  # the prompt's length in tokens
    reused_tokens: int = 0  # how many of them the KV cache already held


def first_line(text: str) -> str:
    """The draft up to the end of its first line with content (leading newlines are kept)."""
    pos = 0
    while True:
        end = text.find("\n", pos)
        if end < 0:
            return text
        if text[pos:end].strip():
            return text[:end]
        pos = end + 1


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def stop_at_suffix(draft: str, after: str) -> str:
    """The draft cut where it would run into the text after the cursor on its line.

    ``rest`` is ``after`` (the rest of the cursor's line) without surrounding whitespace.
    In the draft's first line, a position p is where the draft runs into ``rest`` when:
    the character at p is not whitespace and starts a word or is not a word character
    (``x`` in ``max`` is no match), the draft's brackets before p are balanced (it closed
    everything it opened and nothing opened before the cursor), and one of the line from p
    (trailing whitespace dropped) and ``rest`` begins with the other: the draft types the
    rest again, or its end is the start of it. At the first such p the draft is cut to what
    precedes p (trailing whitespace dropped; later lines go too). With ``rest`` ")" the draft
    "foo)" becomes "foo", "f(a))" becomes "f(a)", and "f(a)" stays (its ")" closes its own
    "("). Without such a p, or when ``rest`` is empty, the draft is unchanged. Brackets
    inside string literals count like any other (a known simplification).
    """
    rest = after.strip()
    if not rest:
        return draft
    end = draft.find("\n")
    line = draft if end < 0 else draft[:end]
    stack: list[str] = []
    broken = False  # the draft closed a bracket it did not open
    for p, ch in enumerate(line):
        boundary = p == 0 or not (_word(ch) and _word(line[p - 1]))
        if not ch.isspace() and boundary and not stack and not broken:
            tail = line[p:].rstrip()
            if tail.startswith(rest) or rest.startswith(tail):
                return line[:p].rstrip()
        if ch in "([{":
            stack.append(ch)
        elif ch in _OPENING:
            if stack and stack[-1] == _OPENING[ch]:
                stack.pop()
            else:
                broken = True
    return draft


def _code_end(line: str) -> int:
    """Where the line's trailing comment (``#`` or ``//`` outside a string literal, after
    some code and a space) begins; len(line) when it has none, when the line is itself a
    comment (``#class # #`` is one comment, not ``#class`` and another) or when the first
    marker is glued to code (``def# x``)."""
    quote = ""
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 1  # the escaped character
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#" or line.startswith("//", i):
            # the first marker decides: a comment line, or one glued to code, is left whole
            return i if line[:i].strip() and line[i - 1].isspace() else len(line)
        i += 1
    return len(line)


def near_key(text: str) -> str:
    """What a draft says once its trailing comment, whitespace and punctuation are dropped.

    Superposed drafts stay close: on the replay, 1 line-start request in 10 showed two drafts
    that differed only there (``... -> BaseResponse:`` and ``... -> BaseResponse``,
    ``if not is_syntax:`` and the same with ``  # do not display ...``). Drafts with the same
    key spend two of the k slots on one guess; a draft whose key would be empty (a comment,
    punctuation only) is its own key.
    """
    lines = text.split("\n")
    last = lines[-1]
    last = last[: _code_end(last)].rstrip().rstrip(TRAILING_PUNCTUATION).rstrip()
    key = "\n".join([*lines[:-1], last])
    return key if key.strip() else text


def whole_lines(text: str) -> str:
    """A block draft the token budget stopped mid-line, back to its last whole line (a draft
    of one unfinished line is kept: there is nothing shorter to show)."""
    content = len(text) - len(text.lstrip())
    end = text.rfind("\n")
    return text[:end] if end > content else text


def postprocess(
    completion: Completion,
    after: str,
    line_mode: str = "single",
    merge_near: bool = False,
    stop: StopCondition | None = None,
) -> list[Suggestion]:
    """Drafts in the engine's order -> distinct, non-empty suggestions.

    line_mode "single": each draft is cut to its first line; any other: a block, ended by
    ``stop``'s block rules (a draft that ended by EOS is checked again, one the budget stopped
    goes back to its last whole line), and drafts whose first line a better-ranked draft
    already shows go after the others: the k slots first show k different first lines.
    merge_near: drafts that say what an earlier (better-ranked) one says but for a trailing
    comment, whitespace or punctuation (``near_key``) are dropped, so the next distinct draft
    takes the slot.
    """
    out: list[Suggestion] = []
    seen: set[str] = set()
    rest = after.strip()
    block = line_mode != "single"
    for draft in completion.drafts:
        text = stop_at_suffix(draft.text, after)
        if not block:
            text = first_line(text)
        elif stop is not None and stop.block:
            text = text if draft.finished else whole_lines(text)
            end = stop.block_end(text, final=True)
            text = text if end is None else text[:end]
        text = text.rstrip()
        core = text.strip()
        key = near_key(text) if merge_near else text
        if not core or key in seen:
            continue
        if rest and rest.startswith(core):
            continue  # it would only type again what already follows the cursor
        seen.add(key)
        out.append(Suggestion(text, draft.score, draft.source))
    return distinct_first_lines(out) if block else out


def distinct_first_lines(suggestions: list[Suggestion]) -> list[Suggestion]:
    """The suggestions with a first line not shown before first, the others after (each
    group in its order): block drafts that share a first line and differ later would spend
    the k slots on one guess of the line the user reads first."""
    firsts: set[str] = set()
    new: list[Suggestion] = []
    again: list[Suggestion] = []
    for s in suggestions:
        key = near_key(first_line(s.text).strip())
        (again if key in firsts else new).append(s)
        firsts.add(key)
    return new + again


def reserve_first_word(suggestions: list[Suggestion], k: int) -> list[Suggestion]:
    """The suggestions with the last of the k shown slots given to the best one whose first
    word differs, where the k shown would otherwise all begin with the same word (a line's
    first word is its first real decision: a different name, call or keyword)."""
    words = [first_word_key(s.text.encode()) or s.text.strip().encode() for s in suggestions]
    if len(suggestions) <= k or len(set(words[:k])) > 1:
        return suggestions
    other = next((i for i in range(k, len(suggestions)) if words[i] != words[0]), None)
    if other is None:
        return suggestions
    rest = [s for i, s in enumerate(suggestions) if i != other]
    return [*rest[: k - 1], suggestions[other], *rest[k - 1 :]]


def line_kind(context: CursorContext, settings: DecodingSettings) -> Decision:
    """What the request drafts: ``lineMode`` single -> a line, multi -> a block, auto -> what
    the syntax at the cursor wants (syntax.decide: none, line or block)."""
    if settings.line_mode == "single":
        return "line"
    if settings.line_mode == "multi":
        return "block"
    return decide(context.before, context.following, context.language)


def block_stop(context: CursorContext, settings: DecodingSettings) -> StopCondition:
    """Where a block draft at ``context`` ends (StopCondition's block rules).

    floor: at the end of a line that opens a block (its code ends with ``:``, ``{``, ``do``
    or ``then``), the draft's lines must be deeper than that line; elsewhere (a blank line,
    or ``multi`` after any other line) no shallower than the cursor's line. repeat: the
    first non-blank line after the cursor's line.
    """
    line = context.line_before
    width = len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())
    code = line[: _code_end(line)].rstrip()
    opens = code.endswith((":", "{")) or code.split()[-1:] in (["do"], ["then"])
    floor = width + 1 if opens else width
    body = line[: len(line) - len(line.lstrip())] + context.layout.unit if opens else ""
    rows = context.following.split("\n", REPEAT_SCAN_LINES + 1)[1 : REPEAT_SCAN_LINES + 1]
    repeat = next((r.strip() for r in rows if r.strip()), "")
    return StopCondition(
        continue_line=context.blank_line,
        indented=context.indentation_complete,
        floor=floor,
        repeat=repeat,
        blank_lines=BLOCK_BLANK_LINES,
        max_lines=settings.max_lines,
        body=body,
    )


def block_budget(settings: DecodingSettings) -> int:
    """A block request's model steps: max_new_tokens per line, at most BLOCK_MAX_TOKENS (and
    never fewer than a line's)."""
    per_lines = settings.max_new_tokens * settings.max_lines
    return max(settings.max_new_tokens, min(per_lines, BLOCK_MAX_TOKENS))


def decode_config(settings: DecodingSettings) -> DecodeConfig:
    """The settings as one request's engine config (they are one: DecodingSettings extends
    DecodeConfig): k plus spare drafts, since post-processing merges some away."""
    return replace(
        settings,
        k=settings.k + SPARE_DRAFTS,
        memory_seed_rank=max(0, settings.k - 1),  # the last of the k shown
    )


def prompt_text(engine: Engine, before: str, limit: int) -> str:
    """The end of ``before`` that fits ``limit`` tokens, starting at a line on a coarse grid.

    The engine keeps the cached prompt's KV and prefills only what follows the common
    prefix. If the window started exactly ``limit`` tokens back, its start would move with
    every keystroke and nothing would be reused; on a grid of 1/WINDOW_STEPS of the window,
    nearby requests share their start (a full prefill about once per grid step).
    """
    budget = limit * CHARS_PER_CONTEXT_TOKEN
    grid = max(256, budget // (2 * WINDOW_STEPS))  # 1/WINDOW_STEPS of it at 4 chars per token
    base = max(0, len(before) - budget) // grid * grid
    text = clean_text(before[base:])
    encoded = engine.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    offsets = encoded["offset_mapping"]
    if len(offsets) <= limit:
        return text
    least = base + offsets[len(offsets) - limit][0]  # the window may start no earlier
    start = -(-least // grid) * grid  # rounded up to the grid
    if start >= len(before):
        start = least
    line = before.find("\n", start, len(before) - 1)
    return clean_text(before[line + 1 if line >= 0 else start :])


def prompt_window(
    engine: Engine,
    context: CursorContext,
    settings: DecodingSettings,
    max_prompt_tokens: int | None = None,
) -> tuple[str, fim.FimTokens | None]:
    """The text before the cursor that the prompt holds, and the FIM markers (None: none)."""
    room = engine.max_context - settings.max_new_tokens - 1
    preamble, extra = context_preamble(engine, context, room)
    limit = min(room - extra, max_prompt_tokens or room) - 1 - PROMPT_MARGIN  # 1: start token
    markers = fim.choose(
        settings.fim,
        engine.fim_tokens,
        (engine.name, getattr(engine.tokenizer, "name_or_path", "")),
    )
    if markers is not None:  # the window of text before the cursor is the FIM prefix's share
        limit = fim.budgets(limit)[0]
    return preamble + prompt_text(engine, context.before, limit), markers


def context_preamble(engine: Engine, context: CursorContext, room: int) -> tuple[str, int]:
    """The context preamble and its tokens; none when it would take over half the room."""
    if not context.preamble:
        return "", 0
    tokens = len(engine.tokenizer(context.preamble, add_special_tokens=False)["input_ids"])
    return (context.preamble, tokens) if tokens <= room // 2 else ("", 0)


def prompt_budget(
    engine: Engine,
    context: CursorContext,
    settings: DecodingSettings,
    max_prompt_tokens: int | None,
) -> int | None:
    """The prompt's tokens at most: the window's, plus the preamble's (it comes on top)."""
    room = engine.max_context - settings.max_new_tokens - 1
    extra = context_preamble(engine, context, room)[1]
    return max_prompt_tokens + extra if max_prompt_tokens and extra else max_prompt_tokens


def request_prompt(
    engine: Engine,
    context: CursorContext,
    settings: DecodingSettings,
    max_prompt_tokens: int | None = None,
    max_new_tokens: int | None = None,
) -> Prompt:
    """The prompt a request at ``context`` decodes from (what warm-ups prefill), leaving
    room for ``max_new_tokens`` (None: the setting's; a block asks for more)."""
    text, markers = prompt_window(engine, context, settings, max_prompt_tokens)
    return engine.prompt(
        text,
        settings.max_new_tokens if max_new_tokens is None else max_new_tokens,
        max_prompt_tokens=prompt_budget(engine, context, settings, max_prompt_tokens),
        fim=markers,
        after=context.following,
    )


def cold_cache(
    engine: Engine,
    context: CursorContext,
    settings: DecodingSettings,
    max_prompt_tokens: int | None = None,
    prompt: Prompt | None = None,
) -> bool:
    """Whether the KV cache lacks more than ``first_prompt_tokens`` of the request's prompt
    (``prompt``, if the caller built it already).

    Then the request answers from the short recent window instead (a fresh file costs a
    prefill of that window, not of the full one); 0 turns this off.
    """
    first = settings.first_prompt_tokens
    if not first or (max_prompt_tokens and max_prompt_tokens <= first):
        return False
    ids = (prompt or request_prompt(engine, context, settings, max_prompt_tokens)).ids
    return len(ids) - reusable_prefix(engine.runner.cached_ids, ids) > first


def choose_prompt(
    engine: Engine,
    context: CursorContext,
    settings: DecodingSettings,
    max_prompt_tokens: int | None,
    max_new_tokens: int,
) -> tuple[Prompt, bool]:
    """The prompt a request decodes from, and whether it is the short recent window.

    The full window's prompt, unless the cache is cold for it (``cold_cache``): then the
    most recent ``first_prompt_tokens`` tokens' (the only second prompt a request builds).
    """
    full = request_prompt(engine, context, settings, max_prompt_tokens, max_new_tokens)
    if not cold_cache(engine, context, settings, max_prompt_tokens, full):
        return full, False
    first = settings.first_prompt_tokens
    return request_prompt(engine, context, settings, first, max_new_tokens), True


def decode(
    engine: Engine,
    context: CursorContext,
    settings: DecodingSettings,
    ngram: NgramSource | None = None,
    cancel: CancelCheck | None = None,
    max_prompt_tokens: int | None = None,
    memory: MatchSource | None = None,
    knn: HiddenSource | None = None,
) -> Answer:
    """One model call: the drafts for the cursor, post-processed.

    memory: longest matches over the user's code, or None; whoever reads the settings
    decides (None when ``memory`` is off), and the method takes it if it can.
    max_prompt_tokens: None: the setting's (0 there: all the model's context).
    What is drafted, a line or a block, is ``line_kind``'s; "none" answers an automatic
    request with no drafts (an asked-for one drafts a line).
    When the cache is cold (``cold_cache``), the prompt is the short recent window and the
    answer says so (``short_window``): the server then warms the cache to the full window.
    """
    kind = line_kind(context, settings)
    if kind == "none" and context.automatic:
        return Answer([])  # nothing belongs here, and no one asked
    if max_prompt_tokens is None:
        max_prompt_tokens = settings.max_prompt_tokens or None

    cfg = decode_config(settings)
    cfg.first_word_cap = settings.first_word_cap if context.blank_line else 0  # a line start
    if kind == "block":
        stop = block_stop(context, settings)
        cfg.max_new_tokens = block_budget(settings)
        cfg.memory_follow = max(cfg.memory_follow, BLOCK_FOLLOW_PER_LINE * settings.max_lines)
        cfg.settle_k = settings.k  # the k shown are final: return, spares or not
    else:
        stop = StopCondition(
            single_line=True,
            continue_line=context.blank_line,
            indented=context.indentation_complete,
        )
    start = time.perf_counter()
    prompt, short = choose_prompt(engine, context, settings, max_prompt_tokens, cfg.max_new_tokens)
    prompt_ms = (time.perf_counter() - start) * 1e3
    completion = engine.complete(
        prompt,
        method=settings.method,
        cfg=cfg,
        ngram=ngram,
        stop=stop,
        cancel=cancel,
        memory=memory,
        knn=knn,  # the hidden-state memory (knnWeight; lsp_server/knn.py)
    )
    timing_ms = {**completion.timing_ms, "prompt": prompt_ms}  # text -> prompt tokens, here
    timing_ms["total"] = timing_ms.get("total", 0.0) + prompt_ms
    # The document's line ending and indentation, whatever another document's copy brought
    layout = context.layout
    drafts = [replace(d, text=layout.lines(d.text, context.line_before)) for d in completion.drafts]
    completion = replace(completion, drafts=drafts)
    suggestions = postprocess(
        completion,
        context.after,
        "multi" if kind == "block" else "single",
        merge_near=settings.distinct_drafts,
        stop=stop,
    )
    start = time.perf_counter()  # drafts that parse, ranked by their evidence (issue 38)
    if settings.well_formed and not testing_tiny():  # the tiny test model's drafts: noise
        suggestions = well_formed(
            suggestions, Cursor(context.before, context.following, context.language)
        )
    suggestions = lead(suggestions, prompt_lead(memory, prompt, engine, cfg.memory_follow))
    timing_ms["wellformed"] = (time.perf_counter() - start) * 1e3
    if cfg.first_word_cap:
        suggestions = reserve_first_word(suggestions, settings.k)
    if ngram is not None:  # the stores' n-grams weighed in on every decoded draft
        suggestions = [replace(s, source=f"{s.source}+store") for s in suggestions]
    suggestions = [replace(s, text=layout.ends(s.text)) for s in suggestions]
    return Answer(
        suggestions[: settings.k],
        timing_ms,
        short_window=short,
        prompt_tokens=completion.prompt_tokens,
        reused_tokens=completion.reused_tokens,
    )


@dataclass
class _Shown:
    before: str
    suggestions: list[Suggestion]


class TypingCache:
    """The last suggestions per document, to answer while the user types along a draft."""

    def __init__(self) -> None:
        self._shown: dict[str, _Shown] = {}

    def remember(self, uri: str, before: str, suggestions: list[Suggestion]) -> None:
        if suggestions:
            self._shown[uri] = _Shown(before, suggestions)
        else:
            self._shown.pop(uri, None)

    def forget(self, uri: str) -> None:
        self._shown.pop(uri, None)

    def entry(self, uri: str) -> object:
        """What the cache holds for ``uri`` now, as a token: every remember or typed-along
        answer replaces it, so an unchanged token means the cache was not used since."""
        return self._shown.get(uri)

    def clear(self) -> None:
        self._shown.clear()

    def along(self, uri: str, context: CursorContext) -> list[Suggestion] | None:
        """What is left of the shown drafts after the characters typed since; None: no match."""
        shown = self._shown.get(uri)
        if shown is None or not context.before.startswith(shown.before):
            return None
        typed = context.before[len(shown.before) :]
        rest = [
            Suggestion(s.text[len(typed) :], s.score, s.source)
            for s in shown.suggestions
            if s.text.startswith(typed) and s.text[len(typed) :].strip()
        ]
        if not rest:
            return None
        self._shown[uri] = _Shown(context.before, rest)
        return rest
