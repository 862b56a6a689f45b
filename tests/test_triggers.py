"""The trigger rules for automatic requests (lsp_server/triggers.py) and their settings."""

from __future__ import annotations

import pytest

from lsp_server.settings import parse_settings
from lsp_server.triggers import TriggerSettings, refusal


@pytest.mark.parametrize(
    ("settings", "before", "after", "why"),
    [
        (TriggerSettings(), "    ", "", None),  # the defaults refuse nothing
        (TriggerSettings(), "print(", "x))", None),
        (TriggerSettings(trigger="manual"), "    return ", "", "manual trigger"),
        (TriggerSettings(min_prefix_chars=3), "        re", "", "short prefix"),  # indentation
        (TriggerSettings(min_prefix_chars=3), "ret", "", None),
        (TriggerSettings(mid_line="never"), "f(", ")", "mid-line"),
        (TriggerSettings(mid_line="never"), "f(", "  \n", None),  # blanks are no text
        (TriggerSettings(mid_line="end-only"), "f(g(", '"]),:;', None),
        (TriggerSettings(mid_line="end-only"), "f(", "x)", "mid-line"),
    ],
)
def test_refusal(settings: TriggerSettings, before: str, after: str, why: str | None) -> None:
    assert refusal(settings, before, after) == why


def test_trigger_settings_parse_and_fall_back() -> None:
    settings, errors = parse_settings(
        {"trigger": "manual", "minPrefixChars": 2, "midLine": "never"}
    )
    assert errors == []
    assert settings.triggers == TriggerSettings("manual", 2, "never")
    settings, errors = parse_settings({"trigger": "sometimes", "midLine": 1, "minPrefixChars": -1})
    assert len(errors) == 3 and settings.triggers == TriggerSettings()
    assert "auto, manual" in errors[0]
