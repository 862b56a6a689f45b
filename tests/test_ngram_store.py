"""The SQLite n-gram store: counting, interpolation, exact updates, opening checks."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ngram_db import (
    ByteTokenizer,
    CombinedSource,
    NgramStore,
    NotAStore,
    OrdersMismatch,
    TokenizerMismatch,
    codebase_db_path,
    user_db_path,
)
from ngram_db import cli as index_repo_cli
from ngram_db import keys as K
from ngram_db.errors import BadOrders, advised
from ngram_db.store import content_hash, parse_orders
from ngram_db.tokenizer import clean_text
from superposed.ngram import InMemoryNgramSource, count_ngrams

BYTES = ByteTokenizer()


def ids(text: str) -> list[int]:
    return BYTES.encode_batch([text])[0].tolist()


def reference_counts(texts: list[str], orders: tuple[int, ...]) -> dict[int, tuple[int, int]]:
    """key -> (n-gram count, context count) from the engine's slow reference counter."""
    grams, contexts = count_ngrams([ids(t) for t in texts], orders)
    out: dict[int, list[int]] = {}
    for gram, n in grams.items():
        out.setdefault(K.tuple_key(gram), [0, 0])[0] += n
    for ctx, n in contexts.items():
        out.setdefault(K.tuple_key(ctx), [0, 0])[1] += n
    return {k: (g, c) for k, (g, c) in out.items()}


def store_counts(store: NgramStore) -> dict[int, tuple[int, int]]:
    counts = store.all_counts()
    return {
        k: (g, c)
        for k, g, c in zip(counts.keys.tolist(), counts.g.tolist(), counts.c.tolist(), strict=True)
    }


@pytest.fixture()
def store() -> NgramStore:
    return NgramStore.open(":memory:", BYTES)


# ----- counting and lookup ---------------------------------------------------------------


def test_interpolation_matches_hand_computed_values() -> None:
    s = NgramStore.open(":memory:", BYTES, orders=(2, 3), lambdas={2: 0.25, 3: 0.75})
    s.update_files([("a", "abc"), ("b", "abd"), ("c", "abc")])
    c, d, z = ord("c"), ord("d"), ord("z")
    candidates = np.array([[c, d, z], [c, d, z], [c, d, z], [c, d, z]])
    contexts = [ids("xab"), ids("b"), ids("zzz"), []]
    result = s.probabilities(contexts, candidates)
    # "xab": order 2 (ctx "b": 3 times, "bc" 2, "bd" 1), order 3 (ctx "ab": 3, "abc" 2, "abd" 1)
    assert result.probs[0] == pytest.approx([0.25 * 2 / 3 + 0.75 * 2 / 3, 1 / 3, 0.0])
    # "b" is too short for order 3: only order 2 contributes
    assert result.probs[1] == pytest.approx([0.25 * 2 / 3, 0.25 * 1 / 3, 0.0])
    # unseen and empty contexts contribute nothing and report no support
    assert result.probs[2:].tolist() == [[0, 0, 0], [0, 0, 0]]
    assert result.supported.tolist() == [True, True, False, False]


def test_raw_counts_of_the_batched_lookup(store: NgramStore) -> None:
    store.update_file("f", "abcabcabd")
    next_counts, context_counts = store.counts([ids("xxxxxab")], np.array([[ord("c"), ord("d")]]))
    # orders 2..6: contexts "b", "ab", "xab", "xxab", "xxxab"; only the first two were seen
    assert context_counts.tolist() == [[3, 3, 0, 0, 0]]
    assert next_counts[0].tolist() == [[2, 1], [2, 1], [0, 0], [0, 0], [0, 0]]


@settings(max_examples=40, deadline=None)
@given(
    texts=st.lists(st.text(alphabet="ab c\n", max_size=40), max_size=6),
    contexts=st.lists(st.text(alphabet="ab c\n", max_size=8), min_size=1, max_size=4),
    candidates=st.lists(st.sampled_from("ab c\nz"), min_size=1, max_size=5),
)
def test_lookup_equals_the_in_memory_reference(
    texts: list[str], contexts: list[str], candidates: list[str]
) -> None:
    s = NgramStore.open(":memory:", BYTES)
    s.update_files([(f"f{i}", t) for i, t in enumerate(texts)])
    reference = InMemoryNgramSource.from_sequences([ids(t) for t in texts])
    cand = np.array([[ord(x) for x in candidates]] * len(contexts))
    got = s.probabilities([ids(c) for c in contexts], cand)
    want = reference.probabilities([ids(c) for c in contexts], cand)
    np.testing.assert_allclose(got.probs, want.probs)
    assert got.supported.tolist() == want.supported.tolist()


