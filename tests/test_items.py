"""Drafts as protocol items: where the accept command says the draft went in."""

from __future__ import annotations

from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.workspace import PositionCodec

from lsp_server.completion.cleanup import Suggestion
from lsp_server.completion.items import accepted_at, inline_items

FRAKTUR = "𝔘𝔫𝔦𝔠𝔬𝔡𝔢"  # 7 astral characters: 14 UTF-16 units, 28 UTF-8 bytes


def argument(item: types.InlineCompletionItem) -> dict[str, Any]:
    """The item's accept command's argument."""
    assert item.command is not None and item.command.arguments
    found = item.command.arguments[0]
    assert isinstance(found, dict)
    return found


@pytest.mark.parametrize(
    ("encoding", "character"),
    [
        (types.PositionEncodingKind.Utf16, 8 + 14),
        (types.PositionEncodingKind.Utf8, 8 + 28),
        (types.PositionEncodingKind.Utf32, 8 + 7),
    ],
)
def test_the_accept_after_a_selected_item_is_counted_in_the_negotiated_encoding(
    encoding: types.PositionEncodingKind, character: int
) -> None:
    """Issue 34 item 6: the accept's position added the item's code points (15 here), so the
    draft-ahead job decoded at the wrong place (UTF-16 needs 22, UTF-8 36)."""
    start = types.Position(line=3, character=8)
    selected = types.SelectedCompletionInfo(
        range=types.Range(start=start, end=types.Position(line=3, character=10)), text=FRAKTUR
    )
    pos = types.Position(line=3, character=10)
    (item,) = inline_items(
        "file:///x.py", pos, "x = ", [Suggestion("(1)", 1.0)], selected, PositionCodec(encoding)
    )
    assert item.insert_text == FRAKTUR + "(1)"
    accepted = accepted_at(argument(item))
    assert accepted is not None
    assert accepted[2] == types.Position(line=3, character=character)


def test_the_accept_after_a_selected_item_of_two_lines_is_on_its_last_line() -> None:
    start = types.Position(line=1, character=4)
    text = "call(\n    𝔘𝔫"
    selected = types.SelectedCompletionInfo(range=types.Range(start=start, end=start), text=text)
    (item,) = inline_items("file:///x.py", start, "", [Suggestion(")", 1.0)], selected)
    assert argument(item)["position"] == {"line": 2, "character": 4 + 4}


@pytest.mark.parametrize(
    ("position", "named"),
    [
        ({"line": -1, "character": 0}, "position.line"),
        ({"line": 0, "character": 2**62}, "position.character"),
        ({"line": True, "character": 0}, "position.line"),
        ({"line": 0, "character": "3"}, "position.character"),
        ({"line": 0}, "position.character"),
        ([0, 3], "position must be"),
    ],
)
def test_an_impossible_accept_position_is_invalid_params(position: Any, named: str) -> None:
    """Issue 34, item 8: -32602 saying which field is wrong, not -32603 with a traceback."""
    item = {"uri": "file:///a.py", "text": "x", "position": position}
    with pytest.raises(JsonRpcInvalidParams, match=named):
        accepted_at(item)


def test_an_accept_without_position_only_says_nothing_of_where() -> None:
    assert accepted_at({"uri": "file:///a.py", "text": "x"}) is None  # a partial accept
    at = accepted_at({"uri": "u", "text": "x", "position": {"line": 2**31 - 1, "character": 0}})
    assert at is not None and at[2].line == 2**31 - 1
