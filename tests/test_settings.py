"""Settings: defaults, parsing of the client's camelCase object, one message per bad value."""

from __future__ import annotations

from lsp_server.settings import KEYS, RETIRED, Settings, parse_settings, to_dict


def test_defaults_from_nothing() -> None:
    for options in (None, {}, [], "k=3", {"superposed": {}}):
        settings, errors = parse_settings(options)
        assert settings == Settings() and errors == []


def test_valid_values_in_either_shape() -> None:
    flat = {"k": 5, "method": "beam", "lineMode": "multi", "orders": [4, 2, 3], "userWeight": 0.5}
    for options in (flat, {"superposed": flat}):
        settings, errors = parse_settings(options)
        assert errors == []
        assert settings.decoding.k == 5 and settings.decoding.method == "beam"
        assert settings.decoding.line_mode == "multi"
        assert settings.stores.orders == (2, 3, 4) and settings.stores.user_weight == 0.5


def test_each_invalid_value_is_named_and_falls_back() -> None:
    options = {
        "k": 0,
        "method": "telepathy",
        "alpha": 1.5,
        "temperature": 0,
        "maxNewTokens": True,
        "indexOnSave": "yes",
        "lambdas": {"two": 0.1},
        "colour": "blue",
        "model": "my-model",
    }
    settings, errors = parse_settings(options)
    defaults = Settings()
    assert settings.decoding.k == defaults.decoding.k
    assert settings.decoding.method == defaults.decoding.method
    assert settings.decoding.alpha == defaults.decoding.alpha
    assert settings.decoding.temperature == defaults.decoding.temperature
    assert settings.decoding.max_new_tokens == defaults.decoding.max_new_tokens
    assert settings.stores.index_on_save is True
    assert settings.model.model == "my-model"  # valid values are kept
    joined = "\n".join(errors)
    for key in ("k", "method", "alpha", "temperature", "maxNewTokens", "indexOnSave", "lambdas"):
        assert f"superposed.{key} =" in joined, key
    assert "'telepathy'" in joined and "unknown setting superposed.colour" in joined
    assert len(errors) == 8


def test_prompt_sizes_take_0_or_at_least_16_tokens_and_say_what_0_means() -> None:
    settings, errors = parse_settings({"maxPromptTokens": 0, "firstPromptTokens": 16})
    assert (settings.decoding.max_prompt_tokens, settings.decoding.first_prompt_tokens) == (0, 16)
    assert errors == []
    settings, errors = parse_settings({"maxPromptTokens": 8, "firstPromptTokens": True})
    assert settings.decoding.max_prompt_tokens == Settings().decoding.max_prompt_tokens
    assert settings.decoding.first_prompt_tokens == Settings().decoding.first_prompt_tokens
    (too_few,) = [e for e in errors if "superposed.maxPromptTokens" in e]
    (not_a_number,) = [e for e in errors if "superposed.firstPromptTokens" in e]
    assert "use 0 (all the model's context) or a whole number >= 16" in too_few
    assert "use 0 (off: always the full window) or a whole number >= 16" in not_a_number


def test_lambdas_must_match_orders() -> None:
    settings, errors = parse_settings({"orders": [2, 3], "lambdas": {"2": 0.2, "3": 0.3, "6": 1}})
    assert settings.decoding.lambdas == {2: 0.2, 3: 0.3}
    assert len(errors) == 1 and "[6]" in errors[0]
    settings, errors = parse_settings({"orders": [2, 3]})  # default lambdas cover 2..6
    assert set(settings.decoding.lambdas) == {2, 3}


def test_to_dict_round_trips() -> None:
    settings, _ = parse_settings({"k": 4, "codebaseDb": "/tmp/x.sqlite", "orders": [2, 4]})
    again, errors = parse_settings(to_dict(settings))
    assert errors == [] and again == settings


