"""DefaultBrokerHeartbeatManager: which broker replicas are alive, as this controller node sees it.

Per (clusterName, brokerName, brokerId): the last 904 heartbeat's epoch, offsets, timeout,
election priority and channel. Not replicated (like DLedger mode upstream): brokers heartbeat
every controller node, so a new leader already knows who is alive. A replica is alive while
``last update + heartbeatTimeoutMills >= now``; the scan (every scanNotActiveBrokerInterval)
drops expired ones, and a closed channel drops its replicas at once. Listeners hear of each
replica that goes inactive.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("orbitmq.controller")

DEFAULT_BROKER_CHANNEL_EXPIRED_TIME = 10 * 1000  # ms, a heartbeat without heartbeatTimeoutMills
INT_MAX = 2**31 - 1

BrokerKey = tuple[str, str, int]
InactiveListener = Callable[[str, str, int], Any]


def now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass
class BrokerLiveInfo:
    cluster_name: str
    broker_name: str
    broker_addr: str
    broker_id: int
    heartbeat_timeout_millis: int
    channel: Any
    epoch: int
    max_offset: int
    confirm_offset: int
    election_priority: int = INT_MAX
    last_update_timestamp: int = 0


class DefaultBrokerHeartbeatManager:
    def __init__(self, clock: Callable[[], int] = now_ms) -> None:
        self._clock = clock
        self.broker_live_table: dict[BrokerKey, BrokerLiveInfo] = {}
        self._listeners: list[InactiveListener] = []

    def register_broker_inactive_listener(self, listener: InactiveListener) -> None:
        self._listeners.append(listener)

    def on_broker_heartbeat(self, cluster_name: str, broker_name: str, broker_addr: str, broker_id: int,
                            timeout_millis: int | None, channel: Any, epoch: int | None, max_offset: int | None,
                            confirm_offset: int | None, election_priority: int | None) -> None:
        """Record a 904; epoch/offsets move only forward (a newer epoch, or the same with more data)."""
        timeout = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME if timeout_millis is None else timeout_millis
        epoch = -1 if epoch is None else epoch
        max_offset = -1 if max_offset is None else max_offset
        confirm_offset = -1 if confirm_offset is None else confirm_offset
        priority = INT_MAX if election_priority is None else election_priority
        key = (cluster_name, broker_name, broker_id)
        now = self._clock()
        info = self.broker_live_table.get(key)
        if info is None:
            self.broker_live_table[key] = BrokerLiveInfo(
                cluster_name, broker_name, broker_addr, broker_id, timeout, channel, epoch, max_offset,
                confirm_offset, priority, now)
            log.info("new broker registered in heartbeat table: %s %s-%d %s", cluster_name, broker_name,
                     broker_id, broker_addr)
            return
        info.last_update_timestamp = now
        info.heartbeat_timeout_millis = timeout
        info.election_priority = priority
        info.broker_addr = broker_addr
        if channel is not None and channel is not info.channel:
            info.channel = channel
        if epoch > info.epoch or (epoch == info.epoch and max_offset > info.max_offset):
            info.epoch = epoch
            info.max_offset = max_offset
            info.confirm_offset = confirm_offset

    def is_broker_active(self, cluster_name: str, broker_name: str, broker_id: int) -> bool:
        info = self.broker_live_table.get((cluster_name, broker_name, broker_id))
        return info is not None and info.last_update_timestamp + info.heartbeat_timeout_millis >= self._clock()

    def get_broker_live_info(self, cluster_name: str, broker_name: str, broker_id: int) -> BrokerLiveInfo | None:
        return self.broker_live_table.get((cluster_name, broker_name, broker_id))

    def active_broker_ids(self, cluster_name: str, broker_name: str) -> set[int]:
        now = self._clock()
        return {bid for (c, n, bid), info in self.broker_live_table.items()
                if c == cluster_name and n == broker_name
                and info.last_update_timestamp + info.heartbeat_timeout_millis >= now}

    def scan_not_active_broker(self) -> list[BrokerKey]:
        """Drop replicas whose timeout passed; returns their keys (listeners already told)."""
        now = self._clock()
        expired = [key for key, info in self.broker_live_table.items()
                   if now - info.last_update_timestamp > info.heartbeat_timeout_millis]
        for key in expired:
            info = self.broker_live_table.pop(key)
            log.warning("broker %s-%d (%s) heartbeat timed out after %d ms", info.broker_name, info.broker_id,
                        info.broker_addr, info.heartbeat_timeout_millis)
            self._notify(key)
        return expired

    def on_channel_close(self, channel: Any) -> list[BrokerKey]:
        """BrokerHousekeepingService: every replica on a closed connection is dead at once."""
        gone = [key for key, info in self.broker_live_table.items() if info.channel is channel]
        for key in gone:
            info = self.broker_live_table.pop(key)
            log.warning("broker %s-%d (%s) channel closed", info.broker_name, info.broker_id, info.broker_addr)
            self._notify(key)
        return gone

    def _notify(self, key: BrokerKey) -> None:
        for listener in self._listeners:
            try:
                listener(*key)
            except Exception:
                log.exception("broker inactive listener failed for %s", key)
