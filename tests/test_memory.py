"""Memory: the suffix index, the never-vetoing mix, proposals, and the server-side indexes
kept current on save and edit."""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lsp_server.completion.answer import memory_matches, start_memory
from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.decode import Sources, decode
from lsp_server.completion.request import Request
from lsp_server.session import Session
from lsp_server.settings import DecodingSettings, Settings, StoreSettings
from lsp_server.stores import match_indexes as match_indexes_module
from lsp_server.stores.match_indexes import MatchIndexes
from lsp_server.stores.stores import Stores, StoresHere
from lsp_server.workspace import Where
from ngram_db import NgramStore
from ngram_db.suffix import MatchSet, SuffixIndex, brute_force_longest, suffix_array
from ngram_db.tokenizer import as_tokenizer
from superposed import memory as mem
from superposed.api import Engine
from superposed.hypotheses import Finisher, Hypothesis, heal_masks
from superposed.ngram import InMemoryNgramSource, Match
from superposed.prompt import encode_healed
from superposed.superposed import rescore
from superposed.types import DecodeConfig, StopCondition
from superposed.vocab import Vocab

# --- the suffix index against a brute-force reference --------------------------------------

streams_st = st.lists(st.lists(st.integers(0, 4), max_size=40), max_size=6)
context_st = st.lists(st.integers(0, 4), min_size=1, max_size=12)


@given(streams=streams_st, context=context_st, vector_range=st.sampled_from([1, 4, 4096]))
def test_longest_match_equals_brute_force(
    streams: list[list[int]], context: list[int], vector_range: int
) -> None:
    """Both narrowing paths (bisection over big ranges, numpy over small ones) agree with it."""
    index = SuffixIndex(streams, vector_range=vector_range)
    length, after = index.longest(context)
    assert length == brute_force_longest(streams, context)
    # every occurrence is one: the matched tokens precede each reported position
    forward = index.tokens.tolist()
    tail = context[len(context) - length :]
    for pos in after.tolist():
        assert forward[pos - length : pos] == tail
    expected = sum(
        1 for s in streams for i in range(len(s) - length + 1) if s[i : i + length] == tail
    )
    assert len(after) == (expected if length else 0)


@given(
    streams=st.lists(st.lists(st.integers(0, 2), max_size=40), max_size=8),
    repeats=st.integers(1, 4),
    context=st.lists(st.integers(0, 2), min_size=1, max_size=30),
    direct_range=st.sampled_from([2, 8, 64]),
)
def test_short_ranges_finish_as_narrowing_would(
    streams: list[list[int]], repeats: int, context: list[int], direct_range: int
) -> None:
    """Finishing a short range in one comparison gives the ranges and length (so the match:
    its back-off, counts and continuations) of narrowing it depth by depth."""
    streams = streams * repeats  # text open several times: few occurrences, long matches
    narrowing = SuffixIndex(streams, direct_range=0, min_follow=2)
    direct = SuffixIndex(streams, direct_range=direct_range, min_follow=2)
    assert direct._ranges(context) == narrowing._ranges(context)
    assert direct.match(context, others=3) == narrowing.match(context, others=3)


@given(st.lists(st.integers(0, 3), max_size=60))
def test_suffix_array_sorts_suffixes(values: list[int]) -> None:
    sa = suffix_array(np.array(values, dtype=np.int64)).tolist()
    assert sa == sorted(range(len(values)), key=lambda i: values[i:])


def test_match_counts_next_tokens_and_copies_the_continuation() -> None:
    index = SuffixIndex([[1, 2, 3, 4, 5], [9, 2, 3, 7], [2, 3, 4, 6]])
    match = index.match([8, 2, 3], follow=3)
    assert match is not None and match.length == 2
    assert match.next_counts == {4: 2, 7: 1}
    assert match.continuation == [4, 6]  # the latest occurrence of the commonest next token
    assert index.match([5]) is None  # only a separator follows: nothing to propose
    assert index.match([42]) is None


def _brute_force_live(streams: list[list[int]], context: list[int], min_follow: int) -> int:
    """The longest suffix of ``context`` with an occurrence that ``min_follow`` tokens follow."""
    best = 0
    for n in range(1, len(context) + 1):
        tail = context[len(context) - n :]
        if any(
            s[i : i + n] == tail and len(s) - (i + n) >= min_follow
            for s in streams
            for i in range(len(s) - n + 1)
        ):
            best = n
    return best


