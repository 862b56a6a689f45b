"""kNN-LM: its distribution, its mixing, its store and its index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from ngram_db.knn_index import file_states, index_knn
from ngram_db.knn_store import (
    FAISS_MIN,
    KnnIndex,
    KnnStore,
    KnnStoreDamaged,
    Projection,
    knn_path,
)
from ngram_db.store import FileTokens, NgramStore
from superposed.api import Engine
from superposed.fast_runner import FastRunner
from superposed.knn import Neighbours, knn_probs, mix, tapped
from superposed.model import LoadedModel
from superposed.types import DecodeConfig

PROMPT = "def add(a, b):\n    return"


class Fixed:
    """A HiddenSource whose neighbours are always the same, and which counts its queries."""

    def __init__(self, tokens: list[int], distances: list[float] | None = None) -> None:
        self.found = Neighbours(
            np.asarray(distances or [0.0] * len(tokens), np.float32), np.asarray(tokens)
        )
        self.queries: list[np.ndarray] = []

    def neighbours(self, hidden: np.ndarray, k: int) -> Neighbours:
        self.queries.append(hidden)
        return self.found


# ----- the distribution and the mix ----------------------------------------------------------


def test_the_neighbours_tokens_get_all_the_mass_nearest_most() -> None:
    found = Neighbours(np.array([0.1, 0.5, 0.9], np.float32), np.array([7, 3, 7]))
    p = knn_probs(found, temperature=1.0, vocab_size=10)
    assert p.sum().item() == pytest.approx(1.0)
    assert set(torch.nonzero(p).flatten().tolist()) == {3, 7}
    w = torch.softmax(-torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64), 0)
    assert p[7].item() == pytest.approx(float(w[0] + w[2]))
    assert p[3].item() == pytest.approx(float(w[1]))


def test_a_lower_temperature_puts_the_mass_on_the_nearest() -> None:
    found = Neighbours(np.array([0.1, 0.5], np.float32), np.array([1, 2]))
    warm, cold = knn_probs(found, 10.0, 4), knn_probs(found, 0.01, 4)
    assert warm[1].item() < 0.6 < 0.999 < cold[1].item()


def test_a_token_outside_the_vocabulary_gets_nothing() -> None:
    found = Neighbours(np.array([0.0, 0.0], np.float32), np.array([2, 99]))
    assert knn_probs(found, 1.0, 4).tolist() == [0.0, 0.0, 1.0, 0.0]


def test_mix_interpolates_the_probabilities_and_is_the_logits_at_weight_zero() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.0]])
    p_knn = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    assert mix(logits, p_knn, 0.0) is logits
    mixed = mix(logits, p_knn, 0.5).exp()
    expected = 0.5 * torch.softmax(logits, -1) + 0.5 * p_knn.float()
    assert torch.allclose(mixed, expected, atol=1e-6)


# ----- in the engine -------------------------------------------------------------------------


@pytest.fixture()
def fast_engine(tiny_loaded: LoadedModel) -> Engine:
    return Engine(tiny_loaded, runner=FastRunner(tiny_loaded.model, "fp32"))


def test_weight_zero_decodes_exactly_todays_drafts(fast_engine: Engine) -> None:
    source = Fixed([42] * 4)
    fast_engine.runner.rewind(0)  # each call prefills the whole prompt
    plain = fast_engine.complete(PROMPT, cfg=DecodeConfig(max_new_tokens=6)).drafts
    fast_engine.runner.rewind(0)
    off = fast_engine.complete(PROMPT, cfg=DecodeConfig(max_new_tokens=6), knn=source).drafts
    assert [(d.token_ids, d.score) for d in off] == [(d.token_ids, d.score) for d in plain]
    assert source.queries == []  # never asked


def test_a_weighted_memory_steers_every_step_and_reads_the_heads_input(
    fast_engine: Engine,
) -> None:
    """All neighbours say token t: at weight 0.9 every draft step follows it; the query is the
    runner's hidden state (the head's input: its logits are the head of it)."""
    target = fast_engine.tokenizer(" x", add_special_tokens=False)["input_ids"][0]
    source = Fixed([target] * 4)
    cfg = DecodeConfig(max_new_tokens=5, knn_weight=0.9, alpha=0.0)
    prompt = fast_engine.prompt(PROMPT, 5, heal=False)  # healing would pick the first token
    drafts = fast_engine.complete(prompt, cfg=cfg, knn=source).drafts
    assert drafts[0].token_ids == [target] * 5
    assert len(source.queries) == 5  # the prompt's last position, then each of 4 steps
    assert source.queries[0].shape == (fast_engine.runner.embed(torch.tensor([[0]])).shape[-1],)
    runner = fast_engine.runner
    assert isinstance(runner, FastRunner) and runner.hidden_tap is None  # detached after


def test_the_tap_records_the_rows_the_head_reads(fast_engine: Engine) -> None:
    runner = fast_engine.runner
    ids = fast_engine.tokenizer(PROMPT, add_special_tokens=False)["input_ids"]
    runner.rewind(0)
    with tapped(runner) as tap:
        assert tap is not None
        logits = runner.score(torch.tensor([ids]))  # [1, T, V]
        rows = tap.rows()
    runner.rewind(0)
    assert rows is not None and rows.shape[0] == len(ids)
    head = fast_engine.loaded.model.get_output_embeddings().weight.float()  # tied: [V, H]
    assert torch.allclose(torch.from_numpy(rows) @ head.T, logits[0], atol=1e-3)


def test_the_transformers_runner_shows_its_hidden_state_too(tiny_loaded: LoadedModel) -> None:
    engine = Engine(tiny_loaded)  # HFRunner
    source = Fixed([5, 5])
    cfg = DecodeConfig(max_new_tokens=3, knn_weight=0.9, alpha=0.0)
    drafts = engine.complete(engine.prompt(PROMPT, 3, heal=False), cfg=cfg, knn=source).drafts
    assert drafts[0].token_ids == [5, 5, 5] and len(source.queries) == 3


# ----- the store -----------------------------------------------------------------------------


def _store(n: int = 50, dims: int = 8, hidden: int = 16, seed: int = 0) -> KnnStore:
    rng = np.random.default_rng(seed)
    states = rng.normal(size=(n, hidden)).astype(np.float32)
    projection = Projection.fit(states, dims)
    store = KnnStore.empty(
        {"model": "m", "tokenizer": "t", "keep": "all", "hidden": hidden}, projection
    )
    half = n // 2
    store = store.with_file(
        "/a.py",
        "sha-a",
        projection.reduce(states[:half]),
        np.arange(half),
        np.arange(half) % 2 == 0,
    )
    return store.with_file(
        "/b.py",
        "sha-b",
        projection.reduce(states[half:]),
        np.arange(half, n),
        np.zeros(n - half, bool),
    )


def test_the_projection_keeps_the_main_axes_at_unit_mean_norm() -> None:
    rng = np.random.default_rng(0)
    axis = rng.normal(size=32)
    states = np.outer(rng.normal(size=500), axis) * 10 + rng.normal(size=(500, 32)) * 0.1
    projection = Projection.fit(states.astype(np.float32), 4)
    keys = projection.reduce(states)
    assert keys.shape == (500, 4)
    assert np.mean((keys**2).sum(1)) == pytest.approx(1.0, rel=1e-3)
    assert abs(np.dot(projection.components[0], axis / np.linalg.norm(axis))) > 0.999
    assert np.var(keys[:, 0]) > 100 * np.var(keys[:, 1])  # the first axis holds the variance


def test_the_store_round_trips_through_its_file(tmp_path: Path) -> None:
    store = _store()
    path = tmp_path / "s.db.knn.npz"
    store.save(path)
    back = KnnStore.load(path)
    assert back.files == store.files and back.header["model"] == "m"
    assert np.array_equal(back.keys, store.keys) and back.keys.dtype == np.float16
    assert np.array_equal(back.tokens, store.tokens) and np.array_equal(back.owner, store.owner)
    assert np.array_equal(back.projection.components, store.projection.components)
    assert list(tmp_path.iterdir()) == [path]  # no temporary left beside it


def test_a_damaged_file_is_refused_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "s.db.knn.npz"
    _store().save(path)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(KnnStoreDamaged, match="index-repo --knn"):
        KnnStore.load(path)


def test_replacing_a_files_entries_leaves_the_others(tmp_path: Path) -> None:
    store = _store()
    keys = np.zeros((3, store.projection.dims), np.float32)
    replaced = store.with_file("/a.py", "sha-a2", keys, np.array([9, 9, 9]), np.ones(3, bool))
    assert replaced.shas() == {"/b.py": "sha-b", "/a.py": "sha-a2"}
    assert len(replaced) == 25 + 3
    a = replaced.owner == [p for p, _ in replaced.files].index("/a.py")
    assert replaced.tokens[a].tolist() == [9, 9, 9]
    assert sorted(replaced.tokens[~a].tolist()) == list(range(25, 50))


def test_a_file_forgotten_or_changed_in_the_sqlite_store_lends_nothing() -> None:
    store = _store()
    assert store.restricted_to({"/a.py": "sha-a", "/b.py": "sha-b"}) is store
    only_b = store.restricted_to({"/a.py": "changed", "/b.py": "sha-b"})
    assert only_b.shas() == {"/b.py": "sha-b"}
    assert sorted(only_b.tokens.tolist()) == list(range(25, 50))


@pytest.mark.parametrize("n", [60, FAISS_MIN + 10])
def test_the_index_finds_the_nearest_keys_with_numpy_or_faiss(n: int) -> None:
    rng = np.random.default_rng(1)
    states = rng.normal(size=(n, 16)).astype(np.float32)
    projection = Projection.fit(states, 16)  # all axes: nearest in keys is nearest in states
    store = KnnStore.empty({"hidden": 16}, projection).with_file(
        "/a.py", "s", projection.reduce(states), np.arange(n), np.zeros(n, bool)
    )
    index = KnnIndex(store)
    assert (index._faiss is not None) == (n >= FAISS_MIN)
    found = index.neighbours(states[17] + 1e-4, 3)
    assert found is not None and found.tokens[0] == 17
    keys = store.keys.astype(np.float32)
    exact = np.argsort(((keys - projection.reduce(states[17:18] + 1e-4)) ** 2).sum(1))[:3]
    assert found.tokens.tolist() == exact.tolist()
    assert list(found.distances) == sorted(found.distances)


# ----- indexing ------------------------------------------------------------------------------


def test_windows_cover_every_position_once(fast_engine: Engine, monkeypatch: Any) -> None:
    """A file longer than a window: states of every position with a next token, equal to one
    forward over the whole file where the window's context covers what attention reads."""
    import ngram_db.knn_index as knn_index

    ids = np.asarray(fast_engine.tokenizer(PROMPT * 8, add_special_tokens=False)["input_ids"])
    whole, top, _ = file_states(fast_engine.runner, ids)
    monkeypatch.setattr(knn_index, "WINDOW", 24)
    monkeypatch.setattr(knn_index, "CONTEXT", 8)
    windowed, top_w, read = file_states(fast_engine.runner, ids)
    assert whole.shape == windowed.shape == (len(ids) - 1, whole.shape[1])
    assert read > len(ids)  # the repeated context
    assert np.allclose(whole[:24], windowed[:24], atol=1e-4)  # the first window is the same
    assert top.shape == top_w.shape == (len(ids) - 1,)


