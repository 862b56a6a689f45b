"""Next edits (issue 35): the edit log's merging, each pattern kind and what must not be
proposed, the sites' order, stale and dismissed proposals, the privacy rule."""

from __future__ import annotations

from lsp_server.next_edits.log import EditLog, differ
from lsp_server.next_edits.patterns import derive
from lsp_server.next_edits.proposals import Doc, NextEdits
from lsp_server.next_edits.sites import find

SOURCE = '''import os
from app.models import User
from app.models import Group


def get_user(uid):
    """Return get_user's row."""
    return db.get(uid)


first = get_user(1)
second = get_user(2)  # get_user here
label = "get_user"
user = db.get(name)
other = cache.get(name)
pair = db.get(a, b)
obj.get_user(3)
'''


def _change(before: str, after: str, uri: str = "a.py"):
    log = EditLog()
    log.open(uri, before)
    assert log.changed(uri, after, 2) is None
    change = log.end(uri)
    assert change is not None
    return change


def _proposed(before: str, after: str) -> list[tuple[int, str, str]]:
    """(row, old text, new text) of each site of the edit ``before`` -> ``after``."""
    derived = derive(_change(before, after), "python")
    assert derived.pattern is not None, derived.reason
    sites = find(derived.pattern, "a.py", after, "python", "file")
    return [(s.row, s.old_text, s.new_text) for s in sites]


def _refusal(before: str, after: str) -> str:
    derived = derive(_change(before, after), "python")
    assert derived.pattern is None, derived.pattern
    return derived.reason


# -- the log ------------------------------------------------------------------------------


def test_differ_finds_the_shortest_middle() -> None:
    assert differ("abcdef", "abXYef") == (2, 4, 4)
    assert differ("get_user", "fetch_user") == (0, 3, 5)
    assert differ("aaa", "aaaa") == (3, 3, 4)  # the suffix never overlaps the prefix


def test_keystrokes_at_one_place_merge_into_one_change() -> None:
    log = EditLog()
    log.open("u", "x = get_user(1)\n")
    text = "x = get_user(1)\n"
    for i in range(5):  # "get" selected and typed over with "fetch", key by key
        text = ("x = " + "fetch"[: i + 1] + "_user(1)\n") if i else "x = f_user(1)\n"
        assert log.changed("u", text, 2 + i) is None
    change = log.end("u")
    assert change is not None
    assert (change.removed, change.inserted, change.version) == ("get", "fetch", 6)
    assert log.end("u") is None  # ended once


def test_a_jump_ends_the_change_and_starts_another() -> None:
    log = EditLog()
    text = "alpha = 1\nbeta = 2\n"
    log.open("u", text)
    assert log.changed("u", "alpha = 10\nbeta = 2\n", 2) is None
    ended = log.changed("u", "alpha = 10\nbeta = 20\n", 3)  # at another line: a jump
    assert ended is not None and (ended.removed, ended.inserted) == ("", "0")
    second = log.end("u")
    assert second is not None and second.after == "alpha = 10\nbeta = 20\n"
    assert len(log.ended) == 2


def test_typing_on_after_a_pause_continues_the_change() -> None:
    """``data``, a pause, ``_frame``: one change from the text before ``data`` (else the
    pause's half word would be a rename of ``data`` to ``data_frame`` everywhere)."""
    log = EditLog()
    log.open("u", "x = 1\n")
    log.changed("u", "x = data\n", 2)
    assert log.end("u") is not None
    log.changed("u", "x = data_frame\n", 3)
    change = log.end("u")
    assert change is not None and (change.removed, change.inserted) == ("1", "data_frame")


def test_a_change_that_undoes_itself_is_no_change() -> None:
    log = EditLog()
    log.open("u", "x = 1\n")
    log.changed("u", "x = 12\n", 2)
    log.changed("u", "x = 1\n", 3)
    assert log.end("u") is None


def test_the_log_is_bounded_and_forgets_closed_documents() -> None:
    log = EditLog(keep=3)
    text = "a\n"
    log.open("u", text)
    for i in range(10):
        text += f"line{i}\n"
        log.changed("u", text, i + 2)
        log.end("u")
    assert len(log.ended) == 3
    log.close("u")
    assert log.held() == 0
    huge = "x" * 500_000
    log.open("big", huge)  # over MAX_CHARS: not followed, so not copied
    assert log.held() == 0 and log.changed("big", huge + "y", 2) is None


