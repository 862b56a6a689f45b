"""A request's shared-index lookups within sharedBudgetMs (lsp_server/stores/shared_indexes.py).

The clock is injected: a fake index "takes" a set time per lookup, so the budget is tested
without timing anything real.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from lsp_server.settings import parse_settings
from lsp_server.stores.match_indexes import MatchIndexes
from lsp_server.stores.shared_indexes import SharedIndexes, _Budgeted
from lsp_server.stores.stores import Stores
from ngram_db.store import NgramStore
from ngram_db.tokenizer import ByteTokenizer
from superposed.ngram import Match

BYTES = ByteTokenizer()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SlowIndex:
    """A shared index whose every lookup advances the clock by ``cost`` seconds."""

    def __init__(self, clock: Clock, cost: float) -> None:
        self.clock, self.cost = clock, cost
        self.asked: list[tuple[int, ...]] = []

    def __len__(self) -> int:
        return 1000

    def match(self, context: Sequence[int], follow: int = 32, others: int = 0) -> Match | None:
        self.asked.append(tuple(context))
        self.clock.now += self.cost
        return Match(3, {7: 2}, [7, 8, 9][:follow], [])


def _ids(text: str) -> list[int]:
    return BYTES.encode_batch([text])[0].tolist()


def test_the_shared_index_is_not_asked_once_the_budget_is_spent() -> None:
    clock = Clock()
    slow = SlowIndex(clock, cost=0.020)
    budgeted = _Budgeted([slow], budget_s=0.050, clock=clock)
    answers = [budgeted.match([1, 2, n]) for n in range(6)]
    # before each lookup 0, 20, 40 ms were spent: three ran; at 60 ms the budget is spent
    assert len(slow.asked) == 3
    assert [a is not None for a in answers] == [True, True, True, False, False, False]
    assert (budgeted.lookups, budgeted.skipped) == (3, 3)


def test_the_stores_and_documents_still_match_after_the_budget() -> None:
    clock = Clock()
    slow = SlowIndex(clock, cost=1.0)
    budgeted = _Budgeted([slow], budget_s=0.5, clock=clock)
    budgeted.match([1])  # spends the budget
    store = NgramStore.open(":memory:", BYTES)
    store.update_file("/a.py", "alpha = compute_first_value(1)\n")
    text = "x = 1\nresult = frobnicate_widgets(3)\nresult = frob"
    uri = "file:///w/app.py"
    pending = MatchIndexes(BYTES).source_later(uri, len(text), {uri: text})
    source = pending.with_stores([store], [budgeted])
    in_store = source.match(_ids("alpha = compute_fi"), follow=4)
    assert in_store is not None and bytes(in_store.continuation) == b"rst_"
    in_document = source.match(_ids("result = frobnic"), follow=4)
    assert in_document is not None and bytes(in_document.continuation) == b"ate_"
    assert len(slow.asked) == 1  # the shared index was not asked again


def test_the_setting_parses_and_a_bad_value_keeps_the_default() -> None:
    default = parse_settings({})[0].stores.shared_budget_ms
    settings, errors = parse_settings({"sharedBudgetMs": 20})
    assert settings.stores.shared_budget_ms == 20 and errors == []
    for bad in (0, "fast", 2.5, True, 100_000):
        settings, errors = parse_settings({"sharedBudgetMs": bad})
        assert settings.stores.shared_budget_ms == default
        assert len(errors) == 1 and "sharedBudgetMs" in errors[0] and "whole number" in errors[0]


@pytest.fixture(scope="module")
def index(org_index: Callable[[str], Path]) -> Path:
    return org_index("def connect(cluster):\n    return OrgClient(cluster)\n")


def test_each_request_gets_its_own_budget_from_the_setting(index: Path) -> None:
    settings, _ = parse_settings(
        {"sharedIndexes": [str(index)], "sharedBudgetMs": 20, "userStore": False}
    )
    stores = Stores(BYTES, settings.stores)
    first, second = stores.shared(), stores.shared()
    assert len(first) == 1 and isinstance(first[0], _Budgeted)
    assert first[0].budget_s == pytest.approx(0.020)
    assert first[0] is not second[0]  # a request's spent time is not the next one's
    found = first[0].match(_ids("def connect(cluster):\n    return Org"), follow=6)
    assert found is not None and bytes(found.continuation) == b"Client"
    assert SharedIndexes().for_request([], BYTES.fingerprint, 50) == []