def test_index_knn_keeps_all_or_only_the_wrong_and_refreshes_changed_files(
    fast_engine: Engine, tmp_path: Path
) -> None:
    tok = fast_engine.tokenizer
    with NgramStore.open(tmp_path / "s.db", tok) as store:
        texts = {"/r/a.py": PROMPT + " a + b\n", "/r/b.py": "import os\nprint(os.sep)\n"}
        store.write(
            [FileTokens(p, p + "1", np.asarray(tok(t)["input_ids"])) for p, t in texts.items()]
        )
        every = index_knn(store, fast_engine.runner, "tiny", keep="all", dims=8)
        held = KnnStore.load(knn_path(tmp_path / "s.db"))
        assert (
            every.positions
            == len(held)
            == sum(len(tok(t)["input_ids"]) - 1 for t in texts.values())
        )
        assert held.projection.dims == 8 and held.header["keep"] == "all"
        again = index_knn(store, fast_engine.runner, "tiny", keep="all", dims=8)
        assert again.ran == 0 and again.positions == every.positions  # nothing changed
        store.write([FileTokens("/r/b.py", "b2", np.asarray(tok("x = 1\n")["input_ids"]))])
        changed = index_knn(store, fast_engine.runner, "tiny", keep="all", dims=8)
        assert changed.ran == 1
        assert KnnStore.load(knn_path(tmp_path / "s.db")).shas() == {
            "/r/a.py": "/r/a.py1",
            "/r/b.py": "b2",
        }
        wrong = index_knn(store, fast_engine.runner, "tiny", keep="wrong", dims=8)
        assert (
            wrong.ran == 2 and 0 < wrong.positions < every.positions
        )  # a random model is right sometimes


def test_only_wrong_keeps_the_positions_the_model_missed(tmp_path: Path) -> None:
    store = _store()  # /a.py: hits at even tokens 0..24; /b.py: no hits
    wrong = store.only_wrong()
    assert wrong.header["keep"] == "wrong" and not wrong.hits.any()
    assert sorted(wrong.tokens.tolist()) == [t for t in range(50) if t >= 25 or t % 2]
    wrong.save(tmp_path / "w.npz")
    assert KnnStore.load(tmp_path / "w.npz").shas() == store.shas()
