"""Same-language proposals: the memory matches in files of the document's language first, and
never across the code/prose line (issue 22)."""

from __future__ import annotations

from typing import Any

from lsp_server.stores.match_indexes import MatchIndexes
from ngram_db import NgramStore
from ngram_db.languages import codes, language_of, tiers

GUIDE = (
    "Fork the repository on GitHub and clone your fork locally:\n"
    "see the-world-is-a-local-clone-of-your-fork for the details\n"
)
CODE = "def clone_fork(path):\n    return path\n"


def test_a_file_language_comes_from_its_name() -> None:
    assert language_of("/repo/src/app.py") == "python"
    assert language_of("file:///repo/docs/contributing.rst") == "restructuredtext"
    assert language_of("file:///repo/My%20Notes.MD") == "markdown"
    assert language_of("/repo/LICENSE") == "text"
    assert language_of("accepted:00000000000000000001-abcd1234") is None
    assert language_of("untitled:Untitled-1") is None


def test_tiers_keep_the_language_first_and_the_kind_apart() -> None:
    streams = codes(["/a.py", "/b.js", "/c.rst", "accepted:1", "/d.json"])
    cut = tiers(streams, "python")
    assert cut is not None
    own, near = cut
    assert own.tolist() == [True, False, False, True, False]  # python, and the unknown draft
    assert near.tolist() == [False, True, False, False, False]  # other code, only
    prose = tiers(streams, "markdown")
    assert prose is not None and prose[1].tolist() == [False, False, True, False, False]
    assert tiers(streams, None) is None  # a document of unknown language: no filter


def _ids(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


def test_a_prose_file_continuation_is_never_proposed_into_a_python_document(
    tokenizer: Any,
) -> None:
    """The guide's line continues the context; a .py document never gets it (the store's
    Python file is matched instead), a .rst document does."""
    store = NgramStore.open(":memory:", tokenizer)
    store.update_file("/repo/docs/contributing.rst", GUIDE)
    store.update_file("/repo/src/fork.py", CODE)
    context = _ids(tokenizer, "Fork the repository on GitHub and clone your fork locally:\nsee")
    leak = _ids(tokenizer, " the-world-is")[:2]

    def proposed(uri: str, documents: dict[str, str], store: NgramStore) -> list[int]:
        indexes = MatchIndexes(tokenizer)
        found = indexes.source(uri, 0, {uri: "", **documents}, [store]).match(context)
        return [] if found is None else found.continuation

    rst = proposed("file:///repo/docs/other.rst", {}, store)
    assert rst[:2] == leak  # prose continues prose
    py = proposed("file:///repo/src/app.py", {}, store)
    assert py[:2] != leak
    # nor from a prose document open in the editor (no store this time)
    opened = {"file:///repo/docs/open.md": GUIDE}
    empty = NgramStore.open(":memory:", tokenizer)
    assert proposed("file:///repo/src/app.py", opened, empty)[:2] != leak
    assert proposed("file:///repo/docs/b.md", opened, empty)[:2] == leak
