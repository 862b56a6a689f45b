"""Drafts as the protocol's items: inline completion items and completion items.

Each item carries the accept command (``superposed.accept``), which the client runs when the
user takes the draft: the server learns it and decodes the next draft at once (server.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.workspace import PositionCodec

from lsp_server.completion.cleanup import Suggestion

CMD_ACCEPT = "superposed.accept"
UINTEGER = 2**31 - 1  # LSP's uinteger: a position's line and character are at most this
POSITION_SHAPE = '{"line": L, "character": C}'
LABEL_CHARS = 60  # completion labels longer than this are shortened (the insert is not)


def accept_command(uri: str, line: str, s: Suggestion, at: types.Position) -> types.Command:
    """Runs when the user accepts a draft: the user store learns it (after its line's start),
    and the next draft is decoded at once after it, inserted at ``at``. (A score and source
    here broke Neovim 0.11's accept from the popup: the detail carries them instead.)"""
    argument = {
        "uri": uri,
        "context": line,
        "text": s.text,
        "position": {"line": at.line, "character": at.character},
    }
    return types.Command(title="accept", command=CMD_ACCEPT, arguments=[argument])


def accepted_at(item: Mapping[str, Any]) -> tuple[str, str, types.Position] | None:
    """An accept command's argument read back: the uri, the text and where it went in; None
    when it does not say where (a client's partial accept may not send ``position``).

    A ``position`` that is not one (a line or character that is not an integer from 0 to
    2^31 - 1, LSP's uinteger) is the client's mistake: JsonRpcInvalidParams, which says so.
    """
    uri, text, at = item.get("uri"), item.get("text"), item.get("position")
    if not (isinstance(uri, str) and isinstance(text, str)) or at is None:
        return None
    if not isinstance(at, dict):
        raise JsonRpcInvalidParams(f"{CMD_ACCEPT}: position must be {POSITION_SHAPE}, not {at!r}")
    line, character = at.get("line"), at.get("character")
    for name, value in (("line", line), ("character", character)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= UINTEGER:
            raise JsonRpcInvalidParams(
                f"{CMD_ACCEPT}: position.{name} must be an integer from 0 to {UINTEGER}, "
                f"not {value!r} (the position is {POSITION_SHAPE}, where the draft went in)"
            )
    assert isinstance(line, int) and isinstance(character, int)  # checked above (for mypy)
    return uri, text, types.Position(line=line, character=character)


def inline_items(
    uri: str,
    pos: types.Position,
    line: str,
    suggestions: list[Suggestion],
    selected: types.SelectedCompletionInfo | None = None,
    codec: PositionCodec | None = None,
) -> list[types.InlineCompletionItem]:
    """The drafts at ``pos`` as inline completion items. With the suggest widget open
    (``selected``), a draft extends the item the user is about to accept: it replaces that
    item's range, starting with the item's text (as the protocol asks). ``codec``: the
    position encoding the client negotiated (None: UTF-16, the protocol's default)."""
    here, head, at = types.Range(start=pos, end=pos), "", pos
    if selected is not None:  # the draft goes in after the item's text
        here, head = selected.range, selected.text
        at = position_after(selected.range.start, head, codec or PositionCodec())
    return [
        types.InlineCompletionItem(
            insert_text=head + s.text, range=here, command=accept_command(uri, line, s, at)
        )
        for s in suggestions
    ]


def position_after(start: types.Position, text: str, codec: PositionCodec) -> types.Position:
    """Where the cursor is once ``text`` is inserted at ``start``, counted in the client's
    position encoding (UTF-16 code units by default: an astral character counts 2, not 1)."""
    lines = text.split("\n")
    if len(lines) == 1:
        return types.Position(start.line, start.character + codec.client_num_units(text))
    return types.Position(start.line + len(lines) - 1, codec.client_num_units(lines[-1]))


def completion_items(
    uri: str, pos: types.Position, line: str, suggestions: list[Suggestion], snippet: bool
) -> list[types.CompletionItem]:
    """The drafts at ``pos`` as completion items, best first; ``snippet``: the client takes
    snippets. Plain-text edits are cut at the first space by some clients (Neovim 0.11
    inserts only the first word); a snippet that escapes everything inserts the whole draft
    everywhere."""
    here = types.Range(start=pos, end=pos)
    items = []
    for i, s in enumerate(suggestions):
        label = s.text.strip().replace("\r\n", "\n").replace("\n", "⏎ ")
        items.append(
            types.CompletionItem(
                label=label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…",
                kind=types.CompletionItemKind.Text,
                detail=f"superposed draft {i + 1} (score {s.score:.2f}, {s.source})",
                sort_text=f"{i:04d}",
                filter_text=s.text,
                text_edit=types.TextEdit(
                    range=here, new_text=snippet_body(s.text, line) if snippet else s.text
                ),
                insert_text_format=types.InsertTextFormat.Snippet
                if snippet
                else types.InsertTextFormat.PlainText,
                command=accept_command(uri, line, s, pos),
            )
        )
    return items


def snippet_body(text: str, line: str) -> str:
    """The draft as a snippet that inserts it as drafted on the line ``line`` (the cursor
    line's text before the cursor): literal, and its later lines written relative to that
    line's indentation, which every snippet engine adds to them (vim.snippet, LuaSnip, VS
    Code). A later line that starts with less stays as it is (a snippet cannot dedent)."""
    indentation = line[: len(line) - len(line.lstrip())]
    first, *later = text.split("\n")
    relative = [r.removeprefix(indentation) for r in later]
    return snippet_escape("\n".join([first, *relative]))


def snippet_escape(text: str) -> str:
    """The draft as a snippet that inserts itself literally."""
    return text.replace("\\", "\\\\").replace("$", "\\$").replace("}", "\\}")


def snippets_supported(capabilities: types.ClientCapabilities) -> bool:
    document = capabilities.text_document
    item = document.completion.completion_item if document and document.completion else None
    return bool(item and item.snippet_support)
