"""Broker-granted queue locks for orderly consumption (RocketMQ's RebalanceLockManager).

An orderly consumer only consumes a queue while it holds this broker's lock on it, so two
clients of one group never process the same queue at once. A lock lapses after
``max_live_millis`` (60 s upstream) unless its holder renews it by locking again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .channel_info import now_ms

log = logging.getLogger(__name__)

REBALANCE_LOCK_MAX_LIVE_TIME = 60_000

MessageQueueKey = tuple[str, str, int]  # (topic, brokerName, queueId)


@dataclass(slots=True)
class LockEntry:
    client_id: str
    last_update_timestamp: int

    def is_locked(self, client_id: str, max_live: int) -> bool:
        return self.client_id == client_id and not self.is_expired(max_live)

    def is_expired(self, max_live: int) -> bool:
        return now_ms() - self.last_update_timestamp > max_live


class RebalanceLockManager:
    def __init__(self, max_live_millis: int = REBALANCE_LOCK_MAX_LIVE_TIME) -> None:
        self.max_live_millis = max_live_millis
        self.mq_lock_table: dict[str, dict[MessageQueueKey, LockEntry]] = {}

    def try_lock_batch(self, group: str, mqs: list[MessageQueueKey], client_id: str) -> list[MessageQueueKey]:
        """Locks (or renews) every queue free or already ours; returns the queues now held."""
        table = self.mq_lock_table.setdefault(group, {})
        locked: list[MessageQueueKey] = []
        now = now_ms()
        for mq in mqs:
            entry = table.get(mq)
            if entry is None or entry.client_id == client_id or entry.is_expired(self.max_live_millis):
                if entry is not None and entry.client_id != client_id:
                    log.warning("rebalance lock expired, group %s mq %s old %s new %s", group, mq,
                                entry.client_id, client_id)
                table[mq] = LockEntry(client_id, now)
                locked.append(mq)
        return locked

    def unlock_batch(self, group: str, mqs: list[MessageQueueKey], client_id: str) -> None:
        table = self.mq_lock_table.get(group)
        if not table:
            return
        for mq in mqs:
            entry = table.get(mq)
            if entry is not None and entry.client_id == client_id:
                del table[mq]
        if not table:
            del self.mq_lock_table[group]

    def is_locked(self, group: str, mq: MessageQueueKey, client_id: str) -> bool:
        entry = self.mq_lock_table.get(group, {}).get(mq)
        return entry is not None and entry.is_locked(client_id, self.max_live_millis)
