"""When the server drafts without being asked: the trigger rules.

A request the user made (an Invoked one: VS Code's ``Alt+\\``, Neovim's ``<C-Space>``) is
always answered. An automatic one (ghost text as you type, a completion popup opened by a
trigger character or kept open while typing) follows the ``superposed.trigger*`` settings,
as users of comparable tools asked for them: on-demand only (tabby#306), a minimum length
typed on the line (tabby#2840), and nothing mid-line while text sits right of the cursor
(llama.vim's ``max_line_suffix``). An automatic request the rules refuse is answered empty at
once, before it reaches the engine or supersedes another request.
"""

from __future__ import annotations

from dataclasses import dataclass

TRIGGERS = ("auto", "manual")
MID_LINE = ("always", "never", "end-only")
# What may sit right of the cursor for ``midLine: end-only``: closing brackets and quotes, and
# the punctuation that ends a statement or an item (an editor's auto-pairs leave these).
CLOSING = frozenset(")]}>\"'`;,: \t")


@dataclass
class TriggerSettings:
    """When automatic requests are answered (invoked ones always are)."""

    trigger: str = "auto"  # auto: as you type too; manual: only when asked
    # Characters the cursor's line must hold before the cursor, past its indentation
    # (0: also at the start of a line).
    min_prefix_chars: int = 0
    # With text right of the cursor: always; never; end-only: only closing brackets, quotes
    # and punctuation (what an editor's auto-pairs put there).
    mid_line: str = "always"
    # On accept, draft the next piece at once (the cursor after the accepted text), so it is
    # ready when the editor asks: after Enter, or as ghost text right away (server.py, ahead.py).
    on_accept: bool = True


def refusal(settings: TriggerSettings, line_before: str, line_after: str) -> str | None:
    """Why an automatic request at this cursor gets no drafts, or None: answer it.

    ``line_before`` and ``line_after``: the cursor's line split at the cursor.
    """
    if settings.trigger == "manual":
        return "manual trigger"
    if len(line_before.lstrip()) < settings.min_prefix_chars:
        return "short prefix"
    rest = line_after.strip()
    blocked = {"always": False, "never": bool(rest), "end-only": not set(rest) <= CLOSING}
    return "mid-line" if blocked[settings.mid_line] else None
