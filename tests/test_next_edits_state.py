"""What next edits keep (issue 51 item 5): the newest patterns, no parse of a closed
document or of a workspace file, no site on a line no edit would be made on; and when a
change is still being typed (issue 52 item 10: a pause mid-rename proposed "words -> tok")."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from lsp_server.next_edits import tokens
from lsp_server.next_edits.log import Change, EditLog
from lsp_server.next_edits.patterns import MAX_LINE, derive
from lsp_server.next_edits.proposals import Doc, NextEdits
from lsp_server.next_edits.sites import find

A, B = "file:///ws/state/a.py", "file:///ws/state/b.py"  # no other test's: parses are kept


def _always(uri: str, text: str) -> bool:
    return True


def _ended(edits: NextEdits, uri: str, before: str, after: str) -> Change:
    """``before`` -> ``after`` in ``uri`` as one change that a pause ended, its pattern kept."""
    edits.log.open(uri, before)
    edits.log.changed(uri, after, 2)
    change = edits.log.end(uri)
    assert change is not None
    edits.ended(change, "python")
    return change


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, weakref.ref[object]]]]:
    """Every text tree-sitter parsed here, with a weak reference to its parse."""
    seen: list[tuple[str, weakref.ref[object]]] = []
    original = tokens.Prose._parse

    def spy(self: tokens.Prose) -> object:
        seen.append((self.text, weakref.ref(self)))
        return original(self)

    monkeypatch.setattr(tokens.Prose, "_parse", spy)
    yield seen


def _alive(parses: list[tuple[str, weakref.ref[object]]], text: str) -> bool:
    gc.collect()
    return any(t == text and ref() is not None for t, ref in parses)


def test_a_fourth_pattern_proposes_and_the_oldest_goes() -> None:
    """The patterns are the newest three: a deque built from four kept the oldest three,
    and from the fourth edit of a session on, nothing new was ever proposed."""
    text = "a1 = 1\na2 = 2\na3 = 3\na4 = 4\nprint(a1, a2, a3, a4)\n"
    edits = NextEdits()
    for n in range(1, 5):
        before, text = text, text.replace(f"a{n} = {n}", f"b{n} = {n}")
        _ended(edits, A, before, text)
    labels = [p.label for p in edits.patterns()]
    assert labels == ["rename a4 -> b4", "rename a3 -> b3", "rename a2 -> b2"]
    proposed = edits.propose(A, 0, {A: Doc(text, 5, "python")}, "file", _always)
    assert {p.site.new_text for p in proposed} == {"b2", "b3", "b4"}


def test_a_closed_documents_parse_changes_and_proposals_go(
    parses: list[tuple[str, weakref.ref[object]]],
) -> None:
    """A closed document's parse (24 bytes a character) went only when 8 newer texts were
    parsed: 7.5 MB of documents held +716 MB after they closed (issue 51 item 5)."""
    edits = NextEdits()
    text_b = 'user = old_name()  # one site\nlabel = "old_name"\n'
    after_a = _ended(edits, A, "x = old_name\n", "x = new_name\n").after
    _ended(edits, B, text_b, text_b + "z = 1\n")  # a change there too (of two lines)
    docs = {A: Doc(after_a, 2, "python"), B: Doc(text_b + "z = 1\n", 2, "python")}
    proposed = edits.propose(A, 0, docs, "open", _always)
    assert [p.site.uri for p in proposed] == [B]
    assert _alive(parses, docs[B].text) and any(c.uri == B for c in edits.log.ended)

    edits.closed(B)
    assert not _alive(parses, docs[B].text)
    assert all(c.uri != B for c in edits.log.ended)
    assert B not in tokens.kept() and A in tokens.kept()  # the open one's stays for its next reader
    edits.closed(A)
    assert not _alive(parses, after_a) and A not in tokens.kept()


def test_a_workspace_files_parse_is_not_kept(
    parses: list[tuple[str, weakref.ref[object]]],
) -> None:
    """A file read from disk for scope workspace is no open document: no close would free it."""
    change = EditLog()
    change.open(A, "x = old_name\n")
    change.changed(A, "x = new_name\n", 2)
    ended = change.end(A)
    assert ended is not None
    pattern = derive(ended, "python").pattern
    assert pattern is not None
    text = 'y = old_name  # a site\ns = "old_name"\n'
    assert [s.row for s in find(pattern, B, text, "python", "workspace")] == [0]
    assert not _alive(parses, text)


def test_a_line_no_edit_would_be_made_on_holds_no_site() -> None:
    """A generated or minified line (over MAX_LINE characters) is refused as an edit, and
    is no site either: lexing it costs, and lex's cache would keep it."""
    change = EditLog()
    change.open(A, "x = old_name\n")
    change.changed(A, "x = new_name\n", 2)
    ended = change.end(A)
    assert ended is not None
    pattern = derive(ended, "python").pattern
    assert pattern is not None
    long_line = "y = [" + "1, " * (MAX_LINE // 3) + "old_name]"
    text = f"{long_line}\nz = old_name\n"
    assert [s.row for s in find(pattern, B, text, "python", "open")] == [1]


def test_the_log_says_when_the_caret_sits_after_a_name_being_typed() -> None:
    """``words`` typed over with ``tok``: the user may be typing the name still, so the pause
    that ends the change is the longer one (proposals.NAME_PAUSE_S)."""
    log = EditLog()
    log.open(A, "words = 1\nf(a)\n")
    log.changed(A, "t = 1\nf(a)\n", 2)
    assert log.in_name(A)
    log.changed(A, "tok = 1\nf(a)\n", 3)
    assert log.in_name(A)
    log.changed(A, "tok = 1\nf(a, )\n", 4)  # elsewhere: ", " after an argument
    assert not log.in_name(A)
    log.changed(A, "tok = 1\nf(a, b)\n", 5)
    assert log.in_name(A)
    assert log.end(A) is not None and not log.in_name(A)  # ended: nothing being typed
