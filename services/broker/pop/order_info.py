"""ConsumerOrderInfoManager: what keeps an orderly (FIFO) POP queue to one batch in flight.

For each topic@group and queue it remembers the last popped batch: its offsets, pop time,
invisible time, which offsets were acked, how often each was delivered, and per-offset
visibility changes. A new orderly pop of the queue is blocked while any offset of the batch is
un-acked and still invisible; once the batch is acked, the group's offset moves past it; once
the invisible time passes, the same offsets are popped again with their delivery count + 1.
The table is persisted as config/consumerOrderInfo.json so a restart keeps both facts.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from orbitmq.broker.store.metadata.json_file import load_json_with_backup, write_json_atomic
from orbitmq.common import extra_info
from orbitmq.common.atomic_file import NewestSnapshotWriter

from .constants import SPLIT

log = logging.getLogger(__name__)

FILE_NAME = "consumerOrderInfo.json"
# ConsumerOrderInfoManager.commitAndNext results besides an offset.
ILLEGAL_OFFSET = -1
STALE_POP = -2


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class OrderInfo:
    pop_time: int
    invisible_time: int
    offsets: list[int]
    consumed_count: dict[int, int] = field(default_factory=dict)
    next_visible_time: dict[int, int] = field(default_factory=dict)
    commit_bits: int = 0
    attempt_id: str | None = None

    def is_acked(self, index: int) -> bool:
        return bool(self.commit_bits >> index & 1)

    def all_acked(self) -> bool:
        return all(self.is_acked(i) for i in range(len(self.offsets)))

    def need_block(self, attempt_id: str | None, now: int) -> bool:
        if not self.offsets:
            return False
        if attempt_id and attempt_id == self.attempt_id:
            return False  # the same client attempt retrying its own request
        default_visible = self.pop_time + self.invisible_time
        for i, offset in enumerate(self.offsets):
            if not self.is_acked(i) and now < self.next_visible_time.get(offset, default_visible):
                return True
        return False

    def next_offset(self) -> int:
        for i, offset in enumerate(self.offsets):
            if not self.is_acked(i):
                return offset
        return self.offsets[-1] + 1

    def to_json(self) -> dict[str, Any]:
        return {"popTime": self.pop_time, "invisibleTime": self.invisible_time, "offsetList": self.offsets,
                "offsetConsumedCount": {str(k): v for k, v in self.consumed_count.items()},
                "offsetNextVisibleTime": {str(k): v for k, v in self.next_visible_time.items()},
                "commitOffsetBit": self.commit_bits, "attemptId": self.attempt_id}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> OrderInfo:
        return cls(pop_time=int(d["popTime"]), invisible_time=int(d["invisibleTime"]),
                   offsets=[int(o) for o in d["offsetList"]],
                   consumed_count={int(k): int(v) for k, v in (d.get("offsetConsumedCount") or {}).items()},
                   next_visible_time={int(k): int(v) for k, v in (d.get("offsetNextVisibleTime") or {}).items()},
                   commit_bits=int(d.get("commitOffsetBit") or 0), attempt_id=d.get("attemptId"))


def _key(topic: str, group: str) -> str:
    return f"{topic}{SPLIT}{group}"


class ConsumerOrderInfoManager:
    def __init__(self, config_dir: str) -> None:
        self.path = os.path.join(config_dir, FILE_NAME)
        self.table: dict[str, dict[int, OrderInfo]] = {}
        self._dirty = False
        self._lock = threading.Lock()  # guards the table against the loader thread
        self._writer = NewestSnapshotWriter()

    # ---- queries used by pop / notification ------------------------------------------------
    def get(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        return self.table.get(_key(topic, group), {}).get(queue_id)

    def check_block(self, attempt_id: str | None, topic: str, group: str, queue_id: int) -> bool:
        info = self.get(topic, group, queue_id)
        return info is not None and info.need_block(attempt_id, _now_ms())

    # ---- changes ---------------------------------------------------------------------------
    def update(self, attempt_id: str | None, topic: str, group: str, queue_id: int, pop_time: int,
               invisible_time: int, offsets: list[int]) -> tuple[dict[int, int], str]:
        """Records a new in-flight batch; returns each offset's delivery count and orderCountInfo."""
        previous = self.get(topic, group, queue_id)
        # The same client attempt asking again (a retried request) is not a new delivery.
        same_attempt = previous is not None and attempt_id is not None and attempt_id == previous.attempt_id
        counts: dict[int, int] = {}
        for offset in offsets:
            if previous is not None and offset in previous.offsets \
                    and not previous.is_acked(previous.offsets.index(offset)):
                counts[offset] = previous.consumed_count.get(offset, 0) + (0 if same_attempt else 1)
            else:
                counts[offset] = 0
        info = OrderInfo(pop_time=pop_time, invisible_time=invisible_time, offsets=list(offsets),
                         consumed_count=counts, attempt_id=attempt_id)
        with self._lock:
            self.table.setdefault(_key(topic, group), {})[queue_id] = info
            self._dirty = True
        items = [extra_info.queue_offset_order_count_item(topic, queue_id, o, counts[o]) for o in offsets]
        if offsets:
            items.append(extra_info.queue_id_order_count_item(topic, queue_id, min(counts.values())))
        return counts, ";".join(items)

    def commit_and_next(self, topic: str, group: str, queue_id: int, offset: int, pop_time: int) -> int:
        """Marks one offset acked; returns the offset the group may commit, or -1/-2."""
        info = self.get(topic, group, queue_id)
        if info is None:
            return offset + 1
        if info.pop_time != pop_time:
            return STALE_POP
        try:
            index = info.offsets.index(offset)
        except ValueError:
            return ILLEGAL_OFFSET
        with self._lock:
            info.commit_bits |= 1 << index
            self._dirty = True
        return info.next_offset()

    def update_next_visible_time(self, topic: str, group: str, queue_id: int, offset: int, pop_time: int,
                                 next_visible_time: int) -> bool:
        info = self.get(topic, group, queue_id)
        if info is None or info.pop_time != pop_time or offset not in info.offsets:
            return False
        with self._lock:
            info.next_visible_time[offset] = next_visible_time
            self._dirty = True
        return True

    def clear_block(self, topic: str, group: str, queue_id: int) -> None:
        with self._lock:
            if self.table.get(_key(topic, group), {}).pop(queue_id, None) is not None:
                self._dirty = True

    # ---- persistence -----------------------------------------------------------------------
    def encode(self) -> dict[str, Any]:
        with self._lock:
            return {"table": {k: {str(q): info.to_json() for q, info in v.items()} for k, v in self.table.items()}}

    def load(self) -> None:
        obj, source = load_json_with_backup(self.path, validate=self._parse)
        if obj is not None:
            self.table = self._parse(obj)
            log.info("load %s OK from %s", FILE_NAME, source)

    @staticmethod
    def _parse(obj: Any) -> dict[str, dict[int, OrderInfo]]:
        table = obj["table"]
        return {str(k): {int(q): OrderInfo.from_json(info) for q, info in v.items()} for k, v in table.items()}

    def _snapshot(self, force: bool) -> tuple[int, dict[str, Any]] | None:
        """The table as JSON data, numbered; None when nothing changed since the last one.

        Taken on the caller's thread (the event loop), where the table is mutated, so the
        loop never waits on a lock a worker holds while it serialises a big table.
        """
        if not (self._dirty or force):
            return None
        self._dirty = False
        return self._writer.number(), self.encode()

    def _write(self, seq: int, obj: dict[str, Any]) -> None:
        # Looked up at call time so tests can slow the write down.
        self._writer.write(seq, self.path, write_json_atomic, obj)

    def persist(self, force: bool = False) -> None:
        """Writes the table when it changed; blocks on fsync (tests, worker threads)."""
        snapshot = self._snapshot(force)
        if snapshot is not None:
            self._write(*snapshot)

    async def persist_async(self, force: bool = False) -> None:
        """Snapshot now on the loop, serialise and fsync on a worker thread.

        A write still running when its task is cancelled (shutdown) cannot overwrite the
        newer snapshot taken after it: writes are serialised and numbered.
        """
        snapshot = self._snapshot(force)
        if snapshot is not None:
            await asyncio.to_thread(self._write, *snapshot)
