"""The engine's option names: one torch-free module for the settings, the CLI and the engine."""

from __future__ import annotations

from collections.abc import Callable

from lsp_server import settings
from lsp_server.cli import build_parser
from superposed import options


def test_options_settings_and_cli_import_without_torch(
    heavy_imports: Callable[..., list[str]],
) -> None:
    modules = ("superposed.options", "lsp_server.settings", "lsp_server.cli")
    assert heavy_imports(*modules) == []


def test_the_engine_serves_every_name_it_offers() -> None:
    from superposed import api, model

    for name in options.METHODS:  # every registered method's function is there
        assert callable(api.find_method(name)), name
    assert (options.AUTO, *model.TORCH_DTYPES) == options.DTYPES


def test_settings_accept_exactly_the_engine_names() -> None:
    engine = {
        options.METHODS,
        options.DEVICES,
        options.DTYPES,
        options.PRECISION_CHOICES,
        options.RUNNERS,
        options.COMPILE_MODES,
        options.MIXES,
        options.FIM_MODES,
    }
    assert engine <= set(settings.CHOICES.values())  # every engine list is a setting's
    for key, names in settings.CHOICES.items():
        for name in names:
            assert settings.parse_settings({key: name})[1] == [], (key, name)
        assert settings.parse_settings({key: "no-such-name"})[1], key


def test_cli_offers_the_engine_names() -> None:
    parser = build_parser()
    cursor = ["complete", "f.py", "--line", "0", "--col", "0"]
    offered = {
        "method": options.METHODS,
        "precision": options.PRECISION_CHOICES,
        "runner": options.RUNNERS,
    }
    for flag, names in offered.items():
        for name in names:
            assert getattr(parser.parse_args([*cursor, f"--{flag}", name]), flag) == name