@given(streams=streams_st, context=context_st, min_follow=st.integers(1, 4))
def test_match_backs_off_from_occurrences_at_a_stream_end(
    streams: list[list[int]], context: list[int], min_follow: int
) -> None:
    """The match is the longest suffix that occurs with ``min_follow`` tokens after it."""
    found = SuffixIndex(streams, min_follow=min_follow).match(context)
    expected = _brute_force_live(streams, context, min_follow)
    assert (found.length if found is not None else 0) == expected


def test_a_stream_that_ends_where_the_context_does_hides_no_longer_continuation() -> None:
    """An open copy of the text before the cursor matches all of it but continues nothing:
    the shorter match with a continuation is the one proposed."""
    copy = [5, 6, 7, 8, 9, 1]  # the prompt [.., 9] and one healed token, then the file ends
    taught = [0, 7, 8, 9, 1, 2, 3, 4, 0, 7, 8, 9, 1, 2, 3, 4]
    match = SuffixIndex([copy, taught], min_follow=4).match([5, 6, 7, 8, 9])
    assert match is not None and match.length == 3
    assert match.continuation[:4] == [1, 2, 3, 4]
    stale = SuffixIndex([copy, taught]).match([5, 6, 7, 8, 9])  # any live next token counts
    assert stale is not None and stale.length == 5 and stale.continuation == [1]


def test_match_set_prefers_the_longest_and_adds_equal_ones() -> None:
    a, b = SuffixIndex([[1, 2, 3]]), SuffixIndex([[0, 1, 2, 5]])
    longest = MatchSet([a, b]).match([0, 1, 2])
    assert longest is not None and (longest.length, longest.next_counts) == (3, {5: 1})
    tied = MatchSet([a, b]).match([7, 1, 2])
    assert tied is not None and tied.next_counts == {3: 1, 5: 1}
    tied = MatchSet([a, b]).match([7, 1, 2], others=2)
    assert tied is not None and (tied.continuation, tied.others) == ([3], [[5]])


# --- the mix: never a veto, and a long match dominates ----------------------------------------


def test_unseen_candidate_survives_the_ngram_mix() -> None:
    source = InMemoryNgramSource.from_sequences([[1, 2, 3]], {2: 1.0})
    logp = torch.log(torch.tensor([[0.9, 0.1]], dtype=torch.float64))
    scores = rescore(logp, torch.tensor([[4, 3]]), [[1, 2]], DecodeConfig(alpha=0.3), source)
    assert math.isfinite(float(scores[0, 0]))
    assert scores[0, 0] > scores[0, 1]  # the model's much likelier word still wins


def test_unseen_candidate_survives_a_short_match() -> None:
    cfg = DecodeConfig()
    logp = torch.log(torch.tensor([[0.95, 0.05]], dtype=torch.float64))
    short = Match(length=3, next_counts={8: 1}, continuation=[8])
    scores = mem.mix(logp, torch.tensor([[7, 8]]), [short], cfg)
    assert math.isfinite(float(scores[0, 0])) and scores[0, 0] > scores[0, 1]


def test_long_exact_match_dominates() -> None:
    cfg = DecodeConfig()
    logp = torch.log(torch.tensor([[0.99, 0.01]], dtype=torch.float64))
    long = Match(length=40, next_counts={8: 3}, continuation=[8])
    scores = mem.mix(logp, torch.tensor([[7, 8]]), [long], cfg)
    assert scores[0, 1] > scores[0, 0]
    assert math.isfinite(float(scores[0, 0]))  # outvoted, not vetoed
    assert mem.weight(long, cfg) < 1.0


def test_disallowed_candidate_stays_disallowed() -> None:
    logp = torch.tensor([[0.0, float("-inf")]], dtype=torch.float64)
    long = Match(length=40, next_counts={8: 1}, continuation=[8])
    scores = mem.mix(logp, torch.tensor([[7, 8]]), [long], DecodeConfig())
    assert scores[0, 1] == float("-inf")  # token healing's constraint beats any match


def test_proposals_add_the_match_tokens_as_candidates() -> None:
    candidates = torch.tensor([[7, 8], [7, 9]])
    match = Match(length=10, next_counts={5: 1, 6: 3}, continuation=[6])
    extra = mem.proposals([match, None], candidates, DecodeConfig(memory_proposals=2))
    assert extra is not None and extra.tolist() == [[6, 5], [7, 7]]
    assert mem.proposals([None, None], candidates, DecodeConfig()) is None


# --- decoding with memory, on the tiny random model ------------------------------------------

