"""The next draft decoded on accept (ahead.py): where the cursor is after an accept, and
which request may answer from the job."""

from __future__ import annotations

import threading
from concurrent.futures import Future

from lsp_server.completion.cleanup import Suggestion
from lsp_server.completion.cursor import CursorContext
from lsp_server.runtime.ahead import Ahead, TypingCache, after_accept

DOC = "def area(side):\n    \n\nprint(1)\n"
AT = DOC.index("    \n") + 4  # after the indentation of the blank body line


def test_after_accept_inserts_the_text_unless_the_editor_already_did() -> None:
    inserted = DOC[:AT] + "return side" + DOC[AT:]
    # automatic: the editor did not ask; the syntax rules may decide nothing belongs there
    expected = CursorContext.at(inserted, AT + len("return side"), "python", automatic=True)
    assert after_accept(DOC, AT, "return side", "python") == expected  # the accept came first
    assert after_accept(inserted, AT, "return side", "python") == expected  # the change first
    assert after_accept(DOC, len(DOC) + 10, "x").before == DOC + "x"  # clamped to the end


def job() -> tuple[threading.Event, Future[object]]:
    return threading.Event(), Future()


def test_a_request_that_continues_the_job_takes_it() -> None:
    ahead = Ahead()
    where = after_accept(DOC, AT, "return side")
    cancel, future = job()
    ahead.start("doc", where, cancel, future)
    # Enter and the indentation typed after the accepted line: it still continues the job.
    later = CursorContext(where.before + "\n    ", where.after)
    assert ahead.take("doc", later) == (where, future)
    assert ahead.take("doc", later) is None  # taken once
    assert not cancel.is_set()


def test_a_request_elsewhere_cancels_the_job() -> None:
    ahead = Ahead()
    cancel, future = job()
    ahead.start("doc", after_accept(DOC, AT, "return side"), cancel, future)
    assert ahead.take("doc", CursorContext.at(DOC, 3)) is None
    assert cancel.is_set()
    assert ahead.finished("doc", future, None) is None  # nothing left to answer from


def test_a_request_in_another_document_cancels_the_job() -> None:
    """A job holds the engine thread until it ends: the user who went to another file waits
    for it there, for drafts at a place they left."""
    ahead = Ahead()
    cancel, future = job()
    ahead.start("a.py", after_accept(DOC, AT, "return side"), cancel, future)
    assert ahead.leave_others("a.py") == 0 and not cancel.is_set()  # its own document's: kept
    assert ahead.leave_others("b.py") == 1 and cancel.is_set()
    assert ahead.finished("a.py", future, None) is None  # nothing left to answer from


def test_a_newer_accept_or_a_closed_document_cancels_the_job() -> None:
    ahead = Ahead()
    first, older = job()
    ahead.start("doc", after_accept(DOC, AT, "return"), first, older)
    second, newer = job()
    ahead.start("doc", after_accept(DOC, AT, "return side"), second, newer)
    assert first.is_set() and not second.is_set()
    assert ahead.finished("doc", older, None) is None  # replaced: its drafts are stale
    ahead.cancel("doc")
    assert second.is_set()


def test_a_finished_job_answers_the_next_request_through_the_typing_cache() -> None:
    """What the server does when no request took the job: the typing-along cache holds its
    drafts, so a request there, or after Enter along a draft, needs no model call."""
    ahead, cache = Ahead(), TypingCache()
    where = after_accept(DOC, AT, "return side")
    cancel, future = job()
    ahead.start("doc", where, cancel, future, cache.entry("doc"))
    done = ahead.finished("doc", future, cache.entry("doc"))
    assert done is not None and done == where
    cache.remember("doc", done.before, [Suggestion(" * side", 1.0), Suggestion("\n    pass", 0.5)])
    assert [s.text for s in cache.along("doc", where) or []] == [" * side", "\n    pass"]
    enter = CursorContext(where.before + "\n    ", where.after)
    assert [s.text for s in cache.along("doc", enter) or []] == ["pass"]


def test_a_job_never_replaces_drafts_the_user_went_on_with() -> None:
    """The editors' report: a block accepted, undone, and its first line accepted from the
    drafts still shown; the first accept's job must not replace those drafts when it ends."""
    ahead, cache = Ahead(), TypingCache()
    line = CursorContext.at(DOC, AT)
    cache.remember("doc", line.before, [Suggestion("return side\n    pass", 1.0)])
    cancel, future = job()
    ahead.start(
        "doc", after_accept(DOC, AT, "return side\n    pass"), cancel, future, cache.entry("doc")
    )
    # undone, then typed along the shown draft: answered from the cache, elsewhere than the job
    typed = CursorContext.at(DOC[:AT] + "return side" + DOC[AT:], AT + len("return side"))
    assert cache.along("doc", typed) is not None
    ahead.leave("doc", typed)
    assert cancel.is_set()
    assert ahead.finished("doc", future, cache.entry("doc")) is None


def test_a_job_finished_after_the_cache_was_used_there_leaves_it_alone() -> None:
    ahead, cache = Ahead(), TypingCache()
    where = after_accept(DOC, AT, "return side")
    cache.remember("doc", where.before, [Suggestion(" * side", 1.0)])
    cancel, future = job()
    ahead.start("doc", where, cancel, future, cache.entry("doc"))
    assert cache.along("doc", where) is not None  # the user typed along at the job's place
    ahead.leave("doc", where)
    assert not cancel.is_set()  # the same place: the job may still answer a request there
    assert ahead.finished("doc", future, cache.entry("doc")) is None  # but not overwrite