def test_the_compile_setting() -> None:
    assert Settings().model.compile == "background"  # the server compiles unless told not to
    settings, errors = parse_settings({"compile": "off"})
    assert settings.model.compile == "off" and errors == []
    settings, errors = parse_settings({"compile": "eager"})
    assert settings.model.compile == "background"
    assert len(errors) == 1 and "superposed.compile =" in errors[0] and "'eager'" in errors[0]


def test_the_prefill_copy_setting() -> None:
    assert Settings().model.prefill_copy is False  # the 600 MB footprint target (issue 14)
    settings, errors = parse_settings({"prefillCopy": True})
    assert settings.model.prefill_copy is True and errors == []
    settings, errors = parse_settings({"prefillCopy": "yes"})
    assert settings.model.prefill_copy is False
    assert len(errors) == 1 and "superposed.prefillCopy =" in errors[0]


def test_line_mode_auto_is_the_default_and_max_lines_is_bounded() -> None:
    settings, errors = parse_settings({})
    assert settings.decoding.line_mode == "auto" and settings.decoding.max_lines == 8
    settings, errors = parse_settings({"lineMode": "auto", "maxLines": 3})
    assert errors == [] and settings.decoding.max_lines == 3
    settings, errors = parse_settings({"lineMode": "blocks", "maxLines": 0})
    assert settings.decoding.line_mode == "auto" and settings.decoding.max_lines == 8
    assert len(errors) == 2 and "superposed.maxLines = 0" in "\n".join(errors)


def test_engine_fields_marked_as_settings_are_settings() -> None:
    """A DecodeConfig field made with ``setting`` is a client setting, parsed within its bounds
    or choices, with no row of its own in the server's table (issue 26: a new engine setting
    is declared once)."""
    from dataclasses import fields

    from superposed.types import DecodeConfig

    marked = {f.name: f for f in fields(DecodeConfig) if "setting" in f.metadata}
    assert {"k", "alpha", "mix", "temperature", "memory_seed", "branch"} <= set(marked)
    for name, spec_field in marked.items():
        key = name.split("_")[0] + "".join(w.title() for w in name.split("_")[1:])
        spec = spec_field.metadata["setting"]
        default = spec_field.default
        if spec.choices:
            good, bad = spec.choices[-1], "no-such-choice"
        elif isinstance(default, bool):
            good, bad = not default, "yes"
        else:
            good, bad = spec.high, spec.high + 1
        settings, errors = parse_settings({key: good})
        assert errors == [] and getattr(settings.decoding, name) == good, key
        settings, errors = parse_settings({key: bad})
        assert len(errors) == 1 and f"superposed.{key} =" in errors[0], key
        assert getattr(settings.decoding, name) == default
    # A field not marked is the engine's alone: a client cannot set it.
    _, errors = parse_settings({"delta": 5.0})
    assert errors and "unknown setting superposed.delta" in errors[0]


def test_non_finite_numbers_are_refused_everywhere() -> None:
    """Issue 34 item 7: NaN or Infinity (which Python's JSON reader accepts) in a weight was
    taken, and every request then answered nothing."""
    nan, inf = float("nan"), float("inf")
    for options in (
        {"lambdas": {"2": nan}},
        {"lambdas": {"3": inf}},
        {"alpha": nan},
        {"userWeight": -inf},
        {"temperature": inf},
    ):
        settings, errors = parse_settings(options)
        (key,) = options
        assert len(errors) == 1 and f"superposed.{key} =" in errors[0], errors
        assert "using the default" in errors[0]
        assert settings == parse_settings({})[0]  # each one keeps its default
    settings, _ = parse_settings({"lambdas": {"2": nan, "3": 0.2}})
    assert settings.decoding.lambdas == Settings().decoding.lambdas


def test_temperature_is_bounded_away_from_zero() -> None:
    """Issue 34 item 7: 1e-300 was inside (0, 100] and overflowed every logit to inf."""
    settings, errors = parse_settings({"temperature": 1e-300})
    assert settings.decoding.temperature == Settings().decoding.temperature
    assert len(errors) == 1 and "superposed.temperature = 1e-300" in errors[0]
    settings, errors = parse_settings({"temperature": 1e-3})
    assert errors == [] and settings.decoding.temperature == 1e-3


