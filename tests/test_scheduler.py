"""The server's scheduling on its own: no model, no stdio; jobs are plain functions."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

import pytest

from lsp_server.runtime.scheduler import Scheduler

WAIT_S = 5.0  # a bound on every wait, so that a broken scheduler fails instead of hanging


def blocking_job(
    started: threading.Event, release: threading.Event, seen: list[str], name: str
) -> Callable[[threading.Event], str]:
    """A job that says it started, then runs until released or cancelled."""

    def job(cancel: threading.Event) -> str:
        started.set()
        deadline = time.monotonic() + WAIT_S
        while not release.is_set() and not cancel.is_set() and time.monotonic() < deadline:
            release.wait(0.005)
        seen.append(f"{name}: {'cancelled' if cancel.is_set() else 'done'}")
        return name

    return job


async def test_a_newer_request_supersedes_the_older_one_for_its_document() -> None:
    scheduler = Scheduler()
    started, release, seen = threading.Event(), threading.Event(), []
    older = asyncio.create_task(
        scheduler.request("doc", blocking_job(started, release, seen, "older"))
    )
    assert await asyncio.to_thread(started.wait, WAIT_S)
    scheduler.supersede("doc")  # what the server does when the newer request arrives
    newer = asyncio.create_task(scheduler.request("doc", lambda cancel: "newer"))
    assert await asyncio.wait_for(older, WAIT_S) is None  # its answer is dropped
    assert await asyncio.wait_for(newer, WAIT_S) == "newer"
    assert seen == ["older: cancelled"]  # the job saw its cancel event between steps
    assert scheduler.counters["superseded"] == 1


async def test_requests_for_other_documents_queue_on_one_thread_in_order() -> None:
    scheduler = Scheduler()
    started, release, seen = threading.Event(), threading.Event(), []
    threads: list[str] = []

    def quick(cancel: threading.Event) -> str:
        threads.append(threading.current_thread().name)
        return "b"

    first = asyncio.create_task(scheduler.request("a", blocking_job(started, release, seen, "a")))
    assert await asyncio.to_thread(started.wait, WAIT_S)
    second = asyncio.create_task(scheduler.request("b", quick))
    await asyncio.sleep(0.05)
    assert not second.done()  # waits for the engine thread, not superseded
    release.set()
    assert await asyncio.wait_for(first, WAIT_S) == "a"
    assert await asyncio.wait_for(second, WAIT_S) == "b"
    assert scheduler.counters["superseded"] == 0 and threads[0].startswith("decode")


async def test_a_debounced_request_replaced_meanwhile_never_runs() -> None:
    scheduler = Scheduler()
    ran: list[str] = []
    older = asyncio.create_task(
        scheduler.request("doc", lambda cancel: ran.append("older"), debounce_s=0.2)
    )
    await asyncio.sleep(0.02)
    scheduler.supersede("doc")
    newer = scheduler.request("doc", lambda cancel: ran.append("newer") or "newer")
    assert await asyncio.wait_for(newer, WAIT_S) == "newer"
    assert await asyncio.wait_for(older, WAIT_S) is None
    assert ran == ["newer"] and scheduler.counters["debounced"] == 1


async def test_cancelling_the_request_task_stops_its_job() -> None:
    """$/cancelRequest: pygls cancels the handler's task; the job must stop too."""
    scheduler = Scheduler()
    started, release, seen = threading.Event(), threading.Event(), []
    task = asyncio.create_task(scheduler.request("doc", blocking_job(started, release, seen, "x")))
    assert await asyncio.to_thread(started.wait, WAIT_S)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    done = scheduler.request("doc", lambda cancel: "after")  # queued behind the stopped job
    assert await asyncio.wait_for(done, WAIT_S) == "after"
    assert seen == ["x: cancelled"]


async def test_closing_a_document_drops_its_answer() -> None:
    scheduler = Scheduler()
    started, release, seen = threading.Event(), threading.Event(), []
    task = asyncio.create_task(scheduler.request("doc", blocking_job(started, release, seen, "x")))
    assert await asyncio.to_thread(started.wait, WAIT_S)
    scheduler.supersede("doc")  # didClose
    assert await asyncio.wait_for(task, WAIT_S) is None
    scheduler.supersede("doc")  # nothing in flight any more: nothing counted
    assert scheduler.counters["superseded"] == 1


async def test_a_request_or_a_newer_warm_up_cancels_the_warm_up() -> None:
    scheduler = Scheduler()
    outcomes: list[bool] = []
    started = threading.Event()

    def warm_up(cancel: threading.Event) -> None:
        started.set()
        outcomes.append(cancel.wait(WAIT_S))  # True: cancelled before the timeout

    scheduler.warm(warm_up)
    assert await asyncio.to_thread(started.wait, WAIT_S)
    assert await asyncio.wait_for(scheduler.request("doc", lambda c: "r"), WAIT_S) == "r"
    started.clear()
    scheduler.warm(warm_up)
    assert await asyncio.to_thread(started.wait, WAIT_S)
    scheduler.warm(lambda cancel: outcomes.append(cancel.is_set()))  # replaces the running one
    await asyncio.wait_for(asyncio.to_thread(scheduler.submit(lambda: None).result), WAIT_S)
    assert outcomes == [True, True, False]