# -- patterns, one kind at a time ----------------------------------------------------------


def test_a_renamed_definition_is_proposed_at_its_uses_and_attributes() -> None:
    after = SOURCE.replace("def get_user", "def fetch_user")
    assert _proposed(SOURCE, after) == [
        (10, "get_user", "fetch_user"),
        (11, "get_user", "fetch_user"),
        (16, "get_user", "fetch_user"),  # obj.get_user: a definition's rename reaches them
    ]


def test_a_renamed_use_is_proposed_at_uses_only_not_in_strings_or_comments() -> None:
    source = SOURCE.replace("def get_user(uid)", "def load(uid)")  # get_user defined elsewhere
    after = source.replace("first = get_user(1)", "first = fetch_user(1)")
    assert _proposed(source, after) == [
        (11, "get_user", "fetch_user"),
    ]  # not obj.get_user (an attribute), not the docstring, the comment or the string


def test_a_local_names_rename_stays_in_its_function() -> None:
    """``style`` bound in ``a`` (a parameter) is not ``b``'s ``style``."""
    source = (
        "def a(style):\n    x = style\n    return style\n\n"
        "def b():\n    style = 2\n    return style\n"
    )
    after = source.replace("x = style", "x = border_style")
    # not the parameter either: a line that binds the name is not a use (scope.binds)
    assert _proposed(source, after) == [(2, "style", "border_style")]


def test_a_keyword_arguments_name_is_not_the_variables() -> None:
    source = "def f(style):\n    g(style=style)\n    return style\n"
    after = source.replace("return style", "return border_style")
    derived = derive(_change(source, after), "python")
    assert derived.pattern is not None
    sites = find(derived.pattern, "a.py", after, "python", "file")
    # the value passed, not g's keyword (nor the parameter: a binding, scope.binds)
    assert [(s.row, s.start) for s in sites] == [(1, 12)]


def test_an_attributes_rename_keeps_its_receiver() -> None:
    source = "self.size = 1\nother.size = 2\nprint(self.size)\n"
    after = source.replace("self.size = 1", "self.length = 1")
    derived = derive(_change(source, after), "python")
    assert derived.reason == "attribute"
    assert _proposed(source, after) == [(2, "size", "length")]


def test_a_changed_string_is_proposed_where_the_same_string_stands() -> None:
    source = 'row["user_id"]\nname = "user_idx"\nother["user_id"]\n'
    after = source.replace('row["user_id"]', 'row["uid"]')
    assert _proposed(source, after) == [(2, '"user_id"', '"uid"')]


def test_an_edit_inside_a_docstring_is_proposed_in_strings_only() -> None:
    source = (
        'def f():\n    """\n    Uses old_word here.\n    """\n    old_word = 1\n\n'
        'x = """\nold_word again\n"""\n'
    )
    after = source.replace("Uses old_word", "Uses new_word")
    assert _proposed(source, after) == [(7, "old_word", "new_word")]  # not the code's


def test_an_argument_added_at_the_end_of_a_call_reaches_the_same_callee() -> None:
    after = SOURCE.replace("return db.get(uid)", "return db.get(uid, None)")
    # db.get with one argument, whatever it is; not cache.get, not db.get(a, b)
    assert _proposed(SOURCE, after) == [(13, "", ", None")]


def test_an_argument_added_first_reaches_the_same_callee() -> None:
    source = "log(a)\nlog(b)\nlog()\nlog(c, d)\n"
    after = source.replace("log(a)", "log('api', a)", 1)
    assert _proposed(source, after) == [(1, "", "'api', ")]


def test_an_argument_that_names_something_reaches_the_other_calls_too() -> None:
    """``ctx`` added first in one call: in the benchmark's commits such an argument went into
    every call of that callee (``context.on_text(..., node_type)``), so it is proposed there;
    a keyword argument likewise."""
    source = "run(a)\nrun(b)\nrun(a, b)\n"
    after = source.replace("run(a)", "run(ctx, a)", 1)
    assert derive(_change(source, after), "python").reason == "argument"
    assert _proposed(source, after) == [(1, "", "ctx, ")]
    keyword = source.replace("run(a)", "run(a, retries=3)", 1)
    assert _proposed(source, keyword) == [(1, "", ", retries=3")]


