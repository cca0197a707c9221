"""Small fakes satisfying the timer helpers' Protocols (services/broker/timer/interfaces.py).

``FakeTimer`` holds the positions TimerMessageStore shares with its helpers, over real
timerwheel, timerlog and timercheck files in a temporary directory, and files units with
TimerMessageStore's own ``do_enqueue``; ``FakeTimerStore`` is the timer ConsumeQueue and the
CommitLog records it points at; ``FakePutBroker`` keeps what the dequeue step puts.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from orbitmq.broker.controller import BrokerController
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.model import (
    MessageExtBrokerInner,
    PutMessageResult,
    PutMessageStatus,
    put_ok_result,
)
from orbitmq.broker.timer.checkpoint import TimerCheckpoint
from orbitmq.broker.timer.enqueue import DueMessage
from orbitmq.broker.timer.timer_log import TimerLog
from orbitmq.broker.timer.timer_message_store import TimerMessageStore
from orbitmq.broker.timer.wheel import TimerWheel
from orbitmq.broker.timer.wheel_math import MAGIC_DEFAULT, TIMER_TOPIC, floor_time
from orbitmq.common.message import MessageConst
from orbitmq.common.message_codec import encode_record

START = 1_795_000_000_000  # a multiple of the default 1 s precision


class FakeTimerQueue:
    """The rmq_sys_wheel_timer ConsumeQueue: (CommitLog offset, size, tags code) per entry."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, int, int]] = []
        self.min_offset = 0

    def get_min_offset_in_queue(self) -> int:
        return self.min_offset

    def get_max_offset_in_queue(self) -> int:
        return len(self.entries)

    def get_entry(self, index: int) -> tuple[int, int, int] | None:
        return self.entries[index] if 0 <= index < len(self.entries) else None


class FakeCommitLog:
    def __init__(self) -> None:
        self.records: dict[int, bytes] = {}
        self.end = 0

    def get_message(self, offset: int, size: int) -> bytes | None:
        record = self.records.get(offset)
        return record if record is not None and len(record) == size else None


class FakeTimerStore:
    """TimerStoreReads: the timer queue and the records its entries point at."""

    def __init__(self) -> None:
        self.commit_log = FakeCommitLog()
        self.timer_queue = FakeTimerQueue()

    def get_consume_queue(self, topic: str, queue_id: int) -> FakeTimerQueue | None:
        return self.timer_queue if (topic, queue_id) == (TIMER_TOPIC, 0) else None

    def put_timer_message(self, deliver_ms: int, body: bytes, *, real_topic: str = "Real", uniq_key: str = "",
                          extra: dict[str, str] | None = None) -> tuple[int, int]:
        """A message as the put hook parks it in the timer queue; its (CommitLog offset, size)."""
        props = {MessageConst.TIMER_OUT_MS: str(deliver_ms), MessageConst.REAL_TOPIC: real_topic,
                 MessageConst.REAL_QUEUE_ID: "3", MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq_key or body.hex(),
                 **(extra or {})}
        queue = self.timer_queue
        log = self.commit_log
        record = encode_record(topic=TIMER_TOPIC, queue_id=0, body=body, queue_offset=len(queue.entries),
                               physical_offset=log.end, born_timestamp=START - 1, store_timestamp=START,
                               properties=props)
        offset = log.end
        log.records[offset] = record
        log.end += len(record)
        queue.entries.append((offset, len(record), 0))
        return offset, len(record)


class FakePutBroker:
    """TimerPutBroker: BrokerController's message building, puts kept in ``puts``."""

    def __init__(self) -> None:
        self.puts: list[MessageExtBrokerInner] = []
        self.status: PutMessageStatus | None = None  # set: every put answers it
        self.gate: asyncio.Event | None = None  # set: puts wait for it
        self.escape_bridge = self  # a master: deliveries are local puts

    def new_inner_message(self, **fields: Any) -> MessageExtBrokerInner:
        return BrokerController.new_inner_message(self, **fields)  # type: ignore[arg-type]

    async def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        if self.gate is not None:
            await self.gate.wait()
        if self.status is not None:
            return PutMessageResult(self.status)
        self.puts.append(msg)
        return put_ok_result(0, 1, START, len(self.puts) - 1, "")


