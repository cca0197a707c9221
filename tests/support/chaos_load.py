"""Continuous produce and consume through a proxy while a chaos test breaks things.

Producers send one message per request and resend a key until it is acknowledged (a FIFO
producer moves to the next sequence number of its group only then); consumers receive and ack.
Everything is recorded in a DeliveryChecker; ``timeline`` keeps (time, ok) per send so a test
can tell that sends kept succeeding after a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

from orbitmq.bench.proxy_client import ProxyClient

from .checker import DeliveryChecker


@dataclass
class LoadSpec:
    endpoint: str
    topic: str
    group: str
    fifo: bool = False
    producers: int = 2  # plain producers, or FIFO message groups
    interval_s: float = 0.02  # pause between acknowledged sends of one producer
    consumers: int = 2
    invisible_ms: int = 10_000
    prefix: str = "k"


@dataclass
class ChaosLoad:
    spec: LoadSpec
    checker: DeliveryChecker = field(default_factory=DeliveryChecker)
    timeline: list[tuple[float, bool]] = field(default_factory=list)
    consume_errors: int = 0

    def __post_init__(self) -> None:
        self._producing = asyncio.Event()
        self._consuming = asyncio.Event()
        self._producers: list[asyncio.Task[None]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._client: ProxyClient | None = None

    async def start(self) -> None:
        self._client = await ProxyClient(self.spec.endpoint, request_timeout=15).__aenter__()
        self._producing.set()
        self._consuming.set()
        self._producers = [asyncio.create_task(self._produce(i)) for i in range(self.spec.producers)]
        self._tasks.extend(self._producers)
        for _ in range(self.spec.consumers):
            self._tasks.append(asyncio.create_task(self._consume()))

    def acked_since(self, moment: float) -> int:
        return sum(1 for t, ok in self.timeline if ok and t >= moment)

    async def wait_acked_since(self, moment: float, count: int, timeout: float) -> bool:  # noqa: ASYNC109
        """True once ``count`` sends were acknowledged after ``moment`` (monotonic)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.acked_since(moment) >= count:
                return True
            await asyncio.sleep(0.1)
        return False

    async def _produce(self, index: int) -> None:
        client = self._client
        assert client is not None
        group = f"{self.spec.prefix}g{index}" if self.spec.fifo else None
        seq = 0
        while self._producing.is_set():
            key = f"{group}:{seq}" if group else f"{self.spec.prefix}{index}-{seq}"
            while self._producing.is_set():
                outcome = await client.send(self.spec.topic, key, group=group)
                self.timeline.append((time.monotonic(), outcome.message_id is not None))
                if outcome.message_id is not None:
                    self.checker.sent(key, outcome.message_id, group, seq if group else None)
                    break
                self.checker.send_failed(key, outcome.error or "?", will_resend=self._producing.is_set())
                await asyncio.sleep(0.2)
            seq += 1
            await asyncio.sleep(self.spec.interval_s)

    async def _consume(self) -> None:
        client = self._client
        assert client is not None
        while self._consuming.is_set():
            deliveries, error = await client.receive(self.spec.topic, self.spec.group, 16, self.spec.invisible_ms, 1000)
            if error:
                self.consume_errors += 1
                await asyncio.sleep(0.2)
            for d in deliveries:
                group = d.group or None
                seq = int(d.key.rsplit(":", 1)[1]) if group and ":" in d.key else None
                self.checker.consumed(d.key, group, seq)
            if deliveries:
                results = await client.ack(self.spec.topic, self.spec.group, deliveries)
                self.checker.ack_failed(sum(1 for r in results if r is not None))

    async def stop_producing(self) -> None:
        """No new sends; returns once the sends in flight have their outcome. A send answered
        after the drain looked would count as acknowledged but never be consumed (the consumers
        stop with the drain): a loss the checker would report that the cluster did not cause."""
        self._producing.clear()
        for task in self._producers:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(task), 30)

    async def drain(self, timeout: float) -> bool:  # noqa: ASYNC109
        """Stop producing and consume until every acknowledged key arrived (False on timeout)."""
        await self.stop_producing()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.checker.missing():
                return True
            await asyncio.sleep(0.2)
        return not self.checker.missing()

    async def stop(self) -> None:
        self._producing.clear()
        self._consuming.clear()
        for task in self._tasks:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, 30)
        self._tasks.clear()
        if self._client is not None:
            await self._client.__aexit__(None, None, None)
            self._client = None
