"""Document + cursor -> prompt -> drafts -> suggestions the editor can show.

Protocol-free: the server turns ``Suggestion`` objects into LSP items. ``decode`` is one
model call: ``plan`` plans it whole, ``run`` runs it, in steps each with its own module:

1. what the request drafts, a line or a block (``line_kind``; ``lineMode: auto``, the
   default, asks the syntax at the cursor, completion/syntax.py), its engine config
   (``request_config``, a copy of the settings) and where its drafts end (``request_stop``);
2. the prompt (completion/prompt_plan.py: the window and its budget, once per request; the
   short recent window when the KV cache is cold); the plan (``RequestPlan``) holds them,
   with the engine's part (superposed's ``Plan``: prompt, method, config, stop rule, the
   n-gram source and the memory, the cancel check) that ``Engine.run`` takes whole;
3. ``Engine.run``;
4. the drafts' text clean-up (completion/cleanup.py ``postprocess``, in the document's line
   ending and indentation, completion/layout.py), then ``rank``: this layer's ranking stages
   (``rank_stages``, after the engine's; superposed/ranking.py owns them all): drafts that
   parse there (completion/wellformed.py; a block cut to its first lines that do), near
   duplicates merged, a block's new first lines first, a long verbatim copy from the memory
   first (completion/evidence.py), at a line start the last slot to another first word, k
   shown. Drafts with text that was not UTF-8 never get there (``shown``).

Typing along a draft just shown answers without the model (lsp_server/runtime/ahead.py
``TypingCache``). Models trained for fill-in-the-middle also see the text after the cursor
in their prompt (superposed/fim.py; the ``fim`` setting).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from lsp_server.completion.cleanup import (
    Suggestion,
    code_end,
    first_line_key,
    near_key,
    postprocess,
    unreadable,
)
from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.evidence import prompt_lead, says
from lsp_server.completion.prompt_plan import PromptPlan
from lsp_server.completion.syntax import Decision, decide
from lsp_server.completion.wellformed import Cursor, parses
from lsp_server.models import testing_tiny
from lsp_server.settings import DecodingSettings
from superposed import ranking
from superposed.api import Completion, Engine
from superposed.ngram import MatchSource, NgramSource
from superposed.request import Plan
from superposed.types import CancelCheck, Deadline, DecodeConfig, StopCondition

# Drafts decoded beyond k: drafts that differ only after their first line, or only in
# whitespace, merge in ranking (rank_stages); superposed decoding makes the spares in the
# same pass.
SPARE_DRAFTS = 2

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
# A request due at ``answerWithinMs`` (counted from its arrival; answer.answer) still decodes
# drafts of this many tokens (a word or two) before it answers: past the deadline after the
# prefill, a draft of one token is too little to show. The server then decodes the rest
# into the typing-along cache (server.py).
DEADLINE_MIN_TOKENS = 4


@dataclass
class Answer:
    """Suggestions for one request, and where they came from."""

    suggestions: list[Suggestion]
    timing_ms: dict[str, float] = field(default_factory=dict)
    from_cache: bool = False
    short_window: bool = False  # the cache was cold: the prompt was the short recent window
    prompt_tokens: int = 0  # the prompt's length in tokens
    reused_tokens: int = 0  # how many of them the KV cache already held
    cut: bool = False  # due at ``answerWithinMs``: the drafts as far as they got by then
    # A cut answer's job(cancel) that decodes it whole, for the engine thread (model_calls)
    rest: Callable[[threading.Event], Answer | None] | None = None


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
    code = line[: code_end(line)].rstrip()
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


def request_config(
    settings: DecodingSettings, context: CursorContext, kind: Decision
) -> DecodeConfig:
    """One request's engine config, a copy of the settings' (``decode_config``): a block's
    token budget, memory follow and settled k."""
    cfg = decode_config(settings)
    if kind != "block":
        return cfg
    return replace(
        cfg,
        max_new_tokens=block_budget(settings),
        memory_follow=max(cfg.memory_follow, BLOCK_FOLLOW_PER_LINE * settings.max_lines),
        settle_k=settings.k,  # the k shown are final: return, spares or not
    )


def request_stop(
    context: CursorContext, settings: DecodingSettings, kind: Decision
) -> StopCondition:
    """Where the request's drafts end: a block's rules (``block_stop``) or the line's end."""
    if kind == "block":
        return block_stop(context, settings)
    return StopCondition(
        single_line=True,
        continue_line=context.blank_line,
        indented=context.indentation_complete,
    )


