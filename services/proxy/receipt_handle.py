"""The gRPC receipt handle: RocketMQ 5's ReceiptHandle, i.e. the broker's POP check-point info.

The handle is the ExtraInfo string the broker defined at POP time (startOffset, popTime,
invisibleTime, reviveQid, topicType, brokerName, queueId, offset) plus the CommitLog offset.
Because it names the broker and everything the broker needs, any proxy replica can ack it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from orbitmq.client.extra_info import (  # noqa: F401  (re-exported for the proxy)
    NORMAL_TOPIC,
    RETRY_TOPIC,
    RETRY_TOPIC_V2,
    SEPARATOR,
    build_extra_info,
    pop_retry_topic_v1,
    pop_retry_topic_v2,
    topic_type,
)

# KeyBuilder.POP_ORDER_REVIVE_QUEUE: the revive queue id that marks an orderly (FIFO) POP.
POP_ORDER_REVIVE_QUEUE = 999


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
        if self.topic_type == RETRY_TOPIC:
            return pop_retry_topic_v1(topic, group)
        if self.topic_type == RETRY_TOPIC_V2:
            return pop_retry_topic_v2(topic, group)
        return topic

    def encode(self) -> str:
        return self.raw

    @classmethod
    def decode(cls, handle: str) -> ReceiptHandle:
        if not handle or not isinstance(handle, str):
            raise InvalidReceiptHandle("receipt handle is empty")
        data = handle.split(SEPARATOR)
        if len(data) < 8:
            raise InvalidReceiptHandle(f"Parse failed, dataList size {len(data)}")
        try:
            return cls(
                start_offset=int(data[0]),
                retrieve_time=int(data[1]),
                invisible_time=int(data[2]),
                revive_queue_id=int(data[3]),
                topic_type=data[4],
                broker_name=data[5],
                queue_id=int(data[6]),
                offset=int(data[7]),
                commit_log_offset=int(data[8]) if len(data) >= 9 else -1,
                raw=handle,
            )
        except ValueError as exc:
            raise InvalidReceiptHandle(f"Parse failed: {exc}") from None


def with_commit_log_offset(pop_ck: str | None, commit_log_offset: int) -> str | None:
    """ConsumerProcessor.createHandle: append the CommitLog offset to the broker's ExtraInfo."""
    if pop_ck is None:
        return None
    return pop_ck + SEPARATOR + str(commit_log_offset)
