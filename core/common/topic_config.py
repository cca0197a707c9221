"""TopicConfig: one topic's queue counts, permission and attributes, as RocketMQ stores them.

The JSON names are RocketMQ's (topics.json, UPDATE_AND_CREATE_TOPIC bodies, route data), so a
topics.json written by an Apache RocketMQ broker loads here and the other way round. Keys this
class does not know are kept in ``extra`` and written back unchanged.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from orbitmq.common.constants import PERM_READ, PERM_WRITE

MESSAGE_TYPE_ATTRIBUTE = "message.type"  # TopicAttributes.TOPIC_MESSAGE_TYPE_ATTRIBUTE
SINGLE_TAG = "SINGLE_TAG"
MULTI_TAG = "MULTI_TAG"
TOPIC_FILTER_TYPES = (SINGLE_TAG, MULTI_TAG)

DEFAULT_READ_QUEUE_NUMS = 16
DEFAULT_WRITE_QUEUE_NUMS = 16


class TopicMessageType(enum.StrEnum):
    UNSPECIFIED = "UNSPECIFIED"
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"
    # RIP-80: a message's priority picks its queue; POP serves the higher queues first.
    PRIORITY = "PRIORITY"


def message_priority(properties: dict[str, str]) -> int:
    """Message#getPriority: the _SYS_MSG_PRIORITY_ property, -1 when absent or not a number."""
    raw = properties.get("_SYS_MSG_PRIORITY_")
    if raw is None:
        return -1
    try:
        return int(raw)
    except ValueError:
        return -1


def message_type_of_properties(properties: dict[str, str]) -> TopicMessageType:
    """TopicMessageType#parseFromMessageProperty: TRANSACTION, then DELAY, then FIFO, then
    PRIORITY, else NORMAL (a delayed or grouped message with a priority is not a PRIORITY one)."""
    if properties.get("TRAN_MSG") == "true":
        return TopicMessageType.TRANSACTION
    if ("DELAY" in properties or "TIMER_DELIVER_MS" in properties or "TIMER_DELAY_SEC" in properties
            or "TIMER_DELAY_MS" in properties):
        return TopicMessageType.DELAY
    if "__SHARDINGKEY" in properties:
        return TopicMessageType.FIFO
    if "_SYS_MSG_PRIORITY_" in properties:
        return TopicMessageType.PRIORITY
    return TopicMessageType.NORMAL


def priority_queue_id(properties: dict[str, str], write_queue_nums: int) -> int | None:
    """SendMessageProcessor's priority routing: the queue a PRIORITY message goes to, its
    priority capped at the last write queue; None for any other message (the caller drops a
    priority property that message carries)."""
    priority = message_priority(properties)
    if priority < 0 or message_type_of_properties(properties) != TopicMessageType.PRIORITY:
        return None
    return min(priority, write_queue_nums - 1)


def normalize_attributes(changes: dict[str, str], current: dict[str, str] | None = None) -> dict[str, str]:
    """Apply mqadmin-style attribute edits: "+k" (or bare "k") sets k, "-k" removes it.

    RocketMQ keeps the bare name on disk ({"message.type": "FIFO"}); the sign only says what
    to do with it (AttributeUtil.alterCurrentAttributes).
    """
    result = dict(current or {})
    for raw_key, value in changes.items():
        if raw_key.startswith("-"):
            result.pop(raw_key[1:], None)
        elif raw_key.startswith("+"):
            result[raw_key[1:]] = value
        else:
            result[raw_key] = value
    if MESSAGE_TYPE_ATTRIBUTE in result and result[MESSAGE_TYPE_ATTRIBUTE] not in TopicMessageType.__members__:
        raise ValueError(
            f"value {result[MESSAGE_TYPE_ATTRIBUTE]!r} of attribute {MESSAGE_TYPE_ATTRIBUTE} is not in "
            f"{', '.join(TopicMessageType.__members__)}"
        )
    return result


@dataclass
class TopicConfig:
    topic_name: str
    read_queue_nums: int = DEFAULT_READ_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_WRITE_QUEUE_NUMS
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)
    # JSON fields written by newer/other brokers that this class does not model.
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.attributes = normalize_attributes(self.attributes)

    @property
    def message_type(self) -> TopicMessageType:
        """TopicConfig.getTopicMessageType: the message.type attribute, NORMAL when unset."""
        value = self.attributes.get(MESSAGE_TYPE_ATTRIBUTE)
        if value is None:
            return TopicMessageType.NORMAL
        return TopicMessageType(value)

    @message_type.setter
    def message_type(self, value: TopicMessageType | str) -> None:
        self.attributes[MESSAGE_TYPE_ATTRIBUTE] = TopicMessageType(value).value

    def to_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = dict(self.extra)
        d.update(
            {
                "topicName": self.topic_name,
                "readQueueNums": self.read_queue_nums,
                "writeQueueNums": self.write_queue_nums,
                "perm": self.perm,
                "topicFilterType": self.topic_filter_type,
                "topicSysFlag": self.topic_sys_flag,
                "order": self.order,
                "attributes": dict(self.attributes),
            }
        )
        return d

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> TopicConfig:
        if not isinstance(d, dict) or not isinstance(d.get("topicName"), str):
            raise ValueError(f"not a TopicConfig: {d!r:.200}")
        known = {
            "topicName",
            "readQueueNums",
            "writeQueueNums",
            "perm",
            "topicFilterType",
            "topicSysFlag",
            "order",
            "attributes",
        }
        filter_type = d.get("topicFilterType") or SINGLE_TAG
        if filter_type not in TOPIC_FILTER_TYPES:
            raise ValueError(f"topic {d['topicName']}: unknown topicFilterType {filter_type!r}")
        return cls(
            topic_name=d["topicName"],
            read_queue_nums=int(d.get("readQueueNums", DEFAULT_READ_QUEUE_NUMS)),
            write_queue_nums=int(d.get("writeQueueNums", DEFAULT_WRITE_QUEUE_NUMS)),
            perm=int(d.get("perm", PERM_READ | PERM_WRITE)),
            topic_filter_type=filter_type,
            topic_sys_flag=int(d.get("topicSysFlag", 0)),
            order=bool(d.get("order", False)),
            attributes={str(k): str(v) for k, v in (d.get("attributes") or {}).items()},
            extra={k: v for k, v in d.items() if k not in known},
        )
