"""The server bounds oneDNN's primitive caches before torch loads (issue 51 item 7)."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from lsp_server import cli
from superposed.onednn_caches import CAPACITY, VARIABLES, bound_onednn_caches


def test_unset_capacities_are_bounded_and_a_users_value_is_kept() -> None:
    environ = {VARIABLES[0]: "1024"}
    bound_onednn_caches(environ)
    assert environ == {VARIABLES[0]: "1024", VARIABLES[1]: str(CAPACITY)}


def test_the_server_entry_point_bounds_both_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit):  # --help: the entry point runs and exits before serving
        cli.main(["--help"])
    assert [os.environ.get(name) for name in VARIABLES] == [str(CAPACITY)] * 2


def test_the_server_entry_point_keeps_a_users_capacity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VARIABLES[0], "0")
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert os.environ[VARIABLES[0]] == "0"


def test_the_entry_point_runs_before_torch_is_imported(
    heavy_imports: Callable[..., list[str]],
) -> None:
    # Both libraries read their variable once, at their cache's first use: importing the
    # entry point's module must not bring torch in before main() sets them.
    assert "torch" not in heavy_imports("lsp_server.cli")
