"""Small asyncio helpers the servers share: stopping background tasks and running periodic work.

Every service owns a few long-lived tasks (scans, persist loops, revive, delivery timers) and
stops them the same way on shutdown; these helpers keep that one correct implementation.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any

log = logging.getLogger(__name__)

Interval = float | Callable[[], float]


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None, recancel_every: float | None = None) -> None:
    """Cancel ``tasks`` and wait until each has finished; None entries are skipped.

    Waiting through gather (not ``suppress(CancelledError)``) keeps a cancellation of the
    *caller* propagating. A task that had already died of another error is logged, not
    re-raised, so one failed background task never aborts a shutdown half-way.

    ``recancel_every`` (seconds) cancels a task again while it runs on: for loops around
    ``asyncio.wait_for`` with nothing to clean up. Python 3.11's wait_for can swallow a
    cancellation that arrives as its inner call completes, and the loop would go on while a single
    await of it waited forever (a proxy worker once outlived its stop so). Not the default: a
    second cancellation would cut short a task's cleanup after its first.
    """
    pending = [task for task in tasks if task is not None]
    if not pending:
        return
    for task in pending:
        task.cancel()
    if recancel_every is not None:
        await _cancel_until_done(pending, recancel_every)
    results = await asyncio.gather(*pending, return_exceptions=True)
    for task, result in zip(pending, results, strict=True):
        if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
            name = task.get_name() if isinstance(task, asyncio.Task) else repr(task)
            log.error("background task %s had failed: %r", name, result, exc_info=result)


async def _cancel_until_done(pending: list[asyncio.Future[Any]], every: float) -> None:
    """Cancel again every ``every`` seconds until all ``pending`` ended; a cancellation of the caller
    meanwhile is raised once they have."""
    caller_cancelled = False
    while not all(task.done() for task in pending):
        try:
            await asyncio.wait(pending, timeout=every)
        except asyncio.CancelledError:
            caller_cancelled = True
        for task in pending:
            if not task.done():
                task.cancel()
    if caller_cancelled:
        raise asyncio.CancelledError


async def periodic(interval: Interval, fn: Callable[[], Awaitable[Any] | Any], *, what: str,
                   initial_delay: float | None = None) -> None:
    """Run ``fn`` (sync or async) every ``interval`` seconds until cancelled.

    ``interval`` may be a callable, read before every sleep, so a period changed at runtime
    takes effect at once. The first run waits ``initial_delay`` (default: one interval). A
    failing run is logged with ``what`` and the schedule goes on, like a Java
    ScheduledExecutorService task that catches its own Throwable.
    """
    def current() -> float:
        return interval() if callable(interval) else interval

    await asyncio.sleep(current() if initial_delay is None else initial_delay)
    while True:
        try:
            result = fn()
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("%s failed", what)
        _raise_if_cancel_was_swallowed()
        await asyncio.sleep(current())


def _raise_if_cancel_was_swallowed() -> None:
    """A run that returned although its task was asked to stop (Python 3.11's asyncio.wait_for
    returns its inner result when a cancellation races the inner call's end, and the request stays
    counted in Task.cancelling()) ends the loop as the cancellation would have."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class Resumed:
    """Awaiting it continues ``coro``, already stepped once to the value ``first`` it yielded.

    Lets a coroutine whose first step already ran in its caller (the send queue starts a put inline
    so that the append happens at once) finish in a task of its own: every value the coroutine
    yields (futures, or None for a bare yield) is passed up to the task, and what the task sends or
    throws back (results, cancellation) is passed down, as if the task had run it from its start.
    """

    __slots__ = ("_coro", "_first", "_blocking")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first = first
        # A future sets this flag as it yields itself, for the task that receives it, and refuses
        # to be awaited again while it is set. Others may await the same future before our task
        # runs: the flag is taken off now and set again just before the future reaches our task.
        self._blocking = blocking = getattr(first, "_asyncio_future_blocking", None)
        if blocking:
            first._asyncio_future_blocking = False

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self._coro
        value = self._first
        self._first = None
        if self._blocking is not None:
            value._asyncio_future_blocking = self._blocking
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # cancellation included: the coroutine decides
                try:
                    value = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as stop:
                    return stop.value
