"""Draft text clean-up: the engine's drafts -> the texts the editor can show.

Each draft stops where it runs into the text after the cursor (``stop_at_suffix``), is cut to
its first line (a line request) or by a block's end rules (``StopCondition.block_end``; a
draft the token budget stopped mid-line goes back to its last whole line, ``whole_lines``);
empty drafts, drafts that only repeat the text after the cursor and drafts with characters
that stand for bytes that were not UTF-8 (``unreadable``) are dropped. Which of the
rest are shown, and in what order, is ranking's (superposed/ranking.py, the stages listed in
lsp_server/completion/decode.py ``rank_stages``): from here it takes what a near duplicate is
(``near_key``) and what a block's first line says (``first_line_key``). The document's line
ending and indentation are lsp_server/completion/layout.py's.
"""

from __future__ import annotations

from dataclasses import dataclass

from superposed.api import Completion
from superposed.types import StopCondition

_OPENING = {")": "(", "]": "[", "}": "{"}
TRAILING_PUNCTUATION = ",;:.\\"  # what near_key drops from a draft's end


@dataclass(frozen=True)
class Suggestion:
    """One draft as shown to the user: the text to insert at the cursor, its score, and
    where it came from (``Draft.source``; "model+store" where the stores' n-grams were mixed
    into the model's)."""

    text: str
    score: float
    source: str = "model"


def unreadable(text: str, *document: str) -> bool:
    """Whether ``text`` holds a character that stands for bytes that were not UTF-8 and
    that ``document`` (the texts before and after the cursor) does not hold: U+FFFD, what a
    token cut inside a character and followed by another makes (a draft read ``def`` then
    two of them, issue 52), or a lone surrogate (undecodable bytes read with
    ``surrogateescape``). Such a draft is never shown; a document that holds U+FFFD itself
    (text once decoded with replacement) may get drafts that copy it."""
    odd = {ch for ch in text if ch == "\ufffd" or "\ud800" <= ch <= "\udfff"}
    return any(all(ch not in part for part in document) for ch in odd)


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


def code_end(line: str) -> int:
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
    last = last[: code_end(last)].rstrip().rstrip(TRAILING_PUNCTUATION).rstrip()
    key = "\n".join([*lines[:-1], last])
    return key if key.strip() else text


def whole_lines(text: str) -> str:
    """A block draft the token budget stopped mid-line, back to its last whole line (a draft
    of one unfinished line is kept: there is nothing shorter to show)."""
    content = len(text) - len(text.lstrip())
    end = text.rfind("\n")
    return text[:end] if end > content else text


def first_line_key(text: str) -> str:
    """What a draft's first line says (``near_key``): block drafts alike there are one guess
    of the line the user reads first."""
    return near_key(first_line(text).strip())


def postprocess(
    completion: Completion,
    after: str,
    line_mode: str = "single",
    stop: StopCondition | None = None,
) -> list[Suggestion]:
    """Drafts in the engine's order -> their cleaned-up texts, non-empty, in that order.

    line_mode "single": each draft is cut to its first line; any other: a block, ended by
    ``stop``'s block rules (a draft that ended by EOS is checked again, one the budget stopped
    goes back to its last whole line). Drafts alike once cleaned up stay: merging them is a
    ranking stage (ranking.merged).
    """
    out: list[Suggestion] = []
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
        if not core:
            continue
        if rest and rest.startswith(core):
            continue  # it would only type again what already follows the cursor
        out.append(Suggestion(text, draft.score, draft.source))
    return out
