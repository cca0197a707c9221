"""What every channel end does when it goes away: tell its close listeners once, and wake those
waiting for it. Shared by the socket Channel and the proxy's in-process LocalChannel."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("orbitmq.remoting")

CloseListener = Callable[[Any], Any]
# Async listeners' tasks, referenced until they end: the loop keeps only weak references to tasks.
_listener_tasks: set[asyncio.Future[Any]] = set()


class CloseNotifying:
    """``is_active``, ``on_close`` and ``wait_closed``; the subclass calls ``_init_closing()`` in its
    constructor and ``_notify_closed()`` once, when it has closed."""

    _closed: bool
    _closed_event: asyncio.Event
    _close_listeners: list[CloseListener]

    def _init_closing(self) -> None:
        self._closed = False
        self._closed_event = asyncio.Event()
        self._close_listeners = []

    @property
    def is_active(self) -> bool:
        return not self._closed

    def on_close(self, listener: CloseListener) -> None:
        """Call ``listener(channel)`` (sync or async) once when the connection goes away."""
        if self._closed:
            self._run_listener(listener)
        else:
            self._close_listeners.append(listener)

    async def wait_closed(self) -> None:
        await self._closed_event.wait()

    def _notify_closed(self) -> None:
        listeners, self._close_listeners = self._close_listeners, []
        for listener in listeners:
            self._run_listener(listener)
        self._closed_event.set()

    def _run_listener(self, listener: CloseListener) -> None:
        try:
            result = listener(self)
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                _listener_tasks.add(task)
                task.add_done_callback(_listener_done)
        except Exception:
            log.exception("close listener failed for %s", self)


def _listener_done(task: asyncio.Future[Any]) -> None:
    _listener_tasks.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.error("close listener failed", exc_info=task.exception())