CODE = "def load(path):\n    with open(path) as handle:\n        return handle.read()\n\n\n"


def test_a_long_match_seeds_a_draft(tiny_engine: Engine) -> None:
    """The tiny random model never writes the line; the codebase's match makes a draft of it."""
    tokenizer = tiny_engine.tokenizer
    line = "        return json.loads(handle.read(), object_hook=decode_record)\n"
    source_file = "def load_json(path):\n    with open(path) as handle:\n" + line
    memory = SuffixIndex([tokenizer.encode(source_file, add_special_tokens=False)])
    prompt = "def load_json(path):\n    with open(path) as handle:\n        return"
    cfg = DecodeConfig(k=3, max_new_tokens=24)
    stop = StopCondition(single_line=True)
    with_memory = tiny_engine.complete(prompt, cfg=cfg, stop=stop, memory=memory)
    texts = [d.text for d in with_memory.drafts]
    assert line[len("        return") :].rstrip("\n") in texts
    without = tiny_engine.complete(prompt, cfg=cfg, stop=stop)
    assert all("object_hook" not in d.text for d in without.drafts)


# --- the server's indexes: stores and open documents, kept current ---------------------------


def test_store_index_follows_saves(tokenizer: Any) -> None:
    store = NgramStore.open(":memory:", tokenizer)
    memory = MatchIndexes(tokenizer)
    ids = lambda text: tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    store.update_file("/a.py", "alpha = compute_first_value(1)\n")
    index = memory.stores.store_index(store)  # the first build: done before it returns
    assert index is not None
    found = index.match(ids("alpha = compute_first"))
    assert found is not None and found.length >= 4
    store.update_file("/a.py", "beta = compute_second_value(2)\n")  # a save replaces it
    memory.stores.stores_changed()
    memory.stores.store_index(store)  # starts the rebuild
    memory.wait()
    index = memory.stores.store_index(store)
    assert index is not None
    new = index.match(ids("beta = compute_second"))
    assert new is not None and new.length >= 4
    old = index.match(ids("alpha = compute_first"))
    assert old is None or old.length < 4  # the old text is gone


def test_open_documents_follow_edits_and_the_cursor_line_is_left_out(tokenizer: Any) -> None:
    memory = MatchIndexes(tokenizer)
    ids = lambda text: tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    other = "file:///other.py"
    here = "file:///here.py"
    text = "result = frobnicate_widgets(alpha, beta)\nres"
    docs = {other: "x = 1\n", here: text}
    context = ids("result = frobnicate_widgets(")
    found = memory.source(here, len(text), docs).match(context)
    assert found is not None and found.length >= 4  # an earlier line of the same document
    # the other document is edited: its new text is matched, without any save
    docs = {other: "value = transmogrify_gadgets(gamma)\n", here: text}
    found = memory.source(here, len(text), docs).match(ids("value = transmogrify_g"))
    assert found is not None and found.length >= 4
    # the cursor's own line never matches itself
    line = "zzz = unusual_function_name(q)"
    docs = {here: line}
    found = memory.source(here, len(line), docs).match(ids(line))
    assert found is None
    # at a line start, the text before the cursor's line (which ends where the prompt does,
    # up to the healed line break) does not continue the prompt with that line break
    start = "def main():\n    x = compute_first_value(1)\n    "
    prompt_ids, heal = encode_healed(tokenizer, Vocab.from_tokenizer(tokenizer), start)
    assert heal.startswith(b"\n")
    assert memory.source(here, len(start), {here: start}).match(prompt_ids) is None
    # a closed document is forgotten
    gone = memory.source(here, len(text), {here: text}).match(ids("value = transmogrify_g"))
    assert gone is None or gone.length < 4