@settings(max_examples=40, deadline=None)
@given(
    seqs=st.lists(st.lists(st.integers(0, 6), max_size=30), max_size=8),
    orders=st.sets(st.integers(2, 7), min_size=1, max_size=4),
)
def test_vectorised_counting_equals_the_reference_counter(
    seqs: list[list[int]], orders: set[int]
) -> None:
    ordered = tuple(sorted(orders))
    counts = K.count_sequences([np.array(s, dtype=np.int64) for s in seqs], ordered)
    grams, contexts = count_ngrams(seqs, ordered)
    expected: dict[int, list[int]] = {}
    for gram, n in grams.items():
        expected.setdefault(K.tuple_key(gram), [0, 0])[0] += n
    for ctx, n in contexts.items():
        expected.setdefault(K.tuple_key(ctx), [0, 0])[1] += n
    rows = zip(counts.keys.tolist(), counts.g.tolist(), counts.c.tolist(), strict=True)
    got = {k: [g, c] for k, g, c in rows}
    assert got == expected
    assert (np.diff(counts.keys) > 0).all()


def test_keys_carry_the_tuple_length() -> None:
    for n in (1, 2, 6, 15):
        low, high = K.key_range(n)
        assert low <= K.tuple_key(list(range(n))) < high
    assert K.tuple_key([1, 2]) != K.tuple_key([2, 1])
    seq = np.array([5, 1, 49151, 7, 0])
    assert K.window_keys(seq, 3).tolist() == [K.tuple_key(seq[i : i + 3]) for i in range(3)]
    assert len(K.window_keys(seq, 6)) == 0


def test_importing_ngram_db_loads_neither_torch_nor_transformers(
    heavy_imports: Callable[..., list[str]],
) -> None:
    assert heavy_imports("ngram_db", "ngram_db.cli") == []


# ----- exact updates ---------------------------------------------------------------------

_PATHS = ["a.py", "b.py", "dir/c.py", "odd name é.txt"]
_op = st.one_of(
    st.tuples(st.just("update"), st.sampled_from(_PATHS), st.text(alphabet="ab\n é", max_size=30)),
    st.tuples(st.just("remove"), st.sampled_from(_PATHS), st.just("")),
    st.tuples(st.just("rename"), st.sampled_from(_PATHS), st.sampled_from(_PATHS)),
)


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(_op, max_size=12))
def test_counts_after_any_updates_equal_a_fresh_index(ops: list[tuple[str, str, str]]) -> None:
    s = NgramStore.open(":memory:", BYTES)
    files: dict[str, str] = {}  # what the files are now
    for op, path, arg in ops:
        if op == "update":
            s.update_file(path, arg)
            files[path] = arg
        elif op == "remove":
            assert s.remove_file(path) == (path in files)
            files.pop(path, None)
        else:
            assert s.rename_file(path, arg) == (path in files)
            if path in files:
                files[arg] = files.pop(path)
    fresh = NgramStore.open(":memory:", BYTES)
    fresh.update_files(list(files.items()))
    expected = reference_counts(list(files.values()), s.orders)
    assert store_counts(s) == store_counts(fresh) == expected
    assert s.file_hashes() == fresh.file_hashes()
    assert s.is_consistent()


def test_unchanged_content_writes_nothing(store: NgramStore) -> None:
    assert store.update_file("a", "hello") is True
    assert store.update_file("a", "hello") is False
    assert store.stats()["tokens"] == 5


def test_removing_everything_leaves_no_rows(store: NgramStore) -> None:
    store.update_files([("a", "abcabc"), ("b", "xyz")])
    store.remove_file("a")
    store.remove_file("b")
    assert len(store.all_counts()) == 0
    assert store.remove_file("b") is False


def test_awkward_inputs_are_handled(store: NgramStore) -> None:
    huge_line = "x = [" + ", ".join(str(i) for i in range(20_000)) + "]"
    store.update_files(
        [
            ("empty.py", ""),
            ("surrogates.py", "bad \udcff bytes \ud800"),  # what undecodable input becomes
            ("huge.py", huge_line),
            ("\udcffbad-name\n.py", "x"),  # a file name that was not UTF-8
            ("spaces and ünïcode/ü.py", "y = 1"),
        ]
    )
    stats = store.stats()
    assert stats["files"] == 5
    assert stats["tokens"] == len(huge_line) + 1 + 5 + len("bad \ufffd bytes \ufffd".encode())
    assert store.remove_file("\udcffbad-name\n.py") is True
    assert store.is_consistent()


def test_lone_surrogates_read_as_index_repo_reads_the_bad_bytes(store: NgramStore) -> None:
    # The server's and the store's one clean_text: an editor's text with a lone surrogate
    # (here, a bad byte escaped) is learned as index-repo reads that file (errors="replace").
    raw = b"name = '\xff'  # caf\xc3\xa9\n"
    from_editor = raw.decode("utf-8", errors="surrogateescape")
    from_disk = raw.decode("utf-8", errors="replace")  # files.read_text
    assert clean_text(from_editor) == from_disk == "name = '\ufffd'  # café\n"
    assert content_hash(from_editor) == content_hash(from_disk)
    store.update_file("a.py", from_editor)
    assert store.update_file("a.py", from_disk) is False  # the same content: nothing to do
    assert clean_text("café") == "café"


