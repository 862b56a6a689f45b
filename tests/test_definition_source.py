"""Definition proposals reach the engine as a MatchSource (lsp_server/definition_source.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lsp_server.definition_source import (
    DefinitionSource,
    proposal_length,
    token_functions,
    with_definitions,
)
from lsp_server.definitions import Resolver
from ngram_db import ByteTokenizer, NgramStore
from ngram_db.symbols import Symbol, extract
from superposed.api import Engine
from superposed.ngram import Match
from superposed.types import DecodeConfig, StopCondition

WIDGETS = "def frobnicate_widget(widget, *, force=False, retries=3) -> bool:\n    pass\n"
STORED = extract("/ws/pkg/widgets.py", WIDGETS)
DOCUMENT = "from pkg.widgets import frobnicate_widget\n\n\ndef main(w):\n    ok = "


def lookup(names: Sequence[str]) -> list[Symbol]:
    return [s for s in STORED if s.name in names]


def encode(text: str) -> list[int]:
    return [ord(c) for c in text]


def decode(ids: Sequence[int]) -> str:
    return "".join(map(chr, ids))


class Fixed:
    """A memory that always answers the same match."""

    def __init__(self, found: Match | None) -> None:
        self.found = found

    def match(self, context: Sequence[int], follow: int = 32, others: int = 0) -> Match | None:
        return self.found


def source(memory: Fixed | None = None, weight: float = 0.5) -> DefinitionSource:
    return DefinitionSource(
        memory,
        lambda: Resolver(DOCUMENT, "/ws/app.py", lookup),
        encode,
        decode,
        DOCUMENT,
        proposal_length(weight),
    )


def test_the_weight_becomes_the_length_the_engine_weighs_so() -> None:
    cfg = DecodeConfig()
    assert proposal_length(0.0) == 0
    for weight in (0.3, 0.5, 0.7):
        length = proposal_length(weight)
        share = cfg.memory_max * length / (length + cfg.memory_half)
        shorter = cfg.memory_max * (length - 1) / (length - 1 + cfg.memory_half)
        assert shorter < weight <= share or length == cfg.memory_seed_length
    assert proposal_length(0.01) == max(cfg.memory_min_length, cfg.memory_seed_length)


def test_inside_a_call_the_proposals_are_the_match() -> None:
    defs = source()
    prompt = encode(DOCUMENT)
    assert defs.match(prompt) is None  # no call open: the memory's answer (none)
    found = defs.match(prompt + encode("frobnicate_widget(w, "), others=4)
    assert found is not None and found.length == proposal_length(0.5)
    assert decode(found.continuation) == "force=False, retries=3)"  # whole first: it seeds
    assert [decode(o) for o in found.others] == ["force=", "retries="]
    assert max(found.next_counts, key=found.next_counts.__getitem__) == ord("f")
    assert defs.proposed == 1


def test_a_longer_memory_match_wins_and_a_shorter_one_joins_the_seeds() -> None:
    prompt = encode(DOCUMENT + "frobnicate_widget(")
    long = Match(40, {ord("w"): 1}, encode("w, force=True)"))
    assert source(Fixed(long)).match(prompt) is long
    short = Match(3, {ord("w"): 1}, encode("w, force=True)"))
    found = source(Fixed(short)).match(prompt, others=8)
    assert found is not None and decode(found.continuation) == "widget)"
    assert decode(found.others[0]) == "w, force=True)"  # the memory's seed comes next
    assert source(Fixed(short), weight=0.0).match(prompt) is short  # off


def test_a_class_assigned_in_the_draft_resolves_its_members() -> None:
    document = "class Gizmo:\n    size: int = 1\n\n    def turn(self, angle):\n        pass\n\n"
    defs = DefinitionSource(
        None, lambda: Resolver(document, "/ws/g.py"), encode, decode, document, 8
    )
    prompt = encode(document)
    assert defs.match(prompt) is None  # the prompt, seen first
    found = defs.match(prompt + encode("g = Gizmo()\ng.si"))
    assert found is not None and decode(found.continuation) == "ze"


def test_with_definitions_reads_the_stores_symbols(tiny_engine: Engine) -> None:
    store = NgramStore.open(":memory:", ByteTokenizer())
    store.update_file("/ws/pkg/widgets.py", WIDGETS)
    tokenizer = tiny_engine.tokenizer
    before = DOCUMENT + "frobnicate_widget("
    off = with_definitions(None, tokenizer, before, "/ws/app.py", before, [store], 0.0)
    assert off is None
    defs = with_definitions(None, tokenizer, before, "/ws/app.py", before, [store], 0.5)
    assert defs is not None
    encode_, decode_ = token_functions(tokenizer)
    found = defs.match(encode_(before))
    assert found is not None and decode_(found.continuation) == "widget)"


def test_the_engine_seeds_a_draft_from_a_proposal(tiny_engine: Engine) -> None:
    """The tiny random model never writes the argument list; the definition makes a draft of
    it, through the engine's unchanged memory path."""
    tokenizer = tiny_engine.tokenizer
    encode_, decode_ = token_functions(tokenizer)
    prompt = DOCUMENT + "frobnicate_widget(w, "
    defs = DefinitionSource(
        None,
        lambda: Resolver(prompt, "/ws/app.py", lookup),
        encode_,
        decode_,
        prompt,
        proposal_length(0.5),
    )
    cfg = DecodeConfig(k=3, max_new_tokens=24)
    stop = StopCondition(single_line=True)
    texts = [d.text for d in tiny_engine.complete(prompt, cfg=cfg, stop=stop, memory=defs).drafts]
    # seeded from the prompt's proposals: the whole argument list first, then a keyword
    assert texts[1:3] == ["force=False, retries=3)", "force="]
    assert texts[3:] == ["retries="]  # the other proposal: a reserve after the k (memory.reserves)
    # a decoded draft takes the whole argument list, one mixed-in token at a time
    assert texts[0].startswith("force=False, retries=3)")
    without = [d.text for d in tiny_engine.complete(prompt, cfg=cfg, stop=stop).drafts]
    assert not any(t.startswith(("force=", "retries=")) for t in without)


