"""ExtraInfoUtil: the POP check-point strings a broker and its clients exchange.

A POP response names, per queue, the check-point start offset and the popped offsets
("<topicType> <queueId> <value>" items joined by ';'); each message's receipt handle is then
"startOffset popTime invisibleTime reviveQid topicType brokerName queueId queueOffset".
"""

from __future__ import annotations

from orbitmq.common.constants import RETRY_GROUP_TOPIC_PREFIX

SEPARATOR = " "
NORMAL_TOPIC = "0"
RETRY_TOPIC = "1"
RETRY_TOPIC_V2 = "2"
POP_RETRY_SEPARATOR_V2 = "+"
QUEUE_OFFSET = "qo"


def topic_type(topic: str) -> str:
    """ExtraInfoUtil.getRetry: "2" for a V2 POP retry topic, "1" for a retry topic, else "0"."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RETRY_TOPIC_V2 if POP_RETRY_SEPARATOR_V2 in topic else RETRY_TOPIC
    return NORMAL_TOPIC


def pop_retry_topic_v1(topic: str, group: str) -> str:
    """KeyBuilder.buildPopRetryTopicV1."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"


def pop_retry_topic_v2(topic: str, group: str) -> str:
    """KeyBuilder.buildPopRetryTopicV2."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}{POP_RETRY_SEPARATOR_V2}{topic}"


def build_extra_info(ck_queue_offset: int, pop_time: int, invisible_time: int, revive_qid: int,
                     topic: str, broker_name: str, queue_id: int, msg_queue_offset: int | None = None) -> str:
    parts = [ck_queue_offset, pop_time, invisible_time, revive_qid, topic_type(topic), broker_name, queue_id]
    if msg_queue_offset is not None:
        parts.append(msg_queue_offset)
    return SEPARATOR.join(str(p) for p in parts)


def start_offset_info_key(topic: str, queue_id: int) -> str:
    return f"{topic_type(topic)}@{queue_id}"


def queue_offset_map_key(topic: str, queue_id: int, queue_offset: int) -> str:
    return f"{topic_type(topic)}@{QUEUE_OFFSET}{queue_id}%{queue_offset}"


def _items(info: str | None) -> list[list[str]]:
    if not info:
        return []
    out = []
    for one in info.split(";"):
        parts = one.split(SEPARATOR)
        if len(parts) != 3:
            raise ValueError(f"parse offset info error, {info}")
        out.append(parts)
    return out


def parse_start_offset_info(info: str | None) -> dict[str, int] | None:
    items = _items(info)
    return {f"{a}@{b}": int(c) for a, b, c in items} if items else None


def parse_msg_offset_info(info: str | None) -> dict[str, list[int]] | None:
    items = _items(info)
    return {f"{a}@{b}": [int(x) for x in c.split(",")] for a, b, c in items} if items else None


def parse_order_count_info(info: str | None) -> dict[str, int] | None:
    items = _items(info)
    return {f"{a}@{b}": int(c) for a, b, c in items} if items else None
