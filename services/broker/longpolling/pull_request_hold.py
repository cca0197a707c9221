"""RocketMQ's PullRequestHoldService on asyncio.

A pull that found nothing and carries the suspend flag is parked under "topic@queueId"
instead of being answered. The store's arrival listener (ReputMessageService upstream) calls
``notify_message_arriving`` for every dispatched record, so a parked pull whose filter matches
is released at once; a periodic check (every 5 s with long polling, ``shortPollingTimeMills``
without) catches anything missed and releases requests whose hold time is up.

Releasing resolves the future the suspended processor coroutine awaits; that coroutine then
re-runs the pull without permission to suspend again and answers the client, so the
Remoting layer needs no out-of-band write path.

A pull whose client connection closes leaves the table at once (``drop_channel`` from the
channel's close hook, ``remove`` when the waiting processor is cancelled): nobody is left to
answer, and holding it for the rest of its hold time would only pin its memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orbitmq.common.aio import cancel_and_wait

log = logging.getLogger(__name__)

TOPIC_QUEUEID_SEPARATOR = "@"


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(eq=False)
class PullRequest:
    """One parked pull; ``woken`` resolves to True on a match and False on hold timeout."""

    topic: str
    queue_id: int
    pull_from_this_offset: int
    timeout_millis: int
    message_filter: Any
    suspend_timestamp: int = field(default_factory=_now_ms)
    woken: asyncio.Future[bool] | None = None
    client_channel: Any = None

    @property
    def deadline_ms(self) -> int:
        return self.suspend_timestamp + self.timeout_millis

    def release(self, matched: bool) -> None:
        if self.woken is not None and not self.woken.done():
            self.woken.set_result(matched)


MaxOffsetFn = Callable[[str, int], int]
MatchFn = Callable[[Any, int | None, dict[str, str] | None], bool]


class PullRequestHoldService:
    def __init__(self, max_offset_in_queue: MaxOffsetFn, matcher: MatchFn, long_polling_enable: bool = True,
                 short_polling_time_mills: int = 1000, check_interval_mills: int = 5000) -> None:
        self._max_offset = max_offset_in_queue
        self._matcher = matcher
        self.long_polling_enable = long_polling_enable
        self.short_polling_time_mills = short_polling_time_mills
        self.check_interval_mills = check_interval_mills
        self.pull_request_table: dict[str, list[PullRequest]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._kick = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @staticmethod
    def build_key(topic: str, queue_id: int) -> str:
        return f"{topic}{TOPIC_QUEUEID_SEPARATOR}{queue_id}"

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._kick = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="PullRequestHoldService")

    async def shutdown(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        for requests in self.pull_request_table.values():
            for request in requests:
                request.release(False)
        self.pull_request_table.clear()

    def suspend_pull_request(self, request: PullRequest) -> asyncio.Future[bool]:
        """Parks a request; the returned future resolves when it should be re-executed."""
        loop = self._loop or asyncio.get_running_loop()
        request.woken = loop.create_future()
        self.pull_request_table.setdefault(self.build_key(request.topic, request.queue_id), []).append(request)
        # A short hold must not wait for the next 5 s check to expire.
        self._kick.set()
        return request.woken

    def parked_count(self) -> int:
        return sum(len(v) for v in self.pull_request_table.values())

    def remove(self, request: PullRequest) -> None:
        """Takes a request out of the table (its waiter gave up), releasing it unmatched."""
        request.release(False)
        key = self.build_key(request.topic, request.queue_id)
        requests = self.pull_request_table.get(key)
        if requests is None:
            return
        with contextlib.suppress(ValueError):
            requests.remove(request)
        if not requests:
            del self.pull_request_table[key]

    def drop_channel(self, channel: Any) -> int:
        """Releases and forgets every pull parked by a connection that closed; returns how many."""
        if not self.pull_request_table:
            return 0
        dropped = 0
        for key in list(self.pull_request_table):
            requests = self.pull_request_table[key]
            keep = [r for r in requests if r.client_channel is not channel]
            if len(keep) == len(requests):
                continue
            for request in requests:
                if request.client_channel is channel:
                    request.release(False)
            dropped += len(requests) - len(keep)
            if keep:
                self.pull_request_table[key] = keep
            else:
                del self.pull_request_table[key]
        return dropped

    def arrival_listener(self, topic: str, queue_id: int, logic_offset: int, tags_code: int | None,
                         store_timestamp: int, properties: dict[str, str] | None) -> None:
        """The MessageStore arrival hook; safe to call from the store's dispatch thread."""
        if self._loop is None or not self.pull_request_table:
            return
        if threading.get_ident() == self._loop_thread:
            self.notify_message_arriving(topic, queue_id, logic_offset, tags_code, properties)
        else:
            with contextlib.suppress(RuntimeError):  # loop already closed during shutdown
                self._loop.call_soon_threadsafe(self.notify_message_arriving, topic, queue_id, logic_offset,
                                                tags_code, properties)

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int,
                                tags_code: int | None = None, properties: dict[str, str] | None = None) -> None:
        key = self.build_key(topic, queue_id)
        requests = self.pull_request_table.pop(key, None)
        if not requests:
            return
        keep: list[PullRequest] = []
        now = _now_ms()
        for request in requests:
            if request.woken is None or request.woken.done():
                continue  # the client went away or the processor was cancelled
            newest = max_offset
            if newest <= request.pull_from_this_offset:
                newest = self._safe_max_offset(topic, queue_id)
            if newest > request.pull_from_this_offset:
                try:
                    matched = self._matcher(request.message_filter, tags_code, properties)
                except Exception:
                    log.exception("message filter failed while waking a parked pull on %s", key)
                    matched = True  # let the re-executed pull decide on the real records
                if matched:
                    request.release(True)
                    continue
            if now >= request.deadline_ms:
                request.release(False)
                continue
            keep.append(request)
        if keep:
            self.pull_request_table.setdefault(key, []).extend(keep)

    def notify_master_online(self) -> None:
        """PullRequestHoldService#notifyMasterOnline: every parked pull runs again now, so a
        slave's answer (suggesting the master) reaches its client without waiting out the hold."""
        table, self.pull_request_table = self.pull_request_table, {}
        for requests in table.values():
            for request in requests:
                request.release(True)

    def check_hold_request(self) -> None:
        for key in list(self.pull_request_table):
            topic, sep, queue = key.rpartition(TOPIC_QUEUEID_SEPARATOR)
            if not sep:
                continue
            try:
                queue_id = int(queue)
                self.notify_message_arriving(topic, queue_id, self._safe_max_offset(topic, queue_id))
            except Exception:
                log.exception("check hold request failed, key %s", key)

    def _safe_max_offset(self, topic: str, queue_id: int) -> int:
        try:
            return int(self._max_offset(topic, queue_id))
        except Exception:
            log.exception("max offset lookup failed for %s@%d", topic, queue_id)
            return -1

    def _next_sleep_seconds(self) -> float:
        interval = self.check_interval_mills if self.long_polling_enable else self.short_polling_time_mills
        earliest = min((r.deadline_ms for rs in self.pull_request_table.values() for r in rs), default=None)
        wait = interval
        if earliest is not None:
            wait = min(wait, max(earliest - _now_ms(), 1))
        return wait / 1000.0

    async def _run(self) -> None:
        while True:
            self._kick.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), self._next_sleep_seconds())
            started = time.monotonic()
            self.check_hold_request()
            elapsed = (time.monotonic() - started) * 1000
            if elapsed > 5000:
                log.info("[NOTIFYME] check hold request cost %d ms", elapsed)