def test_large_open_documents_are_indexed_in_the_background(
    tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past OTHERS_INLINE_CHARS a change is indexed off the request path: the previous index
    serves until the new one is built, unless it holds the requesting document itself."""
    monkeypatch.setattr(match_indexes_module, "OTHERS_INLINE_CHARS", 0)
    memory = MatchIndexes(tokenizer)
    a, b, here = "file:///a.py", "file:///b.py", "file:///here.py"

    def length(uri: str, documents: dict[str, str], text: str) -> int:
        found = memory.source(uri, 0, documents).match(
            tokenizer.encode(text, add_special_tokens=False)
        )
        return 0 if found is None else found.length

    old = {a: "alpha = compute_first_value(1)\n", here: ""}
    assert length(here, old, "alpha = compute_first_value") >= 4  # none yet: built at once
    new = {a: "beta = compute_second_value(2)\n", here: ""}
    assert length(here, new, "alpha = compute_first_value") >= 4  # the previous one served
    memory.wait()
    assert length(here, new, "beta = compute_second_value") >= 4
    assert length(here, new, "alpha = compute_first_value") < 4
    # another document asks (the previous index, of a only, serves it), then ``here`` asks
    # again: the index built meanwhile holds ``here`` itself (its match would be its own
    # text), so no index of the others serves until the new one is built
    mine = {**new, b: "gamma = compute_third_value(3)\n"}
    assert length(b, mine, "beta = compute_second_value") >= 4
    memory.wait()
    assert length(here, mine, "beta = compute_second_value") < 4
    memory.wait()
    assert length(here, mine, "gamma = compute_third_value") >= 4


def test_only_the_newest_background_index_of_the_open_documents_is_built(
    tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Documents changed three times while the builder was busy: the two stale indexes are
    skipped (each would index every open document again), the newest is built."""
    monkeypatch.setattr(match_indexes_module, "OTHERS_INLINE_CHARS", 0)
    memory = MatchIndexes(tokenizer)
    a, here = "file:///a.py", "file:///here.py"
    memory.source(here, 0, {a: "alpha = compute_first_value(1)\n", here: ""})  # built at once
    built: list[int] = []
    index_documents = memory._index_documents

    def counted(snapshot: list[tuple[str, str, np.ndarray]]) -> SuffixIndex | None:
        built.append(len(snapshot))
        return index_documents(snapshot)

    monkeypatch.setattr(memory, "_index_documents", counted)
    gate = threading.Event()
    memory._builder.submit(gate.wait, 30)  # the builder is busy meanwhile
    for n in range(3):
        memory.source(here, 0, {a: f"value_{n} = compute_value_number_{n}(1)\n", here: ""})
    gate.set()
    memory.wait()
    assert built == [1]  # one build, of the newest text
    found = memory.source(here, 0, {a: "value_2 = compute_value_number_2(1)\n", here: ""}).match(
        tokenizer.encode("value_2 = compute_value_number_2", add_special_tokens=False)
    )
    assert found is not None and found.length >= 4


class _HeldTokenizer:
    """A tokenizer that encodes only once ``release`` is set (an index build that takes long)."""

    def __init__(self, tokenizer: Any) -> None:
        self.inner = as_tokenizer(tokenizer)
        self.release = threading.Event()
        self.threads: set[str] = set()  # the threads that tokenized

    def fingerprint(self) -> str:
        return self.inner.fingerprint()

    def encode_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        self.threads.add(threading.current_thread().name)
        assert self.release.wait(30), "never released"
        return self.inner.encode_batch(texts)


def test_a_request_does_not_wait_for_its_documents_to_be_indexed(tokenizer: Any) -> None:
    """The server's memory source for a request is ready on the engine thread (so the prompt's
    prefill can start) while the open documents are still being tokenized and indexed; the
    first lookup then matches the same indexes as ever (the current document's own text)."""
    held = _HeldTokenizer(tokenizer)
    stores = Stores(tokenizer, StoreSettings(user_store=False))  # no store applies here
    engine_stub: Any = SimpleNamespace(tokenizer=tokenizer)
    session = Session(engine_stub, stores, MatchIndexes(held))
    here = "file:///here.py"
    text = "result = frobnicate_widgets(alpha, beta)\nres"
    where = Where(here, Path("/here.py"), [], {here: text})
    settings = Settings()
    request = Request(here, where, CursorContext.at(text, len(text)), settings)
    pending = start_memory(session, request)

    def build() -> Any:
        return memory_matches(session, request, StoresHere(None, None), pending)

    built: list[Any] = []
    engine = threading.Thread(target=lambda: built.append(build()), name="engine")
    engine.start()
    engine.join(5)  # a bound on the engine thread's blocking, not a timing of real speed
    blocked = engine.is_alive()
    held.release.set()
    engine.join()
    assert not blocked, "the engine thread waited for the documents' index"
    assert "engine" not in held.threads  # it tokenized nothing itself
    context = tokenizer.encode("result = frobnicate_widgets(", add_special_tokens=False)
    found = built[0].match(context)
    assert found is not None and found.length >= 4  # the requesting document's earlier line
    expected = MatchIndexes(tokenizer).source(here, len(text), {here: text}).match(context)
    assert expected is not None and found.next_counts == expected.next_counts
    # nor do the stores' indexes, taken on the engine thread, wait for the documents' build
    held = _HeldTokenizer(tokenizer)
    memory = MatchIndexes(held)
    store = NgramStore.open(":memory:", tokenizer)
    store.update_file("/a.py", "alpha = compute_first_value(1)\n")
    pending = memory.source_later(here, len(text), {here: text})
    engine = threading.Thread(target=lambda: built.append(pending.with_stores([store])))
    engine.start()
    engine.join(5)
    blocked = engine.is_alive()
    held.release.set()
    engine.join()
    assert not blocked, "the stores' indexes waited for the documents' build"
    alpha = tokenizer.encode("alpha = compute_first", add_special_tokens=False)
    assert all(
        m is not None and m.length >= 4 for m in (built[1].match(alpha), built[1].match(context))
    )


# --- the seeded draft -------------------------------------------------------------------------


def test_distinct_continuations_seed_distinct_drafts(tiny_engine: Engine) -> None:
    """Two call sites continue the same context differently: each seeds a draft (the latest
    first), a third that ends the line alike adds none, and memory_seeds bounds them."""
    tokenizer = tiny_engine.tokenizer
    prompt = "def frob(widget):\n    return"
    lines = [
        " widget.transmogrify(spline_count=42)",
        " widget.reticulate(7)",
        " widget.reticulate(7)",
    ]
    files = [prompt + line + "\n" for line in lines]
    memory = SuffixIndex([tokenizer.encode(f, add_special_tokens=False) for f in files])
    healed = tiny_engine.prompt(prompt, 24)
    match = memory.match(healed.ids, others=4)
    assert match is not None and len(match.others) >= 1
    stop = StopCondition(single_line=True)
    finisher = Finisher(tiny_engine.vocab, healed.heal, stop)
    cfg = DecodeConfig(k=3, max_new_tokens=24, memory_seeds=3)
    seeded = [d.text for d in mem.seeds(match, cfg, tiny_engine.vocab, finisher)]
    assert seeded == [" widget.reticulate(7)", " widget.transmogrify(spline_count=42)"]
    cfg = DecodeConfig(k=3, max_new_tokens=24, memory_proposals=0, memory_seeds=2)
    drafts = [
        d.text for d in tiny_engine.complete(prompt, cfg=cfg, stop=stop, memory=memory).drafts
    ]
    assert drafts[1:] == seeded  # placed from memory_seed_rank (2) backwards, the first first
    one = DecodeConfig(k=3, max_new_tokens=24, memory_proposals=0, memory_seeds=1)
    drafts = [
        d.text for d in tiny_engine.complete(prompt, cfg=one, stop=stop, memory=memory).drafts
    ]
    assert drafts[2] == seeded[0] and seeded[1] not in drafts[:3]
    assert drafts[3:] == seeded[1:]  # a reserve (memory.reserves): after the k, for a free slot


def test_the_prompt_match_seeds_a_draft_without_proposals(tiny_engine: Engine) -> None:
    """Proposals off: the seed alone brings the codebase's line into the drafts."""
    tokenizer = tiny_engine.tokenizer
    line = " widget.transmogrify(spline_count=42)"
    source_file = "def frob(widget):\n    return" + line + "\n"
    memory = SuffixIndex([tokenizer.encode(source_file, add_special_tokens=False)])
    prompt = "def frob(widget):\n    return"
    stop = StopCondition(single_line=True)
    cfg = DecodeConfig(k=3, max_new_tokens=24, memory_proposals=0)
    seeded = tiny_engine.complete(prompt, cfg=cfg, stop=stop, memory=memory)
    assert [d.text for d in seeded.drafts][2] == line
    cfg = DecodeConfig(k=3, max_new_tokens=24, memory_proposals=0, memory_seed=False)
    unseeded = tiny_engine.complete(prompt, cfg=cfg, stop=stop, memory=memory)
    assert line not in [d.text for d in unseeded.drafts]


# --- a draft at a blank line continues that line ----------------------------------------------


def test_a_blank_line_draft_may_not_begin_with_a_line_break(vocab: Vocab, tokenizer: Any) -> None:
    newline = tokenizer.encode("\n", add_special_tokens=False)[0]
    word = tokenizer.encode("print", add_special_tokens=False)[0]
    healing = Hypothesis(heal=b"\n    ", blank=True)
    assert healing.allows(newline, vocab)  # the healed line break is the one before the line
    done = healing.extend(newline, 0.0, vocab)
    for token in tokenizer.encode("    ", add_special_tokens=False):
        done = done.extend(token, 0.0, vocab)
    assert done.heal == b"" and done.blank
    assert not done.allows(newline, vocab) and done.allows(word, vocab)
    masks = heal_masks(vocab, [done], len(vocab), torch.device("cpu"))
    assert masks is not None and not masks[0, newline] and masks[0, word]
    assert not done.extend(word, 0.0, vocab).blank  # once the line has text, anything goes
    assert Hypothesis().allows(newline, vocab)  # not at a blank line: a line break is fine
    assert heal_masks(vocab, [Hypothesis()], len(vocab), torch.device("cpu")) is None


def test_a_seed_that_would_leave_the_line_blank_is_not_drafted(
    vocab: Vocab, tokenizer: Any
) -> None:
    continuation = tokenizer.encode("\n    y = transmogrify(2)\n", add_special_tokens=False)
    match = Match(length=12, next_counts={continuation[0]: 1}, continuation=continuation)
    cfg = DecodeConfig(max_new_tokens=24)
    other_line = Finisher(vocab, b"", StopCondition(single_line=True))
    assert [d.text for d in mem.seeds(match, cfg, vocab, other_line)] == [
        "\n    y = transmogrify(2)"
    ]
    this_line = Finisher(vocab, b"", StopCondition(single_line=True, continue_line=True))
    assert mem.seeds(match, cfg, vocab, this_line) == []


@pytest.mark.parametrize(
    ("found", "heal", "line"),
    [
        ("\n    (7, 7, 0),\n", b"\n        ", "(7, 7, 0),"),  # moved deeper
        ("\n    print(result)\n", b"\n\n    ", "print(result)"),  # a blank added
        ("\n        y = transmogrify(2)\n", b"\n    ", "y = transmogrify(2)"),  # moved out
    ],
)
def test_a_seed_takes_the_cursors_indentation(
    vocab: Vocab, tokenizer: Any, found: str, heal: bytes, line: str
) -> None:
    """At a line start the match ends before the cursor's line break and indentation (the
    healed text); where the copied code had other ones, its next line is still the seed,
    at the cursor's indentation (not dropped, not indented twice)."""
    continuation = tokenizer.encode(found, add_special_tokens=False)
    match = Match(length=12, next_counts={continuation[0]: 1}, continuation=continuation)
    cfg = DecodeConfig(max_new_tokens=24)
    finisher = Finisher(vocab, heal, StopCondition(single_line=True, continue_line=True))
    assert [d.text for d in mem.seeds(match, cfg, vocab, finisher)] == [line]
    realigned = mem.realign(continuation, heal, vocab)
    assert realigned is not None and vocab.decode(realigned) == heal + found.lstrip().encode()


def test_realign_leaves_matching_or_mid_line_continuations_alone(
    vocab: Vocab, tokenizer: Any
) -> None:
    same = tokenizer.encode("\n    y = 2\n", add_special_tokens=False)
    assert mem.realign(same, b"\n    ", vocab) is None  # the same indentation
    assert mem.realign(same, b"", vocab) is None  # nothing healed
    assert mem.realign(same, b" ", vocab) is None  # healed inside a line: no line start
    blank = tokenizer.encode("\n\n", add_special_tokens=False)
    assert mem.realign(blank, b"\n    ", vocab) is None  # no line to take


@pytest.mark.parametrize(
    ("then", "rule"),
    [
        # a blank line that keeps its indentation: one token spans the healed line break
        # and the next; without continue_line the drafts take that line break first
        ("    \n    return value\n", "continue_line"),
        # the same context one level deeper: without the rule the drafts take those spaces
        # (an over-indented line, as on the replay's "            if prev:")
        ("        return value\n", "indented"),
    ],
)
def test_drafts_keep_to_the_cursors_line(tiny_engine: Engine, then: str, rule: str) -> None:
    """A cursor after the indentation of a blank line, and a codebase that goes on from the
    same text differently: without the rule some of the tiny model's drafts follow it; with
    it, none does."""
    head = "def load(path):\n    value = decode_all(path)\n"
    source_file = tiny_engine.tokenizer.encode(head + then, add_special_tokens=False)
    memory = SuffixIndex([source_file])
    cfg = DecodeConfig(k=3, max_new_tokens=8)

    def strays(on: bool) -> list[bool]:
        indented = rule == "indented"
        stop = StopCondition(
            single_line=True, continue_line=on or indented, indented=on and indented
        )
        drafts = tiny_engine.complete(head + "    ", cfg=cfg, stop=stop, memory=memory).drafts
        if rule == "continue_line":
            return [d.text.lstrip(" \t").startswith("\n") for d in drafts]
        return [d.text[:1] in (" ", "\t") for d in drafts]

    assert any(strays(False))
    assert not any(strays(True))


@pytest.mark.parametrize(
    ("before", "complete"),
    [
        ("    x = 1\n    ", True),  # as deep as the line above
        ("    x = 1\n\n    ", True),  # blank lines between
        ("    if x:\n        ", True),  # one level into the block it opens
        ("    if x:\n    ", False),  # the block's indentation still to come
        ("        x = 1\n   ", False),  # being typed: 3 of 8 spaces
        ("        x = 1\n      ", False),  # 6 of 8
        ("        return x\n    ", True),  # a dedent by a whole level
        ("\t\treturn x\n\t", True),  # tabs are whole levels
        ("    f(\n        ", True),  # inside an opened bracket
        ("def main():\n   ", False),  # 3 of 4 spaces into the block
        ("    x = 1\n      ", False),  # 2 spaces past the line above: not a level
        ("x = 1\n", False),  # column 0: the drafts choose the indentation
        ("    ", True),  # the first line
    ],
)
def test_the_indentation_is_complete_at_the_line_above_or_whole_levels_away(
    before: str, complete: bool
) -> None:
    assert CursorContext.at(before, len(before)).indentation_complete is complete


def test_the_blank_rule_leaves_the_cached_heal_mask_alone(vocab: Vocab) -> None:
    """heal_masks narrowed the cached consistent mask in place (``&=``): every later
    request healing the same bytes lost the tokens a blank line's rule had removed."""
    cpu = torch.device("cpu")
    before = vocab.consistent_mask(b"\n    ", len(vocab), cpu).clone()
    blank = Hypothesis(heal=b"\n    ", blank=True, indented=True)
    masks = heal_masks(vocab, [blank], len(vocab), cpu)
    assert masks is not None and masks.sum() < before.sum()
    assert torch.equal(vocab.consistent_mask(b"\n    ", len(vocab), cpu), before)


def test_indented_breaking_ids_add_whitespace_past_the_heal(vocab: Vocab) -> None:
    deeper = vocab.token_bytes.index(b"\n        ")
    same = vocab.token_bytes.index(b"\n    ")
    assert deeper in vocab.breaking_ids(b"\n    ", indented=True)
    assert deeper not in vocab.breaking_ids(b"\n    ")
    assert same not in vocab.breaking_ids(b"\n    ", indented=True)  # the heal itself


def test_suggestions_at_a_blank_line_continue_it(tiny_engine: Engine) -> None:
    """completion.decode asks for it when the cursor's line is blank (and only then)."""
    tokenizer = tiny_engine.tokenizer
    head = "def load(path):\n    value = decode_all(path)\n"
    source_file = head + "    \n    return value\n"
    memory = SuffixIndex([tokenizer.encode(source_file, add_special_tokens=False)])
    settings = DecodingSettings(memory=True, first_prompt_tokens=0, max_new_tokens=8)
    text = head + "    "
    answer = decode(
        tiny_engine, CursorContext.at(text, len(text)), settings, Sources(memory=memory)
    )
    assert answer.suggestions
    assert not any(s.text.lstrip(" \t").startswith("\n") for s in answer.suggestions)
    assert CursorContext.at(text, len(text)).blank_line
    assert CursorContext.at("\n", 1).blank_line
    assert not CursorContext.at("x = 1", 5).blank_line  # after a complete line: the next one
    assert not CursorContext.at("    )", 4).blank_line  # something follows the cursor


# --- blocks from the memory (issue 23) --------------------------------------------------------

TWIN = "def get(self, key):\n    value = self._store[key]\n    return value\n"


@pytest.mark.parametrize(
    ("above", "body"),
    [
        (TWIN, "value = self._store[key]\n    return value"),
        # the twin one level deeper (a method): the copied block moves out to the cursor's
        (
            "class Store:\n    " + TWIN.replace("\n", "\n    ").rstrip(" "),
            "value = self._store[key]\n    return value",
        ),
    ],
)
def test_a_twin_function_proposes_its_body_as_a_block(
    tiny_engine: Engine, tokenizer: Any, above: str, body: str
) -> None:
    """The sync/async twin: after ``async def aget(self, key):`` the document's ``get`` body
    is one draft, whole and at the cursor's indentation; a single-line request gets its
    first line only."""
    text = above + "\n\nasync def aget(self, key):\n    "
    uri = "file:///store.py"
    memory = MatchIndexes(tokenizer).source(uri, len(text), {uri: text})
    context = CursorContext.at(text, len(text), language="python")
    settings = DecodingSettings(first_prompt_tokens=0)
    assert settings.line_mode == "auto"
    shown = [
        s.text for s in decode(tiny_engine, context, settings, Sources(memory=memory)).suggestions
    ]
    assert body in shown
    single = DecodingSettings(first_prompt_tokens=0, line_mode="single")
    lines = [
        s.text for s in decode(tiny_engine, context, single, Sources(memory=memory)).suggestions
    ]
    assert body.split("\n")[0] in lines and body not in lines


def test_reindent_moves_every_later_line_by_the_same_indentation(
    vocab: Vocab, tokenizer: Any
) -> None:
    block = "x = 1\n        if x:\n            y = 2\n    z = 3\n"
    tokens = tokenizer.encode(block, add_special_tokens=False)
    moved = vocab.decode(mem.reindent(tokens, b"        ", b"    ", vocab)).decode()
    assert moved == "x = 1\n    if x:\n        y = 2\n    z = 3\n"  # a shallower line stays
    assert mem.reindent(tokens, b"    ", b"    ", vocab) == tokens


def test_a_seed_is_not_cut_by_the_token_budget(vocab: Vocab, tokenizer: Any) -> None:
    """A seed's tokens are copied, not decoded: a long line comes whole (issue 23: a
    70-character line lost its closing ')' to the 24-token budget)."""
    line = " configure_the_transmogrifier(spline_count=42, reticulate=True, mode='fast')"
    continuation = tokenizer.encode(line + "\nnext_line()\n", add_special_tokens=False)
    assert len(continuation) > 24
    match = Match(length=12, next_counts={continuation[0]: 1}, continuation=continuation)
    cfg = DecodeConfig(max_new_tokens=8)
    finisher = Finisher(vocab, b"", StopCondition(single_line=True))
    assert [d.text for d in mem.seeds(match, cfg, vocab, finisher)] == [line]


def test_a_draft_out_of_steps_is_finished_from_its_match(tiny_engine: Engine) -> None:
    """Seeds off, 4 model steps: a draft that follows the codebase's long line is finished
    from the match's continuation (the budget counts model steps, not copied tokens)."""
    tokenizer = tiny_engine.tokenizer
    line = " widget.transmogrify(spline_count=42, reticulate=True)"
    source_file = "def frob(widget):\n    return" + line + "\n"
    memory = SuffixIndex([tokenizer.encode(source_file, add_special_tokens=False)])
    prompt = "def frob(widget):\n    return"
    assert len(tokenizer.encode(line, add_special_tokens=False)) > 4
    stop = StopCondition(single_line=True)
    cfg = DecodeConfig(k=3, max_new_tokens=4, memory_seed=False)
    drafts = [
        d.text for d in tiny_engine.complete(prompt, cfg=cfg, stop=stop, memory=memory).drafts
    ]
    assert line in drafts


@pytest.mark.parametrize(
    ("above", "opener", "body"),
    [
        # a method's body after a function's opener: one level out
        (
            "class Store:\n    " + TWIN.replace("\n", "\n    ").rstrip(" "),
            "async def aget(self, key):",
            "\n    value = self._store[key]\n    return value",
        ),
        # a function's body after a method's opener: one level in (it fell below the floor)
        (
            TWIN,
            "class Async:\n    async def aget(self, key):",
            "\n        value = self._store[key]\n        return value",
        ),
    ],
)
def test_a_twin_body_after_the_opener_takes_the_openers_block(
    tiny_engine: Engine, tokenizer: Any, above: str, opener: str, body: str
) -> None:
    """The cursor at the end of ``async def aget(self, key):``: the copied body comes at the
    opener's indentation and one level, wherever the twin was found."""
    text = above + "\n\n" + opener
    uri = "file:///store.py"
    memory = MatchIndexes(tokenizer).source(uri, len(text), {uri: text})
    context = CursorContext.at(text, len(text), language="python")
    settings = DecodingSettings(first_prompt_tokens=0)
    shown = [
        s.text for s in decode(tiny_engine, context, settings, Sources(memory=memory)).suggestions
    ]
    assert body in shown
