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
    NORMAL_TOPIC,
    POP_ORDER_REVIVE_QUEUE,
    RETRY_TOPIC,
    RETRY_TOPIC_V2,
    ExtraInfoError,
    parse_extra_info,
    real_topic,
)

_RETRY_FLAGS = frozenset((NORMAL_TOPIC, RETRY_TOPIC, RETRY_TOPIC_V2))
_LONG_MAX = 2**63 - 1
_INT_MAX = 2**31 - 1


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
        """ReceiptHandle.decode: the broker's 8-field ExtraInfo, then the CommitLog offset if any.

        Every ack and change of invisible time decodes a handle: a well-formed one is read in one
        split; anything unusual goes through parse_extra_info, which finds the exact error.
        """
        if handle and isinstance(handle, str):
            data = handle.split(KEY_SEPARATOR)
            if len(data) >= 8 and data[4] in _RETRY_FLAGS:
                try:
                    start, pop_time, invisible = int(data[0]), int(data[1]), int(data[2])
                    revive, queue_id, offset = int(data[3]), int(data[6]), int(data[7])
                    commit_log_offset = int(data[8]) if len(data) >= 9 else -1
                except ValueError:
                    pass
                else:
                    if (0 <= start <= _LONG_MAX and 0 <= pop_time <= _LONG_MAX and 0 <= invisible <= _LONG_MAX
                            and 0 <= revive <= _INT_MAX and 0 <= queue_id <= _LONG_MAX
                            and -_LONG_MAX - 1 <= offset <= _LONG_MAX):
                        return cls(start, pop_time, invisible, revive, data[4], data[5], queue_id, offset,
                                   commit_log_offset, handle)
        return cls._decode_checked(handle)

    @classmethod
    def _decode_checked(cls, handle: str) -> ReceiptHandle:
        """The field-by-field decode, with parse_extra_info's error for a bad handle."""
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
