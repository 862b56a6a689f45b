"""``superposed-lsp complete`` reads the server's settings: the same defaults, any setting."""

from __future__ import annotations

import pytest

from lsp_server.cli import CliError, build_parser, cli_settings
from lsp_server.settings import Settings

CURSOR = ["complete", "f.py", "--line", "0", "--col", "0"]


def settings_of(*flags: str) -> Settings:
    return cli_settings(build_parser().parse_args([*CURSOR, *flags]))


def test_without_flags_the_cli_has_the_servers_defaults() -> None:
    server = Settings()
    cli = settings_of()
    assert cli.decoding == server.decoding  # k, maxNewTokens, lineMode, memory, ...
    assert cli.stores == server.stores
    assert cli.model.model == server.model.model and cli.model.compile == "off"


def test_flags_and_settings_set_server_settings() -> None:
    cli = settings_of(
        "-k", "2", "--max-new-tokens", "7", "--multi-line", "--settings", '{"memory": false}'
    )
    assert (cli.decoding.k, cli.decoding.max_new_tokens) == (2, 7)
    assert cli.decoding.line_mode == "multi" and cli.decoding.memory is False
    flag_wins = settings_of("-k", "4", "--settings", '{"k": 1, "alpha": 0.2}')
    assert (flag_wins.decoding.k, flag_wins.decoding.alpha) == (4, 0.2)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["-k", "0"], "invalid superposed.k = 0"),
        (["--settings", '{"noSuch": 1}'], "unknown setting superposed.noSuch"),
        (["--settings", "[1]"], "--settings takes a JSON object"),
    ],
)
def test_an_invalid_setting_is_an_error_not_a_default(flags: list[str], message: str) -> None:
    with pytest.raises(CliError, match=message):
        settings_of(*flags)
