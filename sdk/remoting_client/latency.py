"""Latency fault tolerance: which broker groups a producer avoids for a while (MQFaultStrategy and
LatencyFaultToleranceImpl).

A send's latency (a failure counts as 10 s, "isolation") maps through upstream's latencyMax
table to a not-available duration; while it lasts, queue selection prefers other broker groups.
The clock is injectable so the tables are unit-testable without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from orbitmq.client.api import MessageQueueRef
from orbitmq.remoting_client.publish_info import TopicPublishInfo

# MQFaultStrategy#latencyMax / #notAvailableDuration (milliseconds)
LATENCY_MAX_MS = (50, 100, 550, 1800, 3000, 5000, 15000)
NOT_AVAILABLE_DURATION_MS = (0, 0, 2000, 5000, 6000, 10000, 30000)
ISOLATION_LATENCY_MS = 10000  # what a failed send counts as (updateFaultItem's isolation)


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class FaultItem:
    name: str
    current_latency: int = 0
    start_timestamp: int = 0  # available again from this time (ms)
    reachable: bool = True

    def update_not_available_duration(self, duration: int, now: int) -> None:
        if duration > 0 and now + duration > self.start_timestamp:
            self.start_timestamp = now + duration

    def is_available(self, now: int) -> bool:
        return now >= self.start_timestamp


class LatencyFaultTolerance:
    """LatencyFaultToleranceImpl without the reachability detector (startDetectorEnable off)."""

    def __init__(self, clock: Callable[[], int] = _now_ms) -> None:
        self.clock = clock
        self.items: dict[str, FaultItem] = {}

    def update_fault_item(self, name: str, current_latency: int, not_available_duration: int,
                          reachable: bool) -> None:
        item = self.items.get(name)
        if item is None:
            item = self.items[name] = FaultItem(name)
        item.current_latency = current_latency
        item.update_not_available_duration(not_available_duration, self.clock())
        item.reachable = reachable

    def is_available(self, name: str) -> bool:
        item = self.items.get(name)
        return item is None or item.is_available(self.clock())

    def is_reachable(self, name: str) -> bool:
        item = self.items.get(name)
        return item is None or item.reachable

    def remove(self, name: str) -> None:
        self.items.pop(name, None)


def compute_not_available_duration(current_latency: int) -> int:
    """MQFaultStrategy#computeNotAvailableDuration: the duration of the largest latencyMax step
    the latency reaches."""
    for step, duration in zip(reversed(LATENCY_MAX_MS), reversed(NOT_AVAILABLE_DURATION_MS), strict=True):
        if current_latency >= step:
            return duration
    return 0


class MQFaultStrategy:
    """Queue selection with latency fault tolerance (sendLatencyFaultEnable) or plain round robin
    that avoids the broker group the previous attempt used."""

    def __init__(self, send_latency_fault_enable: bool = False, clock: Callable[[], int] = _now_ms) -> None:
        self.send_latency_fault_enable = send_latency_fault_enable
        self.tolerance = LatencyFaultTolerance(clock)

    def select_one_message_queue(self, info: TopicPublishInfo, last_broker_name: str | None,
                                 reset_index: bool = False) -> MessageQueueRef | None:
        def other_broker(mq: MessageQueueRef) -> bool:
            return last_broker_name is None or mq.broker_name != last_broker_name

        if self.send_latency_fault_enable:
            if reset_index:
                info.reset_index()
            tol = self.tolerance
            mq = info.select_one_message_queue(lambda q: tol.is_available(q.broker_name), other_broker)
            if mq is not None:
                return mq
            mq = info.select_one_message_queue(lambda q: tol.is_reachable(q.broker_name), other_broker)
            if mq is not None:
                return mq
            return info.select_one_message_queue()
        mq = info.select_one_message_queue(other_broker)
        return mq if mq is not None else info.select_one_message_queue()

    def update_fault_item(self, broker_name: str, current_latency: int, isolation: bool, reachable: bool) -> None:
        if self.send_latency_fault_enable:
            duration = compute_not_available_duration(ISOLATION_LATENCY_MS if isolation else current_latency)
            self.tolerance.update_fault_item(broker_name, current_latency, duration, reachable)
