"""The server's session (lsp_server/session.py, loader.py): swapped in whole once the model is
loaded, Loading before and Failed after a failed load, and built with the stores opened before
the model."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pygls.workspace import Workspace

from lsp_server import session as session_module
from lsp_server.runtime.learning import Learning
from lsp_server.runtime.loader import Loader
from lsp_server.runtime.scheduler import Scheduler
from lsp_server.session import Failed, Loading, Session, SessionSlot, describe
from lsp_server.settings import ModelSettings, Settings, StoreSettings
from superposed.types import EngineError


class FakeNotifier:
    """What the loader and the stores' side say, recorded; the event loop is the caller's."""

    def __init__(self) -> None:
        self.statuses: list[tuple[Any, ...]] = []
        self.errors: list[str] = []

    def call_soon(self, callback: Any, *args: Any) -> None:
        callback(*args)

    def status(self, state: str, message: str | None = None, percent: int | None = None) -> None:
        self.statuses.append((state, message))

    def error(self, message: str) -> None:
        self.errors.append(message)

    def info(self, message: str) -> None:
        pass

    def once(self, message: str, kind: Any = None) -> None:
        self.errors.append(message)

    async def progress(self, title: str) -> Any:
        return self

    def begin(self, message: str) -> None:
        pass

    def end(self, message: str) -> None:
        pass


def make_loader(
    tmp_path: Path,
) -> tuple[Loader, Learning, Scheduler, FakeNotifier, list[str], SessionSlot]:
    settings = Settings(
        model=ModelSettings(model="tiny-random"),
        stores=StoreSettings(codebase_db=str(tmp_path / "codebase.sqlite"), user_store=False),
    )
    notifier: Any = FakeNotifier()
    scheduler = Scheduler()
    ready: list[str] = []
    slot = SessionSlot()
    server = SimpleNamespace(settings=settings, workspace=Workspace(None))  # a ServerNow
    learning = Learning(notifier, Counter(), server, slot)
    loader = Loader(scheduler, notifier, learning, slot, server, lambda: ready.append("ready"))
    return loader, learning, scheduler, notifier, ready, slot


def engine_stub(tokenizer: Any) -> Any:
    """What the loader reads of an engine (no model: the swap is under test, not decoding)."""
    return SimpleNamespace(
        name="tiny-random",
        tokenizer=tokenizer,
        max_context=2048,
        compiler=None,
        decode_step=lambda: "eager",
    )


def load(loader: Loader, scheduler: Scheduler) -> None:
    asyncio.run(loader.start())
    scheduler.submit(lambda: None).result(timeout=120)  # the load has run


def test_the_session_is_swapped_in_whole_once_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tokenizer: Any
) -> None:
    loader, learning, scheduler, notifier, ready, slot = make_loader(tmp_path)
    seen: list[Any] = []

    def load_engine(model: ModelSettings, progress: Any = None) -> Any:
        seen.append((slot.state, learning.stores))  # while the model loads
        return engine_stub(tokenizer)

    monkeypatch.setattr(session_module, "load_engine", load_engine)
    load(loader, scheduler)
    session = slot.state
    assert isinstance(session, Session)
    ((during, early_stores),) = seen
    assert isinstance(during, Loading)  # nothing half-loaded is ever seen
    assert early_stores is not None  # saves made while the model loads are learned
    # the stores count with the model's tokenizer: the ones opened early are the session's
    assert session.stores is early_stores is learning.stores
    assert learning.ready.is_set() and ready == ["ready"]
    assert [state for state, _ in notifier.statuses] == ["loading", "ready"]
    assert describe(slot.state, "tiny-random") == (
        session.engine.name,
        session.engine.decode_step(),
    )
    # a reload empties the slot until the new session is in, whole again
    load(loader, scheduler)
    assert isinstance(seen[-1][0], Loading)
    assert isinstance(slot.state, Session) and slot.state is not session


def test_a_failed_load_leaves_no_session_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loader, learning, scheduler, notifier, ready, slot = make_loader(tmp_path)

    def load_engine(model: ModelSettings, progress: Any = None) -> Any:
        raise EngineError("no model named x: check superposed.model")

    monkeypatch.setattr(session_module, "load_engine", load_engine)
    load(loader, scheduler)
    failed = slot.state
    assert isinstance(failed, Failed)
    assert failed.error == "no model named x: check superposed.model"
    assert notifier.errors == [failed.error]
    assert notifier.statuses[-1] == ("error", failed.error)
    assert learning.ready.is_set() and ready == []  # shutdown does not wait for stores
    assert describe(slot.state, "tiny-random") == ("tiny-random", None)


def _safetensor_error() -> Exception:
    from safetensors import SafetensorError

    return SafetensorError("Error while deserializing header: MetadataIncompleteBuffer")


LOAD_FAILURES = [
    pytest.param(_safetensor_error, id="truncated-safetensors"),
    pytest.param(lambda: RuntimeError("set_num_threads expects a positive integer"), id="torch"),
    pytest.param(lambda: ValueError("Unrecognized model in /cache"), id="value"),
    pytest.param(lambda: KeyError("model.embed_tokens.weight"), id="bug"),
]


@pytest.mark.parametrize("failure", LOAD_FAILURES)
def test_a_load_failure_of_any_kind_ends_loading_with_one_message_that_says_what_to_do(
    failure: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only EngineError was caught: a damaged model cache (SafetensorError) or torch's
    RuntimeError left the server "loading" for ever with no message (issue 51)."""
    from lsp_server.runtime import loader as loader_module

    loader, learning, scheduler, notifier, ready, slot = make_loader(tmp_path)
    failed_calls: list[str] = []
    loader._failed = lambda: failed_calls.append("failed")

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise failure()

    monkeypatch.setattr(session_module, "load_engine", fail)
    monkeypatch.setattr(loader_module, "load_store_tokenizer", fail)  # the stores wait
    monkeypatch.setenv("SUPERPOSED_CACHE_DIR", str(tmp_path / "cache"))
    load(loader, scheduler)
    failed = slot.state
    assert isinstance(failed, Failed) and failed.error is not None
    assert type(failure()).__name__ in failed.error
    assert f"delete the folder {tmp_path / 'cache'}" in failed.error  # what to do
    assert notifier.errors == [failed.error]  # one message
    assert notifier.statuses[-1] == ("error", failed.error)
    assert learning.ready.is_set() and ready == [] and failed_calls == ["failed"]
