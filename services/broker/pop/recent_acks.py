"""Receipt handles acked lately, so that CHANGE_MESSAGE_INVISIBLETIME of one is refused.

Changing the invisible time appends a new checkpoint for the message; for a message already
acked that checkpoint would bring it back once more. A handle stops being valid when its
invisible time ends (the proxy refuses expired handles), so an acked handle is remembered only
until then: given the broker's clock, expired entries are dropped as acks arrive (issue 17: the
table grew with every message consumed until it hit its bound); the table is also bounded and
forgets the oldest entries first.
"""

from __future__ import annotations

from collections.abc import Iterable

from .checkpoint import AckMsg

AckKey = tuple[str, str, int, int, int]  # group, topic, queue id, queue offset, pop time
DEFAULT_LIMIT = 200_000
# Expired entries are looked for at most this often (a sweep walks the front of the table).
SWEEP_INTERVAL_MS = 1_000


class RecentAcks:
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._until: dict[AckKey, int] = {}
        self._next_sweep_ms = 0

    def add(self, acks: Iterable[tuple[AckMsg, int]], now_ms: int | None = None) -> None:
        """Remember each (ack, its handle's invisible time) until the handle expires; with the
        broker's clock ``now_ms``, entries that have expired are dropped (at most once a second)."""
        until = self._until
        for ack, invisible_time in acks:
            expires = ack.pop_time + invisible_time
            for offset in ack.offsets():
                until[(ack.consumer_group, ack.topic, ack.queue_id, offset, ack.pop_time)] = expires
        if len(until) > self.limit:
            self._prune()
        if now_ms is not None and now_ms >= self._next_sweep_ms:
            self._next_sweep_ms = now_ms + SWEEP_INTERVAL_MS
            self._drop_expired(now_ms)

    def _drop_expired(self, now_ms: int) -> None:
        """Drop the expired entries at the front of the table.

        Rule: entries are in ack order and a consumer's acks share one invisible time, so the
        expired ones gather at the front; the walk stops at the first live entry (an entry with a
        longer invisible time ahead holds later ones only until it expires, or the bound prunes).
        acked() already treats expired entries as absent, so dropping them changes no answer.
        """
        until = self._until
        expired = []
        for key, expires in until.items():
            if expires > now_ms:
                break
            expired.append(key)
        for key in expired:
            del until[key]

    def acked(self, group: str, topic: str, queue_id: int, offset: int, pop_time: int, now_ms: int) -> bool:
        expires = self._until.get((group, topic, queue_id, offset, pop_time))
        return expires is not None and now_ms < expires

    def _prune(self) -> None:
        """Drop the oldest half (insertion order is ack order)."""
        drop = len(self._until) - self.limit // 2
        for key in list(self._until)[:drop]:
            del self._until[key]
