"""sharedWeight: a shared index's match weighs its own share in the memory's mix
(lsp_server/stores/shared_indexes.py sets ``Match.weight``; superposed.memory.weight multiplies it
in)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from lsp_server.settings import parse_settings
from lsp_server.stores.match_indexes import MatchIndexes
from lsp_server.stores.shared_indexes import _Budgeted
from lsp_server.stores.stores import Stores
from ngram_db.store import NgramStore
from ngram_db.tokenizer import ByteTokenizer
from superposed import memory
from superposed.ngram import Match
from superposed.types import DecodeConfig

BYTES = ByteTokenizer()
CODE = "def connect(cluster):\n    return OrgClient(cluster)\n"
CONTEXT = "def connect(cluster):\n    return Org"


def _ids(text: str) -> list[int]:
    return BYTES.encode_batch([text])[0].tolist()


@pytest.fixture(scope="module")
def index(org_index: Callable[[str], Path]) -> Path:
    return org_index(CODE)


def _stores(index: Path, weight: float) -> Stores:
    settings, errors = parse_settings(
        {"sharedIndexes": [str(index)], "sharedWeight": weight, "userStore": False}
    )
    assert errors == []
    return Stores(BYTES, settings.stores)


def _request(stores: list[NgramStore], shared: list, text: str = "x = 1\n"):  # type: ignore[no-untyped-def]
    uri = "file:///w/app.py"
    return MatchIndexes(BYTES).source_later(uri, len(text), {uri: text}).with_stores(stores, shared)


def _half(from_store: Match | None, from_shared: Match | None) -> None:
    """``from_shared`` (weight 0.5) gets half the lambda of the same ``from_store`` match,
    and the mix moves the model's probability half as far."""
    assert from_store is not None and from_shared is not None
    assert from_shared.length == from_store.length and from_shared.next_counts
    assert bytes(from_shared.continuation) == b"Client"
    cfg = DecodeConfig()
    assert memory.weight(from_store, cfg) > 0
    assert memory.weight(from_shared, cfg) == pytest.approx(0.5 * memory.weight(from_store, cfg))
    # p = (1 - lambda) p_model + lambda p_match
    scores = torch.log(torch.tensor([[0.5, 0.5]]))
    candidates = torch.tensor([[ord("C"), ord("x")]])
    p_store = memory.mix(scores, candidates, [from_store], cfg).exp()[0, 0]
    p_shared = memory.mix(scores, candidates, [from_shared], cfg).exp()[0, 0]
    assert p_shared - 0.5 == pytest.approx(0.5 * (p_store - 0.5))


def _store() -> NgramStore:
    store = NgramStore.open(":memory:", BYTES)
    store.update_file("/client.py", CODE)
    return store


def test_a_shared_match_at_half_weight_gets_half_the_lambda_of_the_same_store_match() -> None:
    """The request's shared source (a suffix index of the same code in place of infini-gram's
    engine, so no indexer process runs) against the store."""
    from_store = _request([_store()], []).match(_ids(CONTEXT), follow=6)
    org = MatchIndexes(BYTES).stores.store_index(_store())
    assert org is not None
    shared = [_Budgeted([org], 1.0, lambda: 0.0, weight=0.5)]
    _half(from_store, _request([], shared).match(_ids(CONTEXT), follow=6))


@pytest.mark.slow  # builds an index with infini-gram's indexer, a process
def test_the_setting_weighs_an_infini_gram_index_match(index: Path) -> None:
    from_store = _request([_store()], []).match(_ids(CONTEXT), follow=6)
    _half(from_store, _request([], _stores(index, 0.5).shared()).match(_ids(CONTEXT), follow=6))


@pytest.mark.slow  # the index: infini-gram's indexer
def test_the_default_weighs_a_shared_match_as_a_store_match(index: Path) -> None:
    settings, _ = parse_settings({})
    assert settings.stores.shared_weight == 1.0
    found = _request([], _stores(index, 1.0).shared()).match(_ids(CONTEXT), follow=6)
    assert found is not None and found.weight == 1.0


@pytest.mark.slow  # the index: infini-gram's indexer
def test_weight_zero_leaves_the_shared_indexes_unasked(index: Path) -> None:
    stores = _stores(index, 0.0)
    assert stores.shared() == []
    assert _request([], stores.shared()).match(_ids(CONTEXT), follow=6) is None
    assert len(_stores(index, 0.25).shared()) == 1


def test_a_zero_weight_match_neither_mixes_nor_proposes() -> None:
    cfg = DecodeConfig()
    found = Match(12, {ord("C"): 3}, [ord("C")], [], weight=0.0)
    scores = torch.log(torch.tensor([[0.5, 0.5]]))
    candidates = torch.tensor([[ord("a"), ord("b")]])
    assert memory.weight(found, cfg) == 0.0
    assert torch.equal(memory.mix(scores, candidates, [found], cfg), scores)
    assert memory.proposals([found], candidates, cfg) is None


@pytest.mark.slow  # the index: infini-gram's indexer
def test_a_store_as_long_as_the_shared_match_gives_full_weight(index: Path) -> None:
    """Equal lengths add counts (MatchSet): the user's own code backs that length."""
    store = NgramStore.open(":memory:", BYTES)
    store.update_file("/client.py", CODE)
    both = _request([store], _stores(index, 0.5).shared()).match(_ids(CONTEXT), follow=6)
    alone = _request([store], []).match(_ids(CONTEXT), follow=6)
    assert both is not None and alone is not None and both.length == alone.length
    assert both.weight == 1.0 and sum(both.next_counts.values()) > sum(alone.next_counts.values())


def test_the_budgeted_source_weighs_what_it_finds() -> None:
    class Index:
        def match(self, context, follow=32, others=0):  # type: ignore[no-untyped-def]
            return Match(4, {7: 1}, [7], [])

    found = _Budgeted([Index()], 1.0, lambda: 0.0, weight=0.25).match([1, 2, 3, 4])
    assert found is not None and found.weight == 0.25 and found.next_counts == {7: 1}


def test_the_setting_parses_and_a_bad_value_keeps_the_default() -> None:
    settings, errors = parse_settings({"sharedWeight": 0.5})
    assert settings.stores.shared_weight == 0.5 and errors == []
    for bad in (-0.1, 1.5, "half", True):
        settings, errors = parse_settings({"sharedWeight": bad})
        assert settings.stores.shared_weight == 1.0
        assert len(errors) == 1 and "sharedWeight" in errors[0] and "number" in errors[0]
