"""PopAckConstants and KeyBuilder: the names POP writes into the revive log and retry topics.

They must match RocketMQ byte for byte, because receipt handles (ExtraInfo) built by one broker
version or proxy replica are parsed by another, and the retry topic name is derived from them.
"""

from __future__ import annotations

from orbitmq.common.constants import CID_RMQ_SYS_PREFIX, DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

ACK_TIME_INTERVAL_MS = 1000
SECOND_MS = 1000
REVIVE_GROUP = CID_RMQ_SYS_PREFIX + "REVIVE_GROUP"
LOCAL_HOST = "127.0.0.1"
CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
SPLIT = "@"
# Queues of a POP retry topic (PopAckConstants.retryQueueNum).
RETRY_QUEUE_NUM = 1
# The revive queue id that marks an orderly pop: its handles are acked through
# ConsumerOrderInfoManager, never through the revive log.
POP_ORDER_REVIVE_QUEUE = 999
# PopMessageProcessor refuses more than this many messages per request.
MAX_POP_MSG_NUMS = 32
# ConsumeInitMode
INIT_MODE_MAX = 0
INIT_MODE_MIN = 1

_RETRY_SEPARATOR_V1 = "_"
_RETRY_SEPARATOR_V2 = "+"


def build_pop_retry_topic(topic: str, group: str, v2: bool = False) -> str:
    """The retry topic of one (group, topic): "%RETRY%group_topic" (V1) or "%RETRY%group+topic"."""
    return RETRY_GROUP_TOPIC_PREFIX + group + (_RETRY_SEPARATOR_V2 if v2 else _RETRY_SEPARATOR_V1) + topic


def is_pop_retry_topic_v2(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and _RETRY_SEPARATOR_V2 in topic


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def parse_normal_topic(topic: str, group: str) -> str:
    """The topic a retry topic of ``group`` stands for (the topic itself when not a retry topic)."""
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return topic
    for sep in (_RETRY_SEPARATOR_V2, _RETRY_SEPARATOR_V1):
        prefix = RETRY_GROUP_TOPIC_PREFIX + group + sep
        if topic.startswith(prefix):
            return topic[len(prefix):]
    return topic


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def build_lock_key(topic: str, group: str, queue_id: int) -> str:
    """QueueLockManager / PopBufferMergeService key: topic@group@queueId."""
    return f"{topic}{SPLIT}{group}{SPLIT}{queue_id}"