def test_the_step_hook_runs_at_every_cancellation_check() -> None:
    scheduler = Scheduler()
    event = threading.Event()
    assert scheduler.cancel_check(event)() is False
    calls: list[int] = []
    scheduler.step_hook = lambda: calls.append(1)
    check = scheduler.cancel_check(event)
    assert check() is False
    event.set()
    assert check() is True and len(calls) == 2


def test_a_failing_engine_job_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    scheduler = Scheduler()

    def broken() -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="lsp_server.runtime.scheduler"):
        future = scheduler.submit(broken)
        with pytest.raises(RuntimeError):
            future.result(WAIT_S)
        assert scheduler.submit(lambda: "next").result(WAIT_S) == "next"  # the thread lives on
    assert any(r.exc_info and "boom" in str(r.exc_info[1]) for r in caplog.records)


async def test_store_work_runs_beside_the_engine_thread() -> None:
    scheduler = Scheduler()
    started, release, seen = threading.Event(), threading.Event(), []
    busy = asyncio.create_task(scheduler.request("doc", blocking_job(started, release, seen, "x")))
    assert await asyncio.to_thread(started.wait, WAIT_S)
    name = await asyncio.wait_for(
        scheduler.on_store_thread(lambda: threading.current_thread().name), WAIT_S
    )
    assert name.startswith("store")  # did not wait for the busy engine thread
    release.set()
    assert await asyncio.wait_for(busy, WAIT_S) == "x"


async def test_a_request_at_the_same_place_joins_the_one_in_flight() -> None:
    """Both are answered from one run of the job; a request elsewhere joins nothing."""
    scheduler = Scheduler()
    started, release, seen = threading.Event(), threading.Event(), []
    job = blocking_job(started, release, seen, "drafts")
    older = asyncio.create_task(scheduler.request("doc", job, place="here"))
    assert await asyncio.to_thread(started.wait, WAIT_S)
    assert scheduler.join("doc", ["there"]) is None and scheduler.join("other", ["here"]) is None
    joined = scheduler.join("doc", ["there", "here"])
    assert joined is not None
    release.set()
    assert await asyncio.wait_for(older, WAIT_S) == "drafts"
    assert await asyncio.wait_for(joined, WAIT_S) == "drafts"
    assert seen == ["drafts: done"] and scheduler.counters["joined"] == 1


async def test_a_joined_job_runs_on_when_the_older_request_is_cancelled() -> None:
    """$/cancelRequest for the older of two requests at one place (what an editor sends when
    it asks again) stops its wait, not the decode the newer one waits for."""
    scheduler = Scheduler()
    started, release, seen = threading.Event(), threading.Event(), []
    job = blocking_job(started, release, seen, "drafts")
    older = asyncio.create_task(scheduler.request("doc", job, place="here"))
    assert await asyncio.to_thread(started.wait, WAIT_S)
    joining = scheduler.join("doc", ["here"])
    assert joining is not None
    joined = asyncio.ensure_future(joining)
    await asyncio.sleep(0)
    older.cancel()
    with pytest.raises(asyncio.CancelledError):
        await older
    await asyncio.sleep(0.05)
    assert seen == []  # still decoding
    release.set()
    assert await asyncio.wait_for(joined, WAIT_S) == "drafts"
    assert seen == ["drafts: done"]


async def test_a_newer_request_elsewhere_answers_the_joined_ones_with_nothing() -> None:
    scheduler = Scheduler()
    started, release, seen = threading.Event(), threading.Event(), []
    older = asyncio.create_task(
        scheduler.request("doc", blocking_job(started, release, seen, "old"), place="here")
    )
    assert await asyncio.to_thread(started.wait, WAIT_S)
    joined = scheduler.join("doc", ["here"])
    assert joined is not None
    scheduler.supersede("doc")  # a request at another place came
    assert await asyncio.wait_for(older, WAIT_S) is None
    assert await asyncio.wait_for(joined, WAIT_S) is None
    assert seen == ["old: cancelled"]
    assert scheduler.join("doc", ["here"]) is None  # nothing in flight to join now


async def test_a_cancelled_request_is_not_joined() -> None:
    """Once no one waits for a request its job stops: a newer request at its place decodes."""
    scheduler = Scheduler()
    started, release, seen = threading.Event(), threading.Event(), []
    task = asyncio.create_task(
        scheduler.request("doc", blocking_job(started, release, seen, "x"), place="here")
    )
    assert await asyncio.to_thread(started.wait, WAIT_S)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert scheduler.join("doc", ["here"]) is None
