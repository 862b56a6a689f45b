"""The engine on the real default model (SmolLM2-135M-Instruct): loaded once per session."""

from __future__ import annotations

import pytest

from lsp_server.engine.api import Engine
from lsp_server.engine.types import DecodeConfig, StopCondition

pytestmark = pytest.mark.model

LOOP = (
    "import os\n\n\ndef list_python_files(root):\n    result = []\n"
    "    for dirpath, dirnames, filenames in os.walk(root):\n        for name in filenames:\n"
    "            if name.endswith('.py'):\n                "
)


def test_k_distinct_sensible_drafts(real_engine: Engine) -> None:
    completion = real_engine.complete(
        LOOP, "superposed", DecodeConfig(k=3), stop=StopCondition(single_line=True)
    )
    texts = [d.text for d in completion.drafts]
    assert len(texts) == 3 and len(set(texts)) == 3
    # The drafts continue the loop body: they use names in scope.
    in_scope = ("result", "name", "dirpath", "os.path")
    assert any(word in text for word in in_scope for text in texts), texts
    assert all(t.strip() for t in texts), texts


def test_greedy_is_deterministic(real_engine: Engine) -> None:
    cfg = DecodeConfig(k=1, max_new_tokens=12)
    first = real_engine.complete(LOOP, "greedy", cfg).drafts
    second = real_engine.complete(LOOP, "greedy", cfg).drafts
    assert first[0].token_ids == second[0].token_ids


def test_healing_after_indentation_gives_non_empty_drafts(real_engine: Engine) -> None:
    text = "def mean(values):\n    "
    stop = StopCondition(single_line=True)
    healed = real_engine.complete(text, "superposed", stop=stop).drafts
    assert len(healed) == 3 and all(d.text.strip() for d in healed), healed
    # The text before the cursor already ends with the indentation: drafts don't repeat it.
    assert all(not d.text.startswith(" ") for d in healed), healed


def test_mid_identifier_completes_the_name(real_engine: Engine) -> None:
    text = "import os\n\npath = os.path.jo"
    drafts = real_engine.complete(text, "greedy", DecodeConfig(k=1, max_new_tokens=4)).drafts
    assert drafts[0].text.startswith("in("), drafts