def test_a_changed_import_path_is_proposed_at_the_other_imports() -> None:
    after = SOURCE.replace("from app.models import User", "from app.db.models import User")
    derived = derive(_change(SOURCE, after), "python")
    assert derived.reason == "import"
    assert _proposed(SOURCE, after) == [(2, "", "db.")]


def test_a_replaced_token_sequence_keeps_its_context() -> None:
    """A short string is no string pattern: found again inside the same call only."""
    source = "x = load(path, mode='r')\ny = load(path, mode='r')\nz = dump(path, mode='r')\n"
    after = source.replace("x = load(path, mode='r')", "x = load(path, mode='rb')")
    assert derive(_change(source, after), "python").reason == "replace"
    assert _proposed(source, after) == [(1, "'r'", "'rb'")]


def test_what_must_not_be_proposed() -> None:
    assert _refusal(SOURCE, SOURCE.replace("first = get_user(1)", "first  =  get_user(1)")) == (
        "whitespace only"
    )
    assert _refusal(SOURCE, SOURCE.replace("# get_user here", "# fetch_user here")) == (
        "in a comment"
    )
    assert _refusal(SOURCE, SOURCE.replace("import os\n", "import os\nimport re\n")) == (
        "spans lines"
    )
    assert _refusal("for i in x:\n    f(i)\n", "for j in x:\n    f(i)\n") == "a one-letter name"
    assert _refusal("if a:\n    pass\n", "while a:\n    pass\n") == "a keyword"
    long_args = ", ".join(f"a{i}" for i in range(8))
    assert _refusal("f(x)\nf(x)\n", f"f(x, {long_args})\nf(x)\n") == "too large"
    # an argument typed into an empty call is typing, not a repeated edit: no argument
    # pattern, and its replace pattern has no context that makes it the same situation
    assert derive(_change("f()\nf()\n", "f(value)\nf()\n"), "python").reason != "argument"


def test_a_use_switched_to_a_name_the_document_has_is_no_rename() -> None:
    """``load(x)`` -> ``save(x)`` where ``save`` exists: that one call changed its mind."""
    source = "def load(p):\n    pass\n\ndef save(p):\n    pass\n\nload(1)\nload(2)\n"
    after = source.replace("load(1)", "save(1)")
    assert _refusal(source, after) == "switched to an existing name"
    # renaming the definition to a name that exists is still a rename (its uses follow)
    renamed = source.replace("def load", "def save_all")
    assert [row for row, _, _ in _proposed(source, renamed)] == [6, 7]


def test_a_rewrite_that_would_apply_again_is_refused() -> None:
    assert _refusal("y = wrap(a)\nz = wrap(a)\n", "y = wrap(wrap(a))\nz = wrap(a)\n") == (
        "would apply again"
    )


def test_the_site_just_edited_is_not_proposed() -> None:
    source = "total = count + count\n"
    after = "total = amount + count\n"
    assert _proposed(source, after) == [(0, "count", "amount")]  # the second, not the first


# -- proposals: order, weights, staleness, privacy ------------------------------------------


def _next_edits(before: str, after: str, uri: str = "file:///a.py") -> NextEdits:
    edits = NextEdits()
    derived = edits.ended(_change(before, after, uri), "python")
    assert derived.pattern is not None
    return edits


def _always(uri: str, text: str) -> bool:
    return True


def test_sites_near_the_cursor_come_first_then_other_documents() -> None:
    source = "a = old_name\n" + "pass\n" * 10 + "b = old_name\nc = old_name\n"
    after = source.replace("a = old_name", "a = new_name", 1)
    edits = _next_edits(source, after)
    docs = {
        "file:///b.py": Doc("old_name()\n", 1, "python"),
        "file:///a.py": Doc(after, 2, "python"),
    }
    got = edits.propose("file:///a.py", 0, docs, "open", _always)
    assert [(p.site.uri, p.site.row, p.site.origin) for p in got] == [
        ("file:///a.py", 11, "file"),
        ("file:///a.py", 12, "file"),
        ("file:///b.py", 0, "open"),
    ]
    assert edits.propose("file:///a.py", 12, docs, "file", _always)[-1].site.uri == "file:///a.py"
    json = got[0].to_json(len)
    assert json["range"] == {
        "start": {"line": 11, "character": 4},
        "end": {"line": 11, "character": 12},
    }
    assert (json["oldText"], json["newText"], json["textDocument"]) == (
        "old_name",
        "new_name",
        {"uri": "file:///a.py", "version": 2},
    )


