"""``superposed-lsp complete FILE --db STORE`` uses the store it is given, wherever FILE lies
(issue 51, item 10): outside a git repository it was ignored without a word.

In process, on the tiny random model (``SUPERPOSED_TEST_TINY_MODEL=1``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lsp_server import cli, models
from lsp_server.models import TINY_ENV
from ngram_db import NgramStore, index_repo
from superposed.api import Engine
from superposed.model import LoadedModel

LIBRARY = "def frobnicate_widgets(count, *, colour='blue'):\n    return count\n"
DOCUMENT = "from lib import frobnicate_widgets\n\nfrobnicate_widgets("


@pytest.fixture()
def tiny(monkeypatch: pytest.MonkeyPatch, tiny_loaded: LoadedModel) -> None:
    monkeypatch.setenv(TINY_ENV, "1")
    monkeypatch.setattr(models, "load_engine", lambda settings: Engine(tiny_loaded))


def _complete(path: Path, *flags: str) -> dict[str, object]:
    settings = json.dumps({"userStore": False, "maxNewTokens": 4})
    args = cli.build_parser().parse_args(
        ["complete", str(path), "--line", "2", "--col", "19", "--settings", settings, *flags]
    )
    return cli.run_complete(args)


@pytest.mark.parametrize("in_git", [True, False])
def test_complete_uses_the_store_given_with_db_wherever_the_file_lies(
    tmp_path: Path, tiny: None, tiny_loaded: LoadedModel, in_git: bool
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    if in_git:
        (folder / ".git").mkdir()
    (folder / "lib.py").write_text(LIBRARY)
    (folder / "main.py").write_text(DOCUMENT)
    db = tmp_path / "elsewhere" / "store.sqlite"
    db.parent.mkdir()
    with NgramStore.open(db, tiny_loaded.tokenizer) as store:
        index_repo(folder, store, progress=False)
    result = _complete(folder / "main.py", "--db", str(db))
    assert result["codebase_store"] == str(db)
    drafts = result["drafts"]
    assert isinstance(drafts, list) and drafts
    assert all(d["source"].endswith("+store") for d in drafts)  # the store's n-grams weighed in
    without = _complete(folder / "main.py")
    assert without["codebase_store"] is None  # no store of its own: none was made


def test_complete_with_a_db_that_does_not_exist_says_so(tmp_path: Path, tiny: None) -> None:
    (tmp_path / "main.py").write_text(DOCUMENT)
    missing = tmp_path / "none.sqlite"
    said = "none.sqlite: there is no store at that path; build one with index-repo"
    with pytest.raises(cli.CliError, match=said):
        _complete(tmp_path / "main.py", "--db", str(missing))
    assert not missing.exists()