def rank(
    suggestions: list[Suggestion],
    context: CursorContext,
    settings: DecodingSettings,
    evidence: str | None = None,
    kind: Decision = "line",
) -> list[Suggestion]:
    """The cleaned-up drafts, the k shown in the order shown: ``rank_stages`` applied."""
    return ranking.apply(suggestions, rank_stages(context, settings, evidence, kind))


def rank_stages(
    context: CursorContext,
    settings: DecodingSettings,
    evidence: str | None,
    kind: Decision = "line",
) -> list[ranking.Stage[Suggestion]]:
    """The ranking stages after the engine's (superposed/ranking.py ``text_stages``), with what
    only this layer knows passed in: what a near duplicate is (``distinctDrafts``:
    cleanup.near_key), a block's first line (cleanup.first_line_key), whether a draft parses at
    the cursor (tree-sitter, lsp_server/completion/wellformed.py; off for the tiny test model, whose
    drafts are noise), what a block that does not parse is cut to (``shorter_blocks``) and
    what the memory's lead says (issue 38; ``evidence``: evidence.prompt_lead,
    evidence.says)."""
    parsing = settings.well_formed and not testing_tiny()
    cursor = Cursor(context.before, context.following, context.language)
    return ranking.text_stages(
        settings.k,
        near_key if settings.distinct_drafts else str,
        block_key=first_line_key if kind == "block" else None,
        parses=parses(cursor) if parsing else None,
        says=(lambda text: says(text, evidence)) if evidence else None,
        shorter=shorter_blocks if kind == "block" else None,
    )


def shorter_blocks(text: str) -> Iterator[str]:
    """A block draft's shorter forms, longest first: the draft without its last line, then
    its last two, down to its first line (issue 51: every draft of a loop's body ended in
    ``with open(os.path.join(dirpath, file))``, a line the model left without its ``:``, and
    none was shown where their first three lines parsed)."""
    end, last = len(text), text
    while (end := text.rfind("\n", 0, end)) > 0:
        form = text[:end].rstrip()
        if form.strip() and form != last:
            yield form
        last = form


@dataclass(frozen=True)
class Sources:
    """What a request decodes with beside the model: the stores' n-grams and the memory's
    matches (None when ``memory`` is off: whoever reads the settings decides)."""

    ngram: NgramSource | None = None
    memory: MatchSource | None = None


NO_SOURCES = Sources()


@dataclass(frozen=True)
class RequestPlan:
    """One request's decode, planned once (``plan``): what the engine takes whole, and what
    the clean-up and the ranking after it read."""

    context: CursorContext
    settings: DecodingSettings
    kind: Decision  # a line or a block (line_kind)
    engine: Plan  # the prompt, method, config, stop rule, sources and cancel check
    short_window: bool  # the cache was cold: the prompt is the short recent window
    prompt_ms: float  # text -> prompt tokens


def decode(
    engine: Engine,
    context: CursorContext,
    settings: DecodingSettings,
    sources: Sources = NO_SOURCES,
    cancel: CancelCheck | None = None,
) -> Answer:
    """One model call: the drafts for the cursor, post-processed (``plan``, then ``run``).

    What is drafted, a line or a block, is ``line_kind``'s; "none" answers an automatic
    request with no drafts (an asked-for one drafts a line). With ``answer_within_ms`` the
    decode steps end within that many milliseconds from now (answer.answer counts them from
    the request's arrival), the drafts cut as far as they got (``Answer.cut``).
    """
    planned = plan(engine, context, settings, sources, cancel)
    return Answer([]) if planned is None else run(engine, planned)


