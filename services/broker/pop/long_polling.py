"""PopLongPollingService: parks POP and NOTIFICATION requests that found nothing.

A parked request waits on a future; the MessageStore's arrival listener wakes one request per
(topic, group) whose queue and filter match the arrived message, a pop that left messages
behind wakes the next waiter, and an orderly ack wakes a waiter of its queue. Messages
revived into a pop retry topic wake the requests of the topic and group it stands for.
The waiting processor owns its deadline: it stops waiting at pollTime and answers itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orbitmq.broker.processors.filtering import matches
from orbitmq.common.extra_info import build_pop_retry_topic

log = logging.getLogger(__name__)

# BrokerConfig.maxPopPollingSize upstream.
DEFAULT_MAX_POLLING_SIZE = 100_000


@dataclass(eq=False)
class PopRequest:
    topic: str
    group: str
    queue_id: int  # -1: any queue of the topic
    message_filter: Any
    woken: asyncio.Future[bool] = field(repr=False, default=None)  # type: ignore[assignment]
    # A NOTIFICATION waiter takes nothing, so every one of them is woken, not just one.
    notification: bool = False

    def release(self, matched: bool) -> bool:
        if self.woken is not None and not self.woken.done():
            self.woken.set_result(matched)
            return True
        return False


class PopLongPollingService:
    def __init__(self, max_polling_size: int = DEFAULT_MAX_POLLING_SIZE,
                 matcher: Callable[[Any, int | None, dict[str, str] | None], bool] = matches) -> None:
        self.max_polling_size = max_polling_size
        self._matcher = matcher
        # topic -> group -> waiters, so an arrival only looks at its own topic's waiters.
        self._table: dict[str, dict[str, list[PopRequest]]] = {}
        # "%RETRY%group_topic" -> (topic, group), learnt from the requests that park.
        self._retry_topics: dict[str, tuple[str, str]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._count = 0
        self.stopped = False

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self.stopped = False

    def shutdown(self) -> None:
        self.stopped = True
        for groups in self._table.values():
            for requests in groups.values():
                for request in requests:
                    request.release(False)
        self._table.clear()
        self._count = 0

    def parked_count(self) -> int:
        return self._count

    def park(self, topic: str, group: str, queue_id: int, message_filter: Any,
             notification: bool = False) -> PopRequest | None:
        """Registers a waiter; None when the polling table is full (POLLING_FULL)."""
        if self._count >= self.max_polling_size:
            return None
        loop = self._loop or asyncio.get_running_loop()
        request = PopRequest(topic, group, queue_id, message_filter, loop.create_future(), notification)
        self._table.setdefault(topic, {}).setdefault(group, []).append(request)
        self._retry_topics[build_pop_retry_topic(topic, group)] = (topic, group)
        self._count += 1
        return request

    def unpark(self, request: PopRequest) -> None:
        request.release(False)
        groups = self._table.get(request.topic)
        requests = groups.get(request.group) if groups is not None else None
        if groups is None or requests is None:
            return
        with contextlib.suppress(ValueError):
            requests.remove(request)
            self._count -= 1
        if not requests:
            del groups[request.group]
            if not groups:
                del self._table[request.topic]

    def arrival_listener(self, topic: str, queue_id: int, logic_offset: int, tags_code: int | None,
                         store_timestamp: int, properties: dict[str, str] | None) -> None:
        """The MessageStore arrival hook; may be called from the store's dispatch thread."""
        if self._loop is None or not self._table:
            return
        if threading.get_ident() == self._loop_thread:
            self.notify_message_arriving(topic, queue_id, None, tags_code, properties)
        else:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self.notify_message_arriving, topic, queue_id, None, tags_code,
                                                properties)

    def notify_message_arriving(self, topic: str, queue_id: int, group: str | None = None,
                                tags_code: int | None = None, properties: dict[str, str] | None = None) -> bool:
        """Wakes one matching pop (and every notification) waiter per group; True if any woke."""
        retry_of = self._retry_topics.get(topic)
        any_queue = False
        if retry_of is not None:
            topic, group = retry_of
            any_queue = True  # retry queues are not the topic's queues
        woke = False
        waiting = self._table.get(topic)
        if not waiting:
            return False
        for g in [group] if group is not None else list(waiting):
            requests = waiting.get(g)
            if not requests:
                continue
            popped = False
            for request in list(requests):
                if request.woken is None or request.woken.done() or (popped and not request.notification):
                    continue
                if not any_queue and request.queue_id not in (-1, queue_id):
                    continue
                try:
                    ok = self._matcher(request.message_filter, tags_code, properties)
                except Exception:
                    log.exception("filter failed while waking a parked pop on %s", topic)
                    ok = True
                if ok and request.release(True):
                    woke = True
                    popped = popped or not request.notification
        return woke
