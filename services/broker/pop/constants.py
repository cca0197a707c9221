"""PopAckConstants and the broker-only KeyBuilder names: what POP writes into the revive log.

They must match RocketMQ byte for byte, because a revive log written by one broker version is
replayed by another. The names clients share (pop retry topics, the orderly revive queue id) live
in orbitmq.common.extra_info.
"""

from __future__ import annotations

from orbitmq.common.constants import CID_RMQ_SYS_PREFIX

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
# PopMessageProcessor refuses more than this many messages per request.
MAX_POP_MSG_NUMS = 32
# ConsumeInitMode
INIT_MODE_MAX = 0
INIT_MODE_MIN = 1


def build_lock_key(topic: str, group: str, queue_id: int) -> str:
    """QueueLockManager / PopBufferMergeService key: topic@group@queueId."""
    return f"{topic}{SPLIT}{group}{SPLIT}{queue_id}"