def plan(
    engine: Engine,
    context: CursorContext,
    settings: DecodingSettings,
    sources: Sources,
    cancel: CancelCheck | None,
) -> RequestPlan | None:
    """The request's decode, planned whole: its kind, config, stop rule and prompt; None
    where nothing belongs and no one asked.

    When the cache is cold (``PromptPlan.cold``), the prompt is the short recent window and
    the answer says so (``short_window``): the server then warms the cache to the full window.
    """
    kind = line_kind(context, settings)
    if kind == "none" and context.automatic:
        return None  # nothing belongs here, and no one asked
    cfg = request_config(settings, context, kind)
    stop = request_stop(context, settings, kind)
    start = time.perf_counter()
    prompts = PromptPlan.of(engine, context, settings)
    prompt, short = prompts.choose(settings.max_prompt_tokens or None, cfg.max_new_tokens)
    prompt_ms = (time.perf_counter() - start) * 1e3
    deadline = None
    if settings.answer_within_ms:
        deadline = Deadline(start + settings.answer_within_ms / 1e3, DEADLINE_MIN_TOKENS)
    whole = Plan(
        prompt, settings.method, cfg, stop, sources.ngram, sources.memory, cancel, deadline
    )
    return RequestPlan(context, settings, kind, whole, short, prompt_ms)


def run(engine: Engine, plan: RequestPlan) -> Answer:
    """The engine's drafts for ``plan``, cleaned up (``shown``), then ranked once (``rank``)."""
    completion = engine.run(plan.engine)
    decoded_at = time.perf_counter()
    timing_ms = {**completion.timing_ms, "prompt": plan.prompt_ms}  # text -> prompt tokens, here
    timing_ms["total"] = timing_ms.get("total", 0.0) + plan.prompt_ms
    suggestions = shown(completion, plan)
    start = time.perf_counter()
    decoded = plan.engine
    evidence = prompt_lead(decoded.memory, decoded.prompt, engine, decoded.cfg.memory_follow)
    suggestions = rank(suggestions, plan.context, plan.settings, evidence, plan.kind)
    timing_ms["wellformed"] = (time.perf_counter() - start) * 1e3
    if decoded.ngram is not None:  # the stores' n-grams weighed in on every decoded draft
        suggestions = [replace(s, source=f"{s.source}+store") for s in suggestions]
    suggestions = [replace(s, text=plan.context.layout.ends(s.text)) for s in suggestions]
    timing_ms["shown_tokens"] = shown_tokens(engine, suggestions[: plan.settings.k])
    timing_ms["finish"] = (time.perf_counter() - decoded_at) * 1e3  # after the last step
    return Answer(
        suggestions,
        timing_ms,
        short_window=plan.short_window,
        prompt_tokens=completion.prompt_tokens,
        reused_tokens=completion.reused_tokens,
        cut=completion.cut,
    )


def shown_tokens(engine: Engine, suggestions: list[Suggestion]) -> int:
    """A count, beside the timings: the most tokens a shown draft holds, the steps a request
    needs at least (issue 54 item 1 holds the decode forwards run against it)."""
    encode = engine.tokenizer.encode
    return max((len(encode(s.text, add_special_tokens=False)) for s in suggestions), default=0)


def shown(completion: Completion, plan: RequestPlan) -> list[Suggestion]:
    """The engine's drafts in the document's line ending and indentation (whatever another
    document's copy brought), cleaned up (cleanup.postprocess), none with text that was not
    UTF-8 (cleanup.unreadable: whatever the settings; but for the tiny test model, whose
    word salad of byte tokens the editor tests show)."""
    context = plan.context
    layout = context.layout
    drafts = [replace(d, text=layout.lines(d.text, context.line_before)) for d in completion.drafts]
    cleaned = postprocess(
        replace(completion, drafts=drafts),
        context.after,
        "multi" if plan.kind == "block" else "single",
        stop=plan.engine.stop,
    )
    if testing_tiny():
        return cleaned
    return [s for s in cleaned if not unreadable(s.text, context.before, context.following)]