def test_stats_count_distinct_ngrams_per_order(store: NgramStore) -> None:
    store.update_file("a", "abab")  # 2-grams ab, ba; 3-grams aba, bab; 4-gram abab
    stats = store.stats()
    assert stats["ngrams"] == {2: 2, 3: 2, 4: 1, 5: 0, 6: 0}
    assert stats["contexts"] == {2: 2, 3: 2, 4: 1, 5: 0, 6: 0}  # "a", "b"; "ab", "ba"; "aba"
    assert stats["files"] == 1 and stats["tokens"] == 4


# ----- combining stores ------------------------------------------------------------------


def test_combined_source_is_the_weighted_sum() -> None:
    codebase = NgramStore.open(":memory:", BYTES)
    user = NgramStore.open(":memory:", BYTES)
    codebase.update_file("a", "abc")
    user.update_file("b", "abd")
    combined = CombinedSource(codebase, user, user_weight=0.25)
    cand = np.array([[ord("c"), ord("d")]])
    got = combined.probabilities([ids("ab")], cand)
    a = codebase.probabilities([ids("ab")], cand).probs
    b = user.probabilities([ids("ab")], cand).probs
    np.testing.assert_allclose(got.probs, 0.75 * a + 0.25 * b)
    assert got.probs[0, 0] > 0 and got.probs[0, 1] > 0
    with pytest.raises(ValueError):
        CombinedSource(codebase, user, user_weight=1.5)


def test_source_uses_other_lambdas(store: NgramStore) -> None:
    store.update_file("a", "abc")
    only_bigrams = store.source({2: 1.0})
    got = only_bigrams.probabilities([ids("ab")], np.array([[ord("c")]]))
    assert got.probs.tolist() == [[1.0]]


# ----- opening checks --------------------------------------------------------------------


def test_a_file_store_persists_and_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "store.sqlite"
    with NgramStore.open(path, BYTES, orders="2-4") as s:
        s.update_file("a", "abc")
        assert s.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert s.conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0
    with NgramStore.open(path, BYTES) as s:
        assert s.orders == (2, 3, 4)
        assert s.stats()["tokens"] == 3


@pytest.mark.parametrize(
    "content",
    [b"this is not a database at all" * 10, b"SQLite format 3\x00" + b"\x07" * 4000],
    ids=["text", "bad-pages"],
)
def test_corrupt_file_is_a_clear_error_and_left_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "store.sqlite"
    path.write_bytes(content)
    with pytest.raises(NotAStore) as err:
        NgramStore.open(path, BYTES)
    assert str(path) in str(err.value) and "left untouched" in str(err.value)
    # The library states facts; each front end says what to do with its own flags/settings.
    assert "--rebuild" not in str(err.value) and "--db" not in str(err.value)
    assert "run index-repo with --rebuild" in advised(err.value, index_repo_cli.ADVICE)
    assert path.read_bytes() == content
    with NgramStore.open(path, BYTES, rebuild=True) as s:  # the explicit way out
        assert s.stats()["files"] == 0


def test_another_sqlite_database_is_not_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (x)")
    before = path.read_bytes()
    with pytest.raises(NotAStore, match="not an n-gram store"):
        NgramStore.open(path, BYTES)
    assert path.read_bytes() == before


def test_tokenizer_mismatch_names_both_fingerprints(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    NgramStore.open(path, BYTES).close()
    other = ByteTokenizer(offset=1)
    with pytest.raises(TokenizerMismatch) as err:
        NgramStore.open(path, other)
    assert BYTES.fingerprint in str(err.value) and other.fingerprint in str(err.value)
    assert "--rebuild" in advised(err.value, index_repo_cli.ADVICE)


def test_orders_mismatch_and_bad_orders(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    NgramStore.open(path, BYTES, orders=(2, 3)).close()
    with pytest.raises(OrdersMismatch, match="2,3"):
        NgramStore.open(path, BYTES, orders=(2, 3, 4))
    assert parse_orders("2-4,6") == (2, 3, 4, 6)
    for bad in ("1-3", "x", "2-99"):
        with pytest.raises(BadOrders):
            parse_orders(bad)


def test_store_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPERPOSED_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SUPERPOSED_DATA_DIR", str(tmp_path / "data"))
    a = codebase_db_path(tmp_path / "proj")
    assert a.parent == tmp_path / "cache" / "ngrams" and a.name.startswith("proj-")
    assert codebase_db_path(tmp_path / "other" / "proj") != a  # same name, other root
    assert codebase_db_path(tmp_path / "proj" / ".." / "proj") == a
    assert user_db_path() == tmp_path / "data" / "ngrams" / "user.sqlite"


def test_lookups_do_not_wait_for_a_write_in_progress(tmp_path: Path) -> None:
    store = NgramStore.open(tmp_path / "store.sqlite", BYTES)
    store.update_file("a", "abc")
    results = []
    with store._transaction():  # what index_repo holds while it writes a chunk
        store._write_locked([], ["a"])  # uncommitted: the lookup must not see it
        reader = threading.Thread(
            target=lambda: results.append(store.probabilities([ids("ab")], np.array([[99]])))
        )
        reader.start()
        reader.join(timeout=30)
        assert results, "the lookup waited for the write"
    assert results[0].probs[0, 0] > 0  # the committed state
    assert store.probabilities([ids("ab")], np.array([[99]])).probs[0, 0] == 0  # after commit
