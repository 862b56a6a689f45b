"""Issue 57: a confidence for every request, from what decoding already knows."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.workspace import Workspace

from lsp_server import models
from lsp_server.completion.cleanup import Suggestion
from lsp_server.completion.confidence import FEATURES, confidence, features, shows
from lsp_server.completion.cursor import CursorContext
from lsp_server.completion.decode import decode
from lsp_server.server import SuperposedServer
from lsp_server.session import Session
from lsp_server.settings import DecodingSettings, parse_settings
from lsp_server.stores.match_indexes import MatchIndexes
from lsp_server.stores.stores import Stores
from lsp_server.workspace import doc_key
from superposed.api import Engine
from superposed.ngram import Match
from superposed.types import Draft
from tests.test_answer import COL, LINE, MAIN
from tests.test_answer import repo as answer_repo  # noqa: F401 (a fixture)


def test_a_decoded_answer_says_its_confidence_and_features(tiny_engine: Engine) -> None:
    settings = DecodingSettings(k=3, max_new_tokens=6, memory=False, line_mode="single")
    answer = decode(tiny_engine, CursorContext.at("x = 1\ny = ", 10), settings)
    assert answer.suggestions
    assert set(answer.features) == set(FEATURES)
    assert answer.features["mid_line"] == 1.0
    assert 0.0 < answer.features["share"] <= 1.0
    assert answer.features["mean_logp"] < 0.0  # log-probabilities of the tiny model's noise
    assert 0.0 < answer.confidence < 1.0
    assert "confidence" in answer.timing_ms


def test_drafts_that_agree_say_more_than_drafts_that_do_not() -> None:
    first = Suggestion("return x", -1.0)
    agreeing = [Draft("return x", [5, 6], -1.0), Draft("return x ", [5, 6, 7], -3.0)]
    apart = [Draft("return x", [5, 6], -1.0), Draft("pass", [9], -1.1)]
    sure = features(agreeing, [first, Suggestion("return x", -3.0)], first, None, None, False)
    unsure = features(apart, [first, Suggestion("pass", -1.1)], first, None, None, False)
    assert sure["agree"] == 1.0 and unsure["agree"] == 0.5
    assert sure["first_token_share"] == 1.0 > unsure["first_token_share"]
    assert sure["margin"] == 2.0 and math.isclose(unsure["margin"], 0.1)
    assert sure["mean_logp"] == -0.5
    assert unsure["prefix"] == 0.5  # "pass" shares nothing with "return x"


def test_the_memory_match_says_how_long_and_how_agreeing() -> None:
    first = Suggestion("return x", -1.0)
    drafts = [Draft("return x", [5, 6], -1.0)]
    match = Match(length=40, next_counts={5: 3, 9: 1}, continuation=[5, 6], weight=0.5)
    known = features(drafts, [first], first, match, "return x\n", False)
    assert known["memory_length"] == math.log1p(20)
    assert known["memory_agree"] == 0.75
    assert known["memory_lead"] == 1.0 and known["memory_says"] == 1.0


def test_nothing_shown_has_no_features_and_no_confidence() -> None:
    assert features([Draft("", [], -1.0)], [], None, None, None, True) == {}
    assert confidence({}) == 0.0


def test_confidence_is_the_logistic_of_the_weighted_features() -> None:
    weights = {"bias": -1.0, "agree": 2.0}
    assert math.isclose(confidence({"bias": 1.0, "agree": 1.0}, weights), 1 / (1 + math.exp(-1)))
    assert confidence({"bias": 1.0, "agree": 0.0}, weights) < 0.5


def quiet_server(repo: tuple[Path, Path], options: dict[str, Any]) -> tuple[Any, list[str]]:
    """A server on test_answer's repository and tiny model with ``options``: itself and the
    drafts of one inline request at the call's open bracket."""
    path, db = repo
    settings, errors = parse_settings({"userStore": False, "codebaseDb": str(db), **options})
    assert not errors
    ls = SuperposedServer()
    ls.protocol._workspace = Workspace(None)
    ls.protocol.client_capabilities = types.ClientCapabilities()
    ls.workspace.put_text_document(types.TextDocumentItem(path.as_uri(), "python", 1, MAIN))
    ls.settings = settings
    engine = models.load_engine(settings.model)
    session = Session(
        engine, Stores(engine.tokenizer, settings.stores), MatchIndexes(engine.tokenizer)
    )
    ls.slot.state = session
    try:
        _, drafts = asyncio.run(ls.suggest(path.as_uri(), types.Position(LINE, COL)))
    finally:
        session.stores.close()
    return ls, [d.text for d in drafts]


def test_below_the_threshold_nothing_is_shown_but_typing_along_has_the_drafts(
    answer_repo: tuple[Path, Path],  # noqa: F811 (the fixture imported above)
) -> None:
    repo = answer_repo
    always, shown = quiet_server(repo, {})
    assert shown
    quiet, hidden = quiet_server(repo, {"showWhen": "confident", "showThreshold": 1.0})
    assert hidden == []
    key = doc_key(repo[0].as_uri())
    assert quiet.drafts.cache.entry(key) is not None  # the next keystroke can show them
    sure, again = quiet_server(repo, {"showWhen": "confident", "showThreshold": 0.0})
    assert again == shown


def test_show_when_confident_shows_from_the_threshold_up() -> None:
    confident = DecodingSettings(show_when="confident", show_threshold=0.4)
    assert shows(0.4, confident) and not shows(0.39, confident)
    assert shows(0.0, DecodingSettings())  # always, the default
