"""ExtraInfoUtil and the POP retry-topic names: the check-point strings a broker and its clients share.

Both sides must agree byte for byte, because a handle the broker (or one proxy replica) wrote is
parsed by a client, another replica or another broker version. An ExtraInfo (a message's POP_CK
property, the core of its receipt handle) is, space separated:
``ckQueueOffset popTime invisibleTime reviveQid retryFlag brokerName queueId [msgQueueOffset]``
where retryFlag is "0" for a normal topic, "1" for a V1 pop retry topic ("%RETRY%group_topic") and
"2" for a V2 one ("%RETRY%group+topic"). A handle whose reviveQid is 999 belongs to an orderly pop.
The POP response header strings (startOffsetInfo, msgOffsetInfo, orderCountInfo) are ``;``-joined
``retryFlag queueId value`` items.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from orbitmq.common.constants import RETRY_GROUP_TOPIC_PREFIX, is_retry_topic

KEY_SEPARATOR = " "
NORMAL_TOPIC = "0"
RETRY_TOPIC = "1"
RETRY_TOPIC_V2 = "2"
QUEUE_OFFSET = "qo"
# KeyBuilder.POP_ORDER_REVIVE_QUEUE: the revive queue id that marks an orderly (FIFO) pop, whose
# handles are acked through ConsumerOrderInfoManager instead of the revive log.
POP_ORDER_REVIVE_QUEUE = 999
_LONG_MAX = 2**63 - 1
_INT_MAX = 2**31 - 1
_RETRY_SEPARATOR_V1 = "_"
_RETRY_SEPARATOR_V2 = "+"


class ExtraInfoError(ValueError):
    """A receipt handle's ExtraInfo (or a POP offset-info string) that cannot be parsed."""


# --- KeyBuilder: pop retry topic names --------------------------------------------------------

def build_pop_retry_topic(topic: str, group: str, v2: bool = False) -> str:
    """The retry topic of one (group, topic): "%RETRY%group_topic" (V1) or "%RETRY%group+topic"."""
    return RETRY_GROUP_TOPIC_PREFIX + group + (_RETRY_SEPARATOR_V2 if v2 else _RETRY_SEPARATOR_V1) + topic


