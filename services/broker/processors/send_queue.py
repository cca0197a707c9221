"""The send thread pool's queue, made explicit so broker fast-failure can measure it.

Upstream, sends wait in a bounded queue in front of the send executor, and BrokerFastFailure
looks at the head every 10 ms: a request that waited longer than waitTimeMillsInSendQueue is
answered SYSTEM_BUSY "[TIMEOUT_CLEAN_QUEUE]…"; a full queue answers "[OVERLOAD]…". Producers do
not retry these, which is the point: back-pressure. Upstream also answers every queued send
"[PC_SYNCHRONIZED]…" while a put has held the CommitLog lock longer than
osPageCacheBusyTimeOutMills; OrbitMQ has no such check: its appends run on the event loop, so no
put is ever inside the CommitLog while queued sends are looked at (docs/architecture.md).

While the queue is empty and every worker waits for work, a submitted send would be taken by a
worker in the very next loop iteration, having waited 0 ms, and started right away: ``submit``
then starts the put itself (the same order, checks and results, without the hops through the
queue, the worker and a put task for each send).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import CoroutineType
from typing import Any

from orbitmq.common.aio import Resumed, cancel_and_wait
from orbitmq.remoting.codes import ResponseCode

from .base import RequestError

log = logging.getLogger(__name__)

CLEAN_INTERVAL_SECONDS = 0.010


@dataclass(eq=False)
class _SendTask:
    enqueued: float
    run: Callable[[], Awaitable[Any]]
    future: asyncio.Future[Any]

    def waited_ms(self, now: float) -> int:
        return int((now - self.enqueued) * 1000)


class SendQueue:
    def __init__(self, workers: int, capacity: int, wait_limit_ms: Callable[[], int],
                 fast_failure_enable: bool = True,
                 worker_delay_ms: Callable[[], int] | None = None) -> None:
        self.workers = max(1, workers)
        self.capacity = max(1, capacity)
        self._wait_limit_ms = wait_limit_ms
        self._fast_failure_enable = fast_failure_enable
        self._worker_delay_ms = worker_delay_ms or (lambda: 0)
        self._queue: deque[_SendTask] = deque()
        self._ready = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._inflight: set[asyncio.Future[Any]] = set()
        # Workers blocked waiting for the queue: each has started its last put and yielded after it,
        # so that put has run its first step (the append) already.
        self._idle = 0

    def __len__(self) -> int:
        return len(self._queue)

    def head_wait_ms(self) -> int:
        """How long the oldest queued send has waited (BrokerController#headSlowTimeMills4SendThreadPoolQueue),
        0 when the queue is empty."""
        return self._queue[0].waited_ms(time.monotonic()) if self._queue else 0

    async def start(self) -> None:
        self._ready = asyncio.Event()
        self._tasks = [asyncio.create_task(self._worker(), name=f"SendMessageThread_{i}")
                       for i in range(self.workers)]
        if self._fast_failure_enable:
            self._tasks.append(asyncio.create_task(self._clean_expired(), name="BrokerFastFailure"))

    async def shutdown(self) -> None:
        await cancel_and_wait(*self._tasks)
        self._tasks = []
        if self._inflight:  # appended already: let their flush waits finish before the store closes
            await asyncio.gather(*self._inflight, return_exceptions=True)
        while self._queue:
            self._reject(self._queue.popleft(), ResponseCode.SERVICE_NOT_AVAILABLE, "broker is shutting down")

    async def submit(self, run: Callable[[], Awaitable[Any]]) -> Any:
        queue = self._queue
        if (not queue and self._idle == self.workers and self._worker_delay_ms() <= 0
                and (not self._fast_failure_enable or self._wait_limit_ms() >= 0)):
            # What a worker would do next iteration: nothing is ahead of this send, no put is
            # started but not yet run, it waited 0 ms (never over a non-negative limit; the
            # cleaner, a timer, runs after the woken worker), no test delay.
            return await self._run_now(run)
        if len(queue) >= self.capacity:
            raise RequestError(ResponseCode.SYSTEM_BUSY,
                               "[OVERLOAD]system busy, start flow control for a while")
        task = _SendTask(time.monotonic(), run, asyncio.get_running_loop().create_future())
        queue.append(task)
        self._ready.set()
        return await task.future

    async def _run_now(self, run: Callable[[], Awaitable[Any]]) -> Any:
        """The worker's start of a put, inline: its first step now (the append; under ASYNC_FLUSH
        the whole put), and what is left, if it suspends, in a put task like the worker's."""
        awaitable = run()
        if type(awaitable) is CoroutineType:
            try:
                first = awaitable.send(None)
            except StopIteration as stop:
                return stop.value
            put: asyncio.Future[Any] = asyncio.ensure_future(Resumed(awaitable, first))
        else:
            put = asyncio.ensure_future(awaitable)
        # From here as a worker-started put: tracked for shutdown, and answered through a future of
        # its own so that a cancelled request does not cancel the put (as awaiting task.future).
        task = _SendTask(time.monotonic(), run, asyncio.get_running_loop().create_future())
        self._inflight.add(put)
        put.add_done_callback(self._inflight.discard)
        put.add_done_callback(lambda done, task=task: self._complete(task, done))
        return await task.future

    @staticmethod
    def _reject(task: _SendTask, code: int, remark: str) -> None:
        if not task.future.done():
            task.future.set_exception(RequestError(code, remark))

    def _busy_remark(self, tag: str, task: _SendTask, now: float) -> str:
        return (f"[{tag}]broker busy, start flow control for a while, period in queue: "
                f"{task.waited_ms(now)}ms, size of queue: {len(self._queue)}")

    async def _worker(self) -> None:
        while True:
            while not self._queue:
                self._ready.clear()
                self._idle += 1
                try:
                    await self._ready.wait()
                finally:
                    self._idle -= 1
            task = self._queue.popleft()
            if task.future.done():
                continue
            now = time.monotonic()
            if self._fast_failure_enable and task.waited_ms(now) > self._wait_limit_ms():
                self._reject(task, ResponseCode.SYSTEM_BUSY, self._busy_remark("TIMEOUT_CLEAN_QUEUE", task, now))
                continue
            delay = self._worker_delay_ms()
            if delay > 0:
                await asyncio.sleep(delay / 1000.0)
            # Like upstream's asyncPutMessage: the worker only waits for the append. The store
            # appends synchronously in the put's first step, so starting the put and yielding once
            # keeps queue order, while a SYNC_FLUSH disk wait no longer holds up the next send.
            put = asyncio.ensure_future(task.run())
            self._inflight.add(put)
            put.add_done_callback(self._inflight.discard)
            put.add_done_callback(lambda done, task=task: self._complete(task, done))
            await asyncio.sleep(0)

    @staticmethod
    def _complete(task: _SendTask, put: asyncio.Future[Any]) -> None:
        if task.future.done():
            return
        if put.cancelled():
            task.future.cancel()
        elif put.exception() is not None:  # handed to the waiting processor, which the guard answers
            task.future.set_exception(put.exception())
        else:
            task.future.set_result(put.result())

    async def _clean_expired(self) -> None:
        while True:
            await asyncio.sleep(CLEAN_INTERVAL_SECONDS)
            try:
                now = time.monotonic()
                limit = self._wait_limit_ms()
                while self._queue and self._queue[0].waited_ms(now) > limit:
                    task = self._queue.popleft()
                    self._reject(task, ResponseCode.SYSTEM_BUSY, self._busy_remark("TIMEOUT_CLEAN_QUEUE", task, now))
            except Exception:
                log.exception("broker fast failure check failed")
