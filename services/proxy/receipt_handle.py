"""The gRPC receipt handle: RocketMQ 5's ReceiptHandle, i.e. the broker's POP check-point info.

The handle is the ExtraInfo string the broker defined at POP time (startOffset, popTime,
invisibleTime, reviveQid, topicType, brokerName, queueId, offset; see orbitmq.common.extra_info)
plus the CommitLog offset.
Because it names the broker and everything the broker needs, any proxy replica can ack it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from orbitmq.common.extra_info import (
    KEY_SEPARATOR,
    POP_ORDER_REVIVE_QUEUE,
    ExtraInfoError,
    parse_extra_info,
    real_topic,
)


class InvalidReceiptHandle(ValueError):
    """The string is not a receipt handle this proxy (or any) issued."""


@dataclass(frozen=True)
class ReceiptHandle:
    start_offset: int
    retrieve_time: int
    invisible_time: int
    revive_queue_id: int
    topic_type: str
    broker_name: str
    queue_id: int
    offset: int
    commit_log_offset: int
    raw: str

    @property
    def next_visible_time(self) -> int:
        return self.retrieve_time + self.invisible_time

    def is_expired(self, now_ms: int | None = None) -> bool:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return self.next_visible_time <= now

    @property
    def is_order(self) -> bool:
        return self.revive_queue_id == POP_ORDER_REVIVE_QUEUE

    def real_topic(self, topic: str, group: str) -> str:
        """The topic the message really sits in: a POP retry topic when it was redelivered."""
        return real_topic(topic, group, self.topic_type)

    def encode(self) -> str:
        return self.raw

    @classmethod
    def decode(cls, handle: str) -> ReceiptHandle:
        """ReceiptHandle.decode: the broker's 8-field ExtraInfo, then the CommitLog offset if any."""
        if not handle or not isinstance(handle, str):
            raise InvalidReceiptHandle("receipt handle is empty")
        data = handle.split(KEY_SEPARATOR)
        if len(data) < 8:
            raise InvalidReceiptHandle(f"Parse failed, dataList size {len(data)}")
        try:
            info = parse_extra_info(KEY_SEPARATOR.join(data[:8]))
            commit_log_offset = int(data[8]) if len(data) >= 9 else -1
        except (ExtraInfoError, ValueError) as exc:
            raise InvalidReceiptHandle(f"Parse failed: {exc}") from None
        if info.msg_queue_offset is None:  # unreachable with eight fields; keeps the type exact
            raise InvalidReceiptHandle("Parse failed, no queue offset")
        return cls(
            start_offset=info.ck_queue_offset,
            retrieve_time=info.pop_time,
            invisible_time=info.invisible_time,
            revive_queue_id=info.revive_qid,
            topic_type=info.retry,
            broker_name=info.broker_name,
            queue_id=info.queue_id,
            offset=info.msg_queue_offset,
            commit_log_offset=commit_log_offset,
            raw=handle,
        )


def with_commit_log_offset(pop_ck: str | None, commit_log_offset: int) -> str | None:
    """ConsumerProcessor.createHandle: append the CommitLog offset to the broker's ExtraInfo."""
    if pop_ck is None:
        return None
    return pop_ck + KEY_SEPARATOR + str(commit_log_offset)