def is_pop_retry_topic_v2(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and _RETRY_SEPARATOR_V2 in topic


def parse_normal_topic(topic: str, group: str) -> str:
    """The topic a retry topic of ``group`` stands for (the topic itself when not a retry topic)."""
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return topic
    for sep in (_RETRY_SEPARATOR_V2, _RETRY_SEPARATOR_V1):
        prefix = RETRY_GROUP_TOPIC_PREFIX + group + sep
        if topic.startswith(prefix):
            return topic[len(prefix):]
    return topic


# --- the retry flag and the real topic --------------------------------------------------------

def retry_flag(topic: str) -> str:
    """ExtraInfoUtil.getRetry: "2" for a V2 pop retry topic, "1" for a retry topic, else "0"."""
    if is_pop_retry_topic_v2(topic):
        return RETRY_TOPIC_V2
    if is_retry_topic(topic):
        return RETRY_TOPIC
    return NORMAL_TOPIC


def real_topic(topic: str, group: str, flag: str) -> str:
    """The topic a handle really points into: the pop retry topic when its flag says so, even if the
    caller names the original topic (that is what clients and the proxy usually know)."""
    if flag == NORMAL_TOPIC or is_retry_topic(topic):
        return topic
    if flag == RETRY_TOPIC:
        return build_pop_retry_topic(topic, group)
    if flag == RETRY_TOPIC_V2:
        return build_pop_retry_topic(topic, group, v2=True)
    raise ExtraInfoError(f"illegal retry flag {flag!r} in extraInfo")


# --- the ExtraInfo string ---------------------------------------------------------------------

def build_extra_info(ck_queue_offset: int, pop_time: int, invisible_time: int, revive_qid: int, topic: str,
                     broker_name: str, queue_id: int, msg_queue_offset: int | None = None) -> str:
    """ExtraInfoUtil.buildExtraInfo; the retry flag is derived from ``topic``, so pass the real one."""
    parts = [str(ck_queue_offset), str(pop_time), str(invisible_time), str(revive_qid), retry_flag(topic),
             broker_name, str(queue_id)]
    if msg_queue_offset is not None:
        parts.append(str(msg_queue_offset))
    return KEY_SEPARATOR.join(parts)


@dataclass(frozen=True, slots=True)
class ExtraInfo:
    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    msg_queue_offset: int | None

    @property
    def is_order(self) -> bool:
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE

    def real_topic(self, topic: str, group: str) -> str:
        return real_topic(topic, group, self.retry)


def _long(raw: str, what: str) -> int:
    try:
        value = int(raw, 10)
    except ValueError:
        raise ExtraInfoError(f"extraInfo {what} is not a number: {raw[:32]!r}") from None
    if not -_LONG_MAX - 1 <= value <= _LONG_MAX:
        raise ExtraInfoError(f"extraInfo {what} is out of range: {raw[:32]}")
    return value


def parse_extra_info(text: str | None) -> ExtraInfo:
    """Parses and range-checks an ExtraInfo; ExtraInfoError names the bad part. Fields after the
    eighth (the proxy appends the CommitLog offset) are left to the caller."""
    if not text:
        raise ExtraInfoError("extraInfo is empty")
    parts = text.split(KEY_SEPARATOR)
    if len(parts) < 7:
        raise ExtraInfoError(f"extraInfo has {len(parts)} fields, at least 7 expected: {text[:128]!r}")
    if parts[4] not in (NORMAL_TOPIC, RETRY_TOPIC, RETRY_TOPIC_V2):
        raise ExtraInfoError(f"extraInfo retry flag {parts[4][:8]!r} is not 0, 1 or 2")
    info = ExtraInfo(
        ck_queue_offset=_long(parts[0], "ckQueueOffset"),
        pop_time=_long(parts[1], "popTime"),
        invisible_time=_long(parts[2], "invisibleTime"),
        revive_qid=_long(parts[3], "reviveQid"),
        retry=parts[4],
        broker_name=parts[5],
        queue_id=_long(parts[6], "queueId"),
        msg_queue_offset=_long(parts[7], "msgQueueOffset") if len(parts) > 7 else None,
    )
    if info.ck_queue_offset < 0 or info.pop_time < 0 or info.invisible_time < 0 or info.queue_id < 0:
        raise ExtraInfoError(f"extraInfo carries a negative offset, time or queue id: {text[:128]!r}")
    if not 0 <= info.revive_qid <= _INT_MAX:
        raise ExtraInfoError(f"extraInfo reviveQid {info.revive_qid} is out of range")
    return info


# --- POP response header items: startOffsetInfo, msgOffsetInfo, orderCountInfo ----------------

def start_offset_item(topic: str, queue_id: int, start_offset: int) -> str:
    return f"{retry_flag(topic)}{KEY_SEPARATOR}{queue_id}{KEY_SEPARATOR}{start_offset}"


def msg_offset_item(topic: str, queue_id: int, offsets: Iterable[int]) -> str:
    return f"{retry_flag(topic)}{KEY_SEPARATOR}{queue_id}{KEY_SEPARATOR}" + ",".join(str(o) for o in offsets)


def queue_id_order_count_item(topic: str, queue_id: int, count: int) -> str:
    return f"{retry_flag(topic)}{KEY_SEPARATOR}{queue_id}{KEY_SEPARATOR}{count}"


def queue_offset_order_count_item(topic: str, queue_id: int, queue_offset: int, count: int) -> str:
    return (f"{retry_flag(topic)}{KEY_SEPARATOR}{QUEUE_OFFSET}{queue_id}%{queue_offset}"
            f"{KEY_SEPARATOR}{count}")


def start_offset_info_key(topic: str, queue_id: int) -> str:
    """The key the parsed startOffsetInfo/msgOffsetInfo/orderCountInfo maps use for one queue."""
    return f"{retry_flag(topic)}@{queue_id}"


def queue_offset_map_key(topic: str, queue_id: int, queue_offset: int) -> str:
    """The orderCountInfo key of one message (ExtraInfoUtil.getQueueOffsetMapKey)."""
    return f"{retry_flag(topic)}@{QUEUE_OFFSET}{queue_id}%{queue_offset}"


def _parse_items(text: str | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    if not text:
        return out
    for one in text.split(";"):
        split = one.split(KEY_SEPARATOR)
        if len(split) != 3:
            raise ExtraInfoError(f"parse {what} error, {text[:128]}")
        key = split[0] + "@" + split[1]
        if key in out:
            raise ExtraInfoError(f"parse {what} error, duplicate, {text[:128]}")
        out[key] = split[2]
    return out


def parse_start_offset_info(text: str | None) -> dict[str, int]:
    """Empty when the header carried none (an older broker): callers fall back to queue offsets."""
    return {k: _long(v, "startOffset") for k, v in _parse_items(text, "startOffsetInfo").items()}


def parse_msg_offset_info(text: str | None) -> dict[str, list[int]]:
    return {k: [_long(x, "msgOffset") for x in v.split(",")]
            for k, v in _parse_items(text, "msgOffsetInfo").items()}


def parse_order_count_info(text: str | None) -> dict[str, int]:
    return {k: _long(v, "orderCount") for k, v in _parse_items(text, "orderCountInfo").items()}
