"""No draft lost to the parse check when a good one exists (issue 51 item 7), without the
real model: a malformed block gives way to its first lines that parse, a malformed draft
never merges a good one away, and the memory's other matches wait after the spare drafts
for a slot the check frees."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lsp_server.completion.cleanup import Suggestion
from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.decode import decode, rank, shorter_blocks
from lsp_server.models import TINY_ENV
from lsp_server.settings import DecodingSettings
from ngram_db.suffix import SuffixIndex
from superposed.api import Completion, Engine
from superposed.types import DecodeConfig, Draft, StopCondition

BODY = "def read(path):\n    data = None\n    "
AFTER = "\n    return data\n"
LOOP = (
    "import os\n\n\ndef list_python_files(root):\n    result = []\n"
    "    for dirpath, dirnames, filenames in os.walk(root):\n        "
)
# issue 51's drafts at LOOP: each ends with a line the model left without its ":"
CUT_LOOP = (
    "for file in filenames:\n            if not os.path.exists(os.path.join(dirpath, file)):\n"
    "                continue\n            with open(os.path.join(dirpath, file))"
)


@pytest.fixture()
def judged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drafts judged for parsing, as with the real model (the tiny one's are not)."""
    monkeypatch.delenv(TINY_ENV, raising=False)


def ranked(texts: list[str], before: str, following: str = "", kind: str = "line") -> list[str]:
    settings = replace(DecodingSettings(), k=3)
    context = CursorContext(before, "", following=following, language="python")
    drafts = [Suggestion(t, -float(i)) for i, t in enumerate(texts)]
    return [s.text for s in rank(drafts, context, settings, None, kind)]  # type: ignore[arg-type]


def test_a_block_that_does_not_parse_gives_way_to_its_first_lines_that_do(judged: None) -> None:
    """Issue 51's plain case: every draft ended in a line without its ``:``, and none was
    shown; cut to their first three lines they parse."""
    drafts = [CUT_LOOP, CUT_LOOP.replace("(dirpath, file))", "(root, file))", 1)]
    shown = ranked(drafts, LOOP, "\n", kind="block")
    assert shown == [CUT_LOOP.rsplit("\n", 1)[0], drafts[1].rsplit("\n", 1)[0]]
    assert ranked(drafts, LOOP, "\n", kind="line") == []  # a line is never cut


def test_shorter_blocks_are_the_first_lines_longest_first() -> None:
    block = "a:\n    b\n\n    c\n    d"
    assert list(shorter_blocks(block)) == ["a:\n    b\n\n    c", "a:\n    b", "a:"]
    assert list(shorter_blocks("\n    a\n    b")) == ["\n    a"]  # a block after an opener
    assert list(shorter_blocks("x = 1")) == []


def test_a_malformed_draft_never_merges_a_good_one_away(judged: None) -> None:
    """The two say the same but for a trailing colon (near duplicates: one guess); the
    better-scored one does not parse. Merged first, the good one went with it."""
    assert ranked(["data = load(path):", "data = load(path)"], BODY, AFTER) == ["data = load(path)"]


def test_the_memory_reserves_wait_after_the_decoded_drafts(tiny_engine: Engine) -> None:
    """After ``return Frobnicator.`` token healing takes the ``.`` back, and the prompt's
    own match stops before it, too short to seed a draft (as ``NgramStore`` was in the
    demo). The memory's copies of what followed ``Frobnicator.`` come after every decoded
    draft, their scores below the last one's."""
    tokenizer = tiny_engine.tokenizer
    files = [
        "store = Frobnicator.open(path, tokenizer)\n",
        "user = Frobnicator.open(user_path(), tokenizer)\n",
        "# see Frobnicator.close), and its notes\n",
    ]
    memory = SuffixIndex([tokenizer.encode(f, add_special_tokens=False) for f in files])
    prompt = "def make(path, tokenizer):\n    return Frobnicator."
    # the prompt's match (`` Frobnicator``, 4 tokens) seeds nothing; with ``.``, 5
    cfg = DecodeConfig(k=3, max_new_tokens=6, memory_proposals=0, memory_seed_length=5)
    stop = StopCondition(single_line=True)
    drafts = tiny_engine.complete(prompt, cfg=cfg, stop=stop, memory=memory).drafts
    sources = [d.source for d in drafts]
    first = sources.index("memory")
    assert "model" in sources[:first] and set(sources[first:]) == {"memory"}
    copies = {"open(path, tokenizer)", "open(user_path(), tokenizer)", "close), and its notes"}
    assert {d.text for d in drafts[first:]} == copies
    assert all(a.score >= b.score for a, b in zip(drafts, drafts[1:], strict=False))
    none = replace(cfg, memory_reserves=0)
    drafts = tiny_engine.complete(prompt, cfg=none, stop=stop, memory=memory).drafts
    assert all(d.source == "model" for d in drafts)
    seedless = replace(cfg, memory_seed=False)
    drafts = tiny_engine.complete(prompt, cfg=seedless, stop=stop, memory=memory).drafts
    assert all(d.source != "memory" for d in drafts)  # memorySeed off: no copy at all


def test_a_reserve_takes_the_slot_of_drafts_that_do_not_parse(
    tiny_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through decode: every decoded draft breaks its brackets; the memory's reserve shows."""
    monkeypatch.delenv(TINY_ENV, raising=False)
    broken = [Draft(f"data = load(path{')' * (i + 2)}", [], -float(i)) for i in range(5)]
    reserve = Draft("data = read(path)", [], -9.0, source="memory")
    done = Completion([*broken, reserve], {"total": 1.0})
    monkeypatch.setattr(tiny_engine, "run", lambda *a, **kw: done)
    context = CursorContext.at(BODY + AFTER, len(BODY), "python")
    settings = replace(DecodingSettings(), k=3, line_mode="single")
    shown = decode(tiny_engine, context, settings).suggestions
    assert [(s.text, s.source) for s in shown] == [("data = read(path)", "memory")]