class DueRecorder:
    """DueDelivery: what the enqueue step hands over as already due."""

    def __init__(self) -> None:
        self.due: list[DueMessage] = []
        self.accept = True

    async def put_due(self, due: list[DueMessage]) -> bool:
        if self.accept:
            self.due.extend(due)
        return self.accept


class FakeTimer:
    """TimerMessageStore's shared state as EnqueueTimer, DequeueTimer and RecoveryTimer see it."""

    do_enqueue = TimerMessageStore.do_enqueue  # the real filing, into this fake's wheel and log

    def __init__(self, config: MessageStoreConfig, store: FakeTimerStore) -> None:
        self.config = config
        self.precision_ms = config.timer_precision_ms
        self.clock = START
        self.now_ms: Callable[[], int] = lambda: self.clock
        self.lock = threading.Lock()
        self.running = True
        self.dequeue_active = True
        self.commit_queue_offset = 0
        self.curr_write_time_ms = 0
        self.curr_read_time_ms = 0
        self.master_queue_offset = 0
        self.last_enqueue_store_ms = 0
        self.metrics = None
        self.store = store
        self.broker = FakePutBroker()
        self.dequeue_service = DueRecorder()
        self.timing: Counter[str] = Counter()
        self.checkpoint = TimerCheckpoint(config.timer_checkpoint_path)
        self.wheel = TimerWheel(config.timer_wheel_path, self.precision_ms)
        self.timer_log = TimerLog(config.timer_log_dir, config.mapped_file_size_timer_log)

    def floor_now(self) -> int:
        return floor_time(self.now_ms(), self.precision_ms)

    def count_timing(self, topic: str, delta: int) -> None:
        self.timing[topic] += delta

    def slot_units(self, slot_ms: int) -> list[tuple[int, int, int]]:
        """(CommitLog offset, size, magic) of a slot's units, oldest first, read back from the files."""
        out = []
        pos = self.wheel.get_slot(slot_ms).last_pos
        while pos >= 0:
            unit = self.timer_log.read_unit(pos)
            assert unit is not None and unit.delayed_time_ms == slot_ms
            out.append((unit.offset_py, unit.size_py, unit.magic))
            pos = unit.prev_pos
        return out[::-1]

    def close(self) -> None:
        self.timer_log.flush()
        self.wheel.flush()
        self.timer_log.shutdown()
        self.wheel.close()
        self.checkpoint.close()


class TimerEnv:
    """A fake timer store over ``root``."""

    def __init__(self, root: Path) -> None:
        self.config = MessageStoreConfig(store_path_root_dir=str(root), mapped_file_size_timer_log=52 * 20)
        self.store = FakeTimerStore()
        self.timer = FakeTimer(self.config, self.store)

    def file(self, slot_ms: int, body: bytes, magic: int = MAGIC_DEFAULT, **kw: Any) -> tuple[int, int]:
        """A message in the timer queue, filed into ``slot_ms`` as the enqueue step would at START;
        its (CommitLog offset, size)."""
        offset, size = self.store.put_timer_message(slot_ms, body, **kw)
        self.timer.do_enqueue(offset, size, slot_ms, magic, kw.get("real_topic", "Real"), START)
        return offset, size

    def restart(self, *, lose_wheel: bool = False) -> FakeTimer:
        """Close the files and open them again in a new FakeTimer; ``lose_wheel``: the timerwheel
        file is gone meanwhile (a crash that lost it), the timer log and checkpoint are left."""
        self.timer.close()
        if lose_wheel:
            os.remove(self.config.timer_wheel_path)
        self.timer = FakeTimer(self.config, self.store)
        return self.timer


@pytest.fixture
def timer_env(tmp_path: Path) -> Iterator[TimerEnv]:
    env = TimerEnv(tmp_path)
    yield env
    env.timer.close()
