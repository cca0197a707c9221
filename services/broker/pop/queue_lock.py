"""QueueLockManager: one pop (or orderly ack) at a time per topic@group@queueId.

A pop reads the pop offset, fetches, writes its checkpoint and then moves the offset; two pops
of the same queue interleaving on the event loop would hand out the same messages twice.
Pops *try* the lock and skip a busy queue (as upstream); acks and invisible-time changes of
orderly handles wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class QueueLockManager:
    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}

    def _lock(self, key: str) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def try_lock(self, key: str) -> bool:
        lock = self._lock(key)
        if lock.locked():
            return False
        await lock.acquire()  # uncontended: returns without yielding
        return True

    def unlock(self, key: str) -> None:
        lock = self._locks.get(key)
        if lock is not None and lock.locked():
            lock.release()

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock = self._lock(key)
        async with lock:
            yield

    def is_locked(self, key: str) -> bool:
        lock = self._locks.get(key)
        return lock is not None and lock.locked()