def test_positions_count_the_clients_units() -> None:
    source = "s = '😀'; old_name()\nold_name()\n"
    after = "s = '😀'; old_name()\nnew_name()\n"
    edits = _next_edits(source, after)
    got = edits.propose(
        "file:///a.py", 1, {"file:///a.py": Doc(after, 2, "python")}, "open", _always
    )
    utf16 = got[0].to_json(lambda s: len(s.encode("utf-16-le")) // 2)
    assert utf16["range"]["start"] == {"line": 0, "character": 10}  # 😀 is two UTF-16 units


def test_accepted_kinds_rank_nearer_and_dismissed_edits_are_not_proposed_again() -> None:
    source = "x = old_name\n" + "pass\n" * 5 + "y = old_name\nz = old_name\n"
    after = source.replace("x = old_name", "x = new_name")
    edits = _next_edits(source, after)
    docs = {"file:///a.py": Doc(after, 2, "python")}
    got = edits.propose("file:///a.py", 0, docs, "open", _always)
    assert len(got) == 2
    assert edits.dismissed(got[0].id) and not edits.dismissed("unknown")
    again = edits.propose("file:///a.py", 0, docs, "open", _always)
    assert [p.site.row for p in again] == [7]
    assert edits.weight("rename") < 1.0
    assert edits.accepted(again[0].id)
    assert edits.weight("rename") == 1.0 and edits.accepts["rename"] == 1


def test_a_stale_proposal_is_dropped() -> None:
    source = "x = old_name\ny = old_name\n"
    after = source.replace("x = old_name", "x = new_name")
    edits = _next_edits(source, after)
    docs = {"file:///a.py": Doc(after, 2, "python")}
    got = edits.propose("file:///a.py", 0, docs, "open", _always)
    assert edits.fresh(got, docs) == got
    changed = {"file:///a.py": Doc("x = new_name\ny = other\n", 3, "python")}
    assert edits.fresh(got, changed) == []
    assert edits.fresh(got, {}) == []  # its document closed


def test_an_edit_in_a_document_a_save_would_not_learn_stays_in_it() -> None:
    """Privacy: the edit's text (from .env) never goes into another document's proposals;
    the other documents' sites for an edit from a learnable one hold only their own text
    and the edit's."""
    env_before = "TOKEN = old_secret_name\nX = old_secret_name\n"
    env_after = env_before.replace("TOKEN = old_secret_name", "TOKEN = new_secret_name")
    edits = _next_edits(env_before, env_after, "file:///ws/.env")
    docs = {
        "file:///ws/.env": Doc(env_after, 2, "dotenv"),
        "file:///ws/app.py": Doc("v = old_secret_name\n", 1, "python"),
    }

    def not_env(uri: str, text: str) -> bool:
        return not uri.endswith(".env")

    from_env = edits.propose("file:///ws/.env", 0, docs, "open", not_env)
    assert [p.site.uri for p in from_env] == ["file:///ws/.env"]
    assert edits.propose("file:///ws/app.py", 0, docs, "open", not_env) == []
    assert edits.propose("file:///ws/app.py", 0, docs, "open", _always)[0].site.uri == (
        "file:///ws/app.py"
    )


def test_a_half_typed_rename_is_withdrawn_when_typing_goes_on() -> None:
    """A pause mid-word ended "get" -> "fet"; typing on is the same change, and the
    proposals of "fet_user" go (the e2e test met it: a busy server saw such pauses)."""
    source = "def get_user():\n    pass\n\nget_user()\n"
    edits = NextEdits()
    edits.log.open("u", source)
    edits.log.changed("u", source.replace("get_", "fet_", 1), 2)
    half = edits.log.end("u")
    assert half is not None
    assert edits.ended(half, "python").pattern is not None
    edits.log.changed("u", source.replace("get_", "fetch_", 1), 3)
    whole = edits.log.end("u")
    assert whole is not None and (whole.removed, whole.inserted) == ("get", "fetch")
    edits.ended(whole, "python")
    assert [p.label for p in edits.patterns()] == ["rename get_user -> fetch_user"]


def test_a_closed_documents_patterns_go() -> None:
    edits = _next_edits("a = old_name\nb = old_name\n", "a = new_name\nb = old_name\n")
    assert edits.patterns()
    edits.closed("file:///a.py")
    assert edits.patterns() == [] and edits.log.held() == 0
