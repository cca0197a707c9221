"""Receipt handles acked lately, so that CHANGE_MESSAGE_INVISIBLETIME of one is refused.

Changing the invisible time appends a new checkpoint for the message; for a message already
acked that checkpoint would bring it back once more. A handle stops being valid when its
invisible time ends (the proxy refuses expired handles), so an acked handle is remembered only
until then; the table is bounded and forgets the oldest entries first.
"""

from __future__ import annotations

from collections.abc import Iterable

from .checkpoint import AckMsg

AckKey = tuple[str, str, int, int, int]  # group, topic, queue id, queue offset, pop time
DEFAULT_LIMIT = 200_000


class RecentAcks:
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._until: dict[AckKey, int] = {}

    def add(self, acks: Iterable[tuple[AckMsg, int]]) -> None:
        """Remember each (ack, its handle's invisible time) until the handle expires."""
        until = self._until
        for ack, invisible_time in acks:
            expires = ack.pop_time + invisible_time
            for offset in ack.offsets():
                until[(ack.consumer_group, ack.topic, ack.queue_id, offset, ack.pop_time)] = expires
        if len(until) > self.limit:
            self._prune()

    def acked(self, group: str, topic: str, queue_id: int, offset: int, pop_time: int, now_ms: int) -> bool:
        expires = self._until.get((group, topic, queue_id, offset, pop_time))
        return expires is not None and now_ms < expires

    def _prune(self) -> None:
        """Drop the oldest half (insertion order is ack order)."""
        drop = len(self._until) - self.limit // 2
        for key in list(self._until)[:drop]:
            del self._until[key]
