"""The sharedIndexes setting: infini-gram indexes as more memory sources
(lsp_server/stores/shared_indexes.py).

A request's memory matches text only a shared index holds; a missing, mismatched or failing
index is reported once and left out, never raising into a request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from lsp_server.settings import parse_settings
from lsp_server.stores.match_indexes import MatchIndexes
from lsp_server.stores.shared_indexes import SharedIndexes, _FailSafeIndex
from lsp_server.stores.stores import Stores
from ngram_db.infini_source import InfiniSource
from ngram_db.tokenizer import ByteTokenizer
from superposed.ngram import Match

BYTES = ByteTokenizer()
ORG = "def connect(cluster):\n    return OrgClient(cluster, region='eu-west-4')\n"


@pytest.fixture(scope="module")
def index(org_index: Callable[[str], Path]) -> Path:
    return org_index(ORG)


def _ids(text: str) -> list[int]:
    return BYTES.encode_batch([text])[0].tolist()


def test_the_setting_takes_a_list_of_folders() -> None:
    settings, errors = parse_settings({"sharedIndexes": ["/mnt/a", "/mnt/b", "/mnt/a"]})
    assert settings.stores.shared_indexes == ("/mnt/a", "/mnt/b") and errors == []
    settings, errors = parse_settings({"sharedIndexes": "/mnt/a"})
    assert settings.stores.shared_indexes == () and "sharedIndexes" in errors[0]


def test_bad_indexes_are_reported_once_and_left_out(index: Path, tmp_path: Path) -> None:
    said: list[str] = []
    shared = SharedIndexes(said.append)
    folders = [str(index), str(tmp_path / "missing")]
    for _ in range(3):  # a request each: opened and reported once
        sources = shared.sources(folders, BYTES.fingerprint)
        assert len(sources) == 1
    assert len(said) == 1 and "does not exist" in said[0]
    assert shared.sources([str(index)], ByteTokenizer(offset=1).fingerprint) == []
    assert len(said) == 2 and "another tokenizer" in said[1]


def test_a_failing_index_answers_nothing_and_is_reported_once(index: Path) -> None:
    class Broken(InfiniSource):
        def match(self, context: Sequence[int], follow: int = 32, others: int = 0) -> Match:
            raise RuntimeError("mapped file truncated")

    said: list[str] = []
    guarded = _FailSafeIndex(Broken([str(index)], BYTES.fingerprint), str(index), said.append)
    assert guarded.match(_ids("def connect(")) is None
    assert guarded.match(_ids("def connect(")) is None
    assert len(said) == 1 and "truncated" in said[0]


def test_a_request_matches_what_only_the_shared_index_holds(index: Path) -> None:
    memory = MatchIndexes(BYTES)
    context = "x = 2\ndef connect(cluster):\n    return Org"
    documents = {"file:///w/app.py": context}
    shared = SharedIndexes().sources([str(index)], BYTES.fingerprint)
    pending = memory.source_later("file:///w/app.py", len(context), documents)
    found = pending.with_stores([], shared).match(_ids(context), follow=6)
    assert found is not None and bytes(found.continuation) == b"Client"
    assert found.length == len("def connect(cluster):\n    return Org")  # the file starts it
    pending = memory.source_later("file:///w/app.py", len(context), documents)
    alone = pending.with_stores([]).match(_ids(context), follow=6)
    assert alone is None or alone.length < found.length


def test_the_stores_give_the_settings_indexes(index: Path) -> None:
    settings, _ = parse_settings({"sharedIndexes": [str(index)], "userStore": False})
    stores = Stores(BYTES, settings.stores)
    assert [len(s) for s in stores.shared()] == [len(ORG)]  # type: ignore[arg-type]
    stores.configure(parse_settings({"userStore": False})[0].stores)
    assert stores.shared() == []
