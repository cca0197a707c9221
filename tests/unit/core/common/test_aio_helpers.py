"""orbitmq.common.aio: stopping background tasks and periodic runs."""

from __future__ import annotations

import asyncio
import logging

import pytest

from orbitmq.common.aio import cancel_and_wait, periodic


async def test_cancel_and_wait_stops_every_task_and_skips_none() -> None:
    finished: list[str] = []

    async def forever(name: str) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            finished.append(name)

    tasks = [asyncio.create_task(forever(n)) for n in ("a", "b")]
    await asyncio.sleep(0)
    await cancel_and_wait(tasks[0], None, tasks[1])
    assert sorted(finished) == ["a", "b"]
    assert all(t.cancelled() for t in tasks)
    await cancel_and_wait()  # nothing to do
    await cancel_and_wait(None)


async def test_cancel_and_wait_logs_a_task_that_had_failed(caplog: pytest.LogCaptureFixture) -> None:
    async def boom() -> None:
        raise RuntimeError("kaput")

    task = asyncio.create_task(boom(), name="boomTask")
    await asyncio.sleep(0)
    with caplog.at_level(logging.ERROR, logger="orbitmq.common.aio"):
        await cancel_and_wait(task)  # does not raise: a shutdown goes on
    assert "boomTask" in caplog.text and "kaput" in caplog.text


async def test_cancel_and_wait_lets_the_callers_own_cancellation_through() -> None:
    stubborn_started = asyncio.Event()
    release = asyncio.Event()

    async def stubborn() -> None:
        stubborn_started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await release.wait()  # slow cleanup
            raise

    child = asyncio.create_task(stubborn())
    await stubborn_started.wait()
    waiter = asyncio.create_task(cancel_and_wait(child))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.sleep(0.01)
    assert not waiter.done()  # it still waits for the child's cleanup …
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await waiter  # … and then re-raises its own cancellation instead of swallowing it
    assert child.cancelled()


async def test_periodic_runs_sync_and_async_functions_and_survives_failures() -> None:
    calls: list[str] = []
    enough = asyncio.Event()

    def record(what: str) -> None:
        calls.append(what)
        if calls.count("sync") >= 3 and calls.count("async") >= 3:
            enough.set()

    def sync_fn() -> None:
        record("sync")
        if len(calls) == 1:
            raise ValueError("first run fails")

    async def async_fn() -> None:
        record("async")

    t1 = asyncio.create_task(periodic(0.001, sync_fn, what="sync", initial_delay=0))
    t2 = asyncio.create_task(periodic(lambda: 0.001, async_fn, what="async"))
    await enough.wait()
    await cancel_and_wait(t1, t2)
    assert t1.cancelled() and t2.cancelled()


async def test_periodic_reads_a_callable_interval_before_every_sleep() -> None:
    intervals = iter([0.0, 0.0, 0.0, 3600.0])
    reads: list[int] = []
    runs = asyncio.Queue[None]()

    def interval() -> float:
        reads.append(1)
        return next(intervals)

    task = asyncio.create_task(periodic(interval, lambda: runs.put_nowait(None), what="x", initial_delay=0))
    for _ in range(3):
        await runs.get()
    await asyncio.sleep(0)
    await cancel_and_wait(task)
    assert len(reads) >= 3  # one read per sleep, so a runtime change applies to the next period


async def test_cancel_and_wait_cancels_again_a_task_that_swallowed_the_first() -> None:
    """Python 3.11's asyncio.wait_for can lose a cancellation that races its inner call's end; a
    loop around such a call goes on. One cancel and one await would then wait forever."""
    swallowed: list[int] = []

    async def loop_that_loses_one_cancellation() -> None:
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed.append(1)  # as wait_for returning its result instead of raising

    task = asyncio.create_task(loop_that_loses_one_cancellation())
    await asyncio.sleep(0)
    await asyncio.wait_for(cancel_and_wait(task, recancel_every=0.05), timeout=5)
    assert swallowed == [1] and task.cancelled()


async def test_periodic_ends_when_a_run_swallowed_its_cancellation() -> None:
    runs: list[int] = []

    async def run_that_loses_a_cancellation() -> None:
        runs.append(1)
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            pass  # as wait_for returning its result instead of raising

    task = asyncio.create_task(periodic(0.01, run_that_loses_a_cancellation, what="probe", initial_delay=0))
    await asyncio.sleep(0.01)
    await asyncio.wait_for(cancel_and_wait(task), timeout=5)  # one cancel is enough
    assert runs == [1] and task.cancelled()
