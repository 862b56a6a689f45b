"""The prompt plan: one request works out its window, budget and preamble once."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from lsp_server.completion import decode
from lsp_server.cursor import CursorContext
from lsp_server.settings import DecodingSettings
from superposed.api import Engine

PREAMBLE = "# file: pkg/util.py\ndef scale(value, factor=2):\n    return value * factor\n\n"


def counted_calls(monkeypatch: pytest.MonkeyPatch, tokenizer: Any) -> Counter[str]:
    """The tokenizer's calls from now on, by the text they tokenized."""
    calls: Counter[str] = Counter()
    call = type(tokenizer).__call__

    def counting(self: Any, text: Any, *args: Any, **kwargs: Any) -> Any:
        calls[text if isinstance(text, str) else repr(text)] += 1
        return call(self, text, *args, **kwargs)

    monkeypatch.setattr(type(tokenizer), "__call__", counting)
    return calls


def test_a_request_tokenizes_the_preamble_once(
    tiny_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold cache builds two prompts (the full window's, then the short recent one's);
    the preamble's tokens are counted once for both (it used to be up to 4 times)."""
    before = "".join(f"total_{i} = scale(total_{i - 1})\n" for i in range(60)) + "x = "
    context = CursorContext(before, "", preamble=PREAMBLE)
    settings = DecodingSettings(max_new_tokens=4, first_prompt_tokens=32, k=2)
    calls = counted_calls(monkeypatch, tiny_engine.tokenizer)
    answer = decode(tiny_engine, context, settings)
    assert answer.short_window  # both prompts were built
    assert calls[PREAMBLE] == 1