def test_store_paths_the_file_system_cannot_open_are_refused() -> None:
    """Issue 34 item 7: a NUL or a 5,000-character name was accepted, and every request then
    failed with -32603 (embedded null byte, File name too long)."""
    for key in ("codebaseDb", "userDb"):
        for bad, why in (
            ("/tmp/a\0b.sqlite", "NUL"),
            ("/tmp/" + "x" * 5000, "4096 bytes"),
            ("/tmp/" + "x" * 256 + "/s.sqlite", "255 bytes"),
        ):
            settings, errors = parse_settings({key: bad})
            assert settings.stores == Settings().stores
            assert len(errors) == 1 and f"superposed.{key} =" in errors[0] and why in errors[0]
        good = "/tmp/" + "x" * 255 + "/s.sqlite"
        settings, errors = parse_settings({key: good})
        assert errors == [] and good in (settings.stores.codebase_db, settings.stores.user_db)


def test_a_retired_setting_is_named_in_one_line_and_ignored() -> None:
    """Issue 53: settings retired with what they switched on are ignored with one message
    naming the setting (not the whole list of known ones), and the others still apply."""
    assert RETIRED and not set(RETIRED) & set(KEYS)
    for key in RETIRED:
        settings, errors = parse_settings({key: 0.5, "k": 2})
        assert settings.decoding.k == 2 and settings == parse_settings({"k": 2})[0]
        assert len(errors) == 1 and "\n" not in errors[0], errors
        assert f"superposed.{key} is retired" in errors[0] and "ignored" in errors[0]


def test_research_knobs_apply_flat_or_inside_the_research_object() -> None:
    """Issue 53 item 5: VS Code shows the research knobs as one ``research`` object; the
    server takes them inside it (the object wins over a flat one) and flat, as before."""
    from lsp_server.settings import RESEARCH

    inside, errors = parse_settings({"research": {"alpha": 0.3, "method": "greedy"}, "k": 2})
    assert errors == [] and inside.decoding.alpha == 0.3 and inside.decoding.method == "greedy"
    assert inside == parse_settings({"alpha": 0.3, "method": "greedy", "k": 2})[0]
    both, _ = parse_settings({"alpha": 0.1, "research": {"alpha": 0.2}})
    assert both.decoding.alpha == 0.2
    # The orders check reads lambdas sent inside the object too.
    _, errors = parse_settings({"research": {"orders": [2, 3], "lambdas": {"2": 0.1, "5": 1}}})
    assert len(errors) == 1 and "orders [5]" in errors[0]
    assert set(RESEARCH) <= set(KEYS)


def test_the_research_object_names_what_it_refuses_and_keeps_the_rest() -> None:
    settings, errors = parse_settings({"research": {"k": 5, "alpha": 0.2}})
    assert settings.decoding.k == Settings().decoding.k and settings.decoding.alpha == 0.2
    assert len(errors) == 1 and "superposed.research.k" in errors[0] and "alpha" in errors[0]
    settings, errors = parse_settings({"research": 3, "k": 2})
    assert settings.decoding.k == 2 and len(errors) == 1 and "research = 3" in errors[0]
    assert parse_settings({"research": None}) == (Settings(), [])
    _, errors = parse_settings({"research": {"verify": True}})
    assert len(errors) == 1 and "superposed.verify is retired" in errors[0]


def test_the_editors_own_settings_are_not_reported() -> None:
    """A client that sends its whole ``superposed`` section (VS Code's pythonPath, languages,
    trace.server among the server's) is not told they are unknown."""
    settings, errors = parse_settings(
        {"pythonPath": "/usr/bin/python3", "languages": ["python"], "trace": {"server": "off"}}
    )
    assert errors == [] and settings == Settings()
