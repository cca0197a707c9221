"""Small asyncio helpers the servers share: stopping background tasks and running periodic work.

Every service owns a few long-lived tasks (scans, persist loops, revive, delivery timers) and
stops them the same way on shutdown; these helpers keep that one correct implementation.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

Interval = float | Callable[[], float]


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None) -> None:
    """Cancel ``tasks`` and wait until each has finished; None entries are skipped.

    Waiting through gather (not ``suppress(CancelledError)``) keeps a cancellation of the
    *caller* propagating. A task that had already died of another error is logged, not
    re-raised, so one failed background task never aborts a shutdown half-way.
    """
    pending = [task for task in tasks if task is not None]
    if not pending:
        return
    for task in pending:
        task.cancel()
    results = await asyncio.gather(*pending, return_exceptions=True)
    for task, result in zip(pending, results, strict=True):
        if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
            name = task.get_name() if isinstance(task, asyncio.Task) else repr(task)
            log.error("background task %s had failed: %r", name, result, exc_info=result)


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
        await asyncio.sleep(current())
