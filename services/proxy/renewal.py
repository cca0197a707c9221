"""Auto-renewed receipt handles (ReceiptHandleProcessor): invisibility for push consumers.

A ReceiveMessage with auto_renew gets the default invisible time; while the client still holds
the message the proxy extends it shortly before it expires. Every renewal changes the handle,
so an ack or nack naming the message is carried out with the latest handle. When the client goes
away its messages are made visible again within a second instead of after the full time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from orbitmq.common.aio import cancel_and_wait
from orbitmq.proxy.config import ProxyConfig

log = logging.getLogger("orbitmq.proxy.renewal")

# (raw handle, group, topic, invisible ms) -> the new raw handle
ChangeInvisible = Callable[[str, str, str, int], Awaitable[str]]


@dataclass
class HeldMessage:
    client_id: str
    group: str
    topic: str
    message_id: str
    handle: str
    # Milliseconds since the epoch when the message becomes visible again.
    visible_at: int
    received_at: int
    failures: int = 0
    # Held while a renewal is in flight, so an ack waits for the handle it must use.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def _now_ms() -> int:
    return int(time.time() * 1000)


class ReceiptHandleRenewer:
    def __init__(self, config: ProxyConfig, change_invisible: ChangeInvisible) -> None:
        self.config = config
        self.change_invisible = change_invisible
        self.period_ms = config.renew_schedule_period_millis
        self.ahead_ms = config.renew_ahead_time_millis
        self.max_ms = config.renew_max_time_millis
        self.max_failures = config.max_renew_retry_times
        self.clear_invisible_ms = config.invisible_time_millis_when_clear
        self._held: dict[tuple[str, str, str], HeldMessage] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="receipt-handle-renewal")

    async def shutdown(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    def hold(self, client_id: str, group: str, topic: str, message_id: str, handle: str, invisible_ms: int) -> None:
        now = _now_ms()
        self._held[(client_id, group, message_id)] = HeldMessage(client_id, group, topic, message_id, handle,
                                                                 now + invisible_ms, now)

    def forget(self, client_id: str, group: str, message_id: str) -> None:
        """Drop a message the client never got (it is nacked instead)."""
        self._held.pop((client_id, group, message_id), None)

    def holds(self, client_id: str, group: str, message_id: str) -> bool:
        """Whether release would find the message (lets an ack skip the await when it would not)."""
        return (client_id, group, message_id) in self._held

    async def release(self, client_id: str, group: str, message_id: str) -> str | None:
        """Stop renewing; returns the latest handle of the message when this proxy renewed it."""
        held = self._held.get((client_id, group, message_id))
        if held is None:
            return None
        async with held.lock:
            self._held.pop((client_id, group, message_id), None)
            return held.handle

    async def release_client(self, client_id: str) -> None:
        """The client is gone: what it held becomes visible again soon (invisibleTimeMillisWhenClear)."""
        for key in [k for k in self._held if k[0] == client_id]:
            held = self._held.pop(key)
            try:
                await self.change_invisible(held.handle, held.group, held.topic, self.clear_invisible_ms)
            except Exception as exc:  # the broker revives it after the current invisible time anyway
                log.debug("clear of %s failed: %s", held.message_id, exc)

    async def renew_due(self) -> None:
        now = _now_ms()
        for key, held in list(self._held.items()):
            if held.visible_at - now > self.ahead_ms:
                continue
            if now - held.received_at > self.max_ms or held.visible_at <= now:
                self._held.pop(key, None)  # held too long, or already visible again: stop
                continue
            async with held.lock:
                if self._held.get(key) is not held:  # acked meanwhile
                    continue
                try:
                    invisible = self.config.default_invisible_time_mills
                    new_handle = await self.change_invisible(held.handle, held.group, held.topic, invisible)
                except Exception as exc:
                    held.failures += 1
                    log.warning("renew of %s failed (%d): %s", held.message_id, held.failures, exc)
                    if held.failures >= self.max_failures:
                        self._held.pop(key, None)
                    continue
                held.handle = new_handle
                held.visible_at = _now_ms() + invisible
                held.failures = 0

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.period_ms / 1000.0)
            try:
                await self.renew_due()
            except Exception:  # keep renewing whatever one round met
                log.exception("receipt handle renewal failed")