def test_the_server_gives_the_engine_the_definitions_when_weighted(tiny_engine: Engine) -> None:
    from lsp_server.answer import memory_matches, start_memory
    from lsp_server.cursor import CursorContext
    from lsp_server.match_indexes import MatchIndexes
    from lsp_server.request import Request
    from lsp_server.session import Session
    from lsp_server.settings import DecodingSettings, Settings, StoreSettings
    from lsp_server.stores import Stores, StoresHere
    from lsp_server.workspace import Where

    tokenizer = tiny_engine.tokenizer
    stores = Stores(tokenizer, StoreSettings(user_store=False))  # no store applies here
    session = Session(tiny_engine, stores, MatchIndexes(tokenizer))
    here = "file:///ws/here.py"
    text = "def frob(widget, *, force=False):\n    pass\n\n\nfrob("
    context = CursorContext.at(text, len(text))
    encode_, decode_ = token_functions(tiny_engine.tokenizer)
    # off: the memory's match (the def line's own text); on: the definition's proposal
    for weight, expected in ((0.0, "widget, *, force=False):\n    pass\n\n\n"), (0.5, "widget)")):
        where = Where(here, Path("/ws/here.py"), [], {here: text})
        settings = Settings(decoding=DecodingSettings(definition_weight=weight))
        request = Request(here, where, context, settings)
        pending = start_memory(session, request)
        source = memory_matches(session, request, StoresHere(None, None), pending)
        assert source is not None
        found = source.match(encode_(text))
        proposed = decode_(found.continuation) if found is not None else None
        assert proposed == expected


def test_a_window_that_starts_inside_a_docstring_still_finds_the_call() -> None:
    """The engine's contexts are the last 256 tokens: here they start inside a docstring,
    whose end would read as a string's start; the document before the cursor says better."""
    docstring = '    """' + "Docs (about it. " * 20 + '\n    """\n'
    document = DOCUMENT.replace("    ok = ", docstring + "    ok = frobnicate_widget(")
    defs = DefinitionSource(
        None,
        lambda: Resolver(document, "/ws/app.py", lookup),
        encode,
        decode,
        document,
        proposal_length(0.5),
    )
    head = encode(document)[-256:]
    assert '"""' in decode(head) and "(about it" in decode(head)
    found = defs.match(head)  # the prompt
    assert found is not None and decode(found.continuation) == "widget)"
    after = defs.match((head + encode("w, "))[-256:])  # a draft, the context cut to 256
    assert after is not None and decode(after.continuation) == "force=False, retries=3)"
    closed = defs.match((head + encode("w)\n    x = 1"))[-256:])
    assert closed is None
