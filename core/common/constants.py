"""RocketMQ's well-known names (MixAll, TopicValidator, PermName) in one place.

Services and clients must agree on these strings byte for byte: a retry topic built as
"%RETRY%" + group by the broker is the one the proxy and the official clients look for.
"""

from __future__ import annotations

# --- MixAll -------------------------------------------------------------------------------
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
# Light Message Queue (RIP-28): MixAll.LMQ_PREFIX, LMQ_QUEUE_ID, LMQ_DISPATCH_SEPARATOR.
LMQ_PREFIX = "%LMQ%"
LMQ_QUEUE_ID = 0
LMQ_DISPATCH_SEPARATOR = ","
DEFAULT_CLUSTER = "DefaultCluster"
MASTER_ID = 0
NAMESRV_ADDR_ENV = "NAMESRV_ADDR"
NAMESRV_ADDR_PROPERTY = "rocketmq.namesrv.addr"

DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
DEFAULT_CONSUMER_GROUP = "DEFAULT_CONSUMER"
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
SCHEDULE_CONSUMER_GROUP = "SCHEDULE_CONSUMER"
FILTERSRV_CONSUMER_GROUP = "FILTERSRV_CONSUMER"
MONITOR_CONSUMER_GROUP = "__MONITOR_CONSUMER"
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
SELF_TEST_PRODUCER_GROUP = "SELF_TEST_P_GROUP"
SELF_TEST_CONSUMER_GROUP = "SELF_TEST_C_GROUP"
ONS_HTTP_PROXY_GROUP = "CID_ONS-HTTP-PROXY"
CID_ONSAPI_PERMISSION_GROUP = "CID_ONSAPI_PERMISSION"
CID_ONSAPI_OWNER_GROUP = "CID_ONSAPI_OWNER"
CID_ONSAPI_PULL_GROUP = "CID_ONSAPI_PULL"
CID_RMQ_SYS_PREFIX = "CID_RMQ_SYS_"
CID_SYS_RMQ_TRANS = "CID_RMQ_SYS_TRANS"
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"

# --- TopicValidator -----------------------------------------------------------------------
AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
RMQ_SYS_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
RMQ_SYS_SCHEDULE_TOPIC_V2 = "SCHEDULE_TOPIC_XXXX_V2"
RMQ_SYS_BENCHMARK_TOPIC = "BenchmarkTest"
BENCHMARK_TOPIC = RMQ_SYS_BENCHMARK_TOPIC
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RMQ_SYS_SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
SELF_TEST_TOPIC = RMQ_SYS_SELF_TEST_TOPIC
RMQ_SYS_OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
OFFSET_MOVED_EVENT = RMQ_SYS_OFFSET_MOVED_EVENT
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
# POP revive log: one topic per cluster, "rmq_sys_REVIVE_LOG_" + clusterName (PopAckConstants).
REVIVE_TOPIC_PREFIX = SYSTEM_TOPIC_PREFIX + "REVIVE_LOG_"
# The timing wheel's own topic (TimerMessageStore.TIMER_TOPIC).
RMQ_SYS_WHEEL_TIMER_TOPIC = "rmq_sys_wheel_timer"
TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255

SYSTEM_TOPIC_SET: frozenset[str] = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        RMQ_SYS_SCHEDULE_TOPIC,
        RMQ_SYS_SCHEDULE_TOPIC_V2,
        RMQ_SYS_BENCHMARK_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRACE_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_SELF_TEST_TOPIC,
        RMQ_SYS_OFFSET_MOVED_EVENT,
    }
)

# Topics a client may never send to directly (TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET).
NOT_ALLOWED_SEND_TOPIC_SET: frozenset[str] = frozenset(
    {
        RMQ_SYS_SCHEDULE_TOPIC,
        RMQ_SYS_SCHEDULE_TOPIC_V2,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_SELF_TEST_TOPIC,
        RMQ_SYS_OFFSET_MOVED_EVENT,
    }
)

SYSTEM_GROUP_SET: frozenset[str] = frozenset(
    {
        DEFAULT_PRODUCER_GROUP,
        DEFAULT_CONSUMER_GROUP,
        TOOLS_CONSUMER_GROUP,
        SCHEDULE_CONSUMER_GROUP,
        FILTERSRV_CONSUMER_GROUP,
        MONITOR_CONSUMER_GROUP,
        CLIENT_INNER_PRODUCER_GROUP,
        SELF_TEST_PRODUCER_GROUP,
        SELF_TEST_CONSUMER_GROUP,
        ONS_HTTP_PROXY_GROUP,
        CID_ONSAPI_PERMISSION_GROUP,
        CID_ONSAPI_OWNER_GROUP,
        CID_ONSAPI_PULL_GROUP,
        CID_SYS_RMQ_TRANS,
    }
)

# --- PermName -----------------------------------------------------------------------------
PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1


def perm_to_string(perm: int) -> str:
    """Render permission bits the way mqadmin prints them ("RW-", "R--", "-WX")."""
    return "".join(
        (
            "R" if perm & PERM_READ else "-",
            "W" if perm & PERM_WRITE else "-",
            "X" if perm & PERM_INHERIT else "-",
        )
    )


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def is_inherited(perm: int) -> bool:
    return bool(perm & PERM_INHERIT)


def is_priority(perm: int) -> bool:
    return bool(perm & PERM_PRIORITY)


# --- retry / DLQ naming -------------------------------------------------------------------
def retry_topic(group: str) -> str:
    """Topic that holds a consumer group's redelivered messages."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """Topic that holds a consumer group's dead letters."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def revive_topic(cluster_name: str) -> str:
    """The POP revive-log topic of a cluster."""
    return REVIVE_TOPIC_PREFIX + cluster_name


def is_sys_consumer_group(group: str) -> bool:
    """MixAll.isSysConsumerGroup: the CID_RMQ_SYS_ prefix marks internal consumer groups."""
    return group.startswith(CID_RMQ_SYS_PREFIX)

# CHANGE_MESSAGE_INVISIBLETIME's remark (with NO_MESSAGE) when the handle's message was already
# acked: the broker refuses to revive it and the proxy answers INVALID_RECEIPT_HANDLE.
POP_HANDLE_ACKED_REMARK = "the message of this receipt handle has been acked"


def is_lmq(name: str | None) -> bool:
    """MixAll#isLmq: a Light Message Queue's name (topic, queue or group) starts with %LMQ%."""
    return name is not None and name.startswith(LMQ_PREFIX)


def topic_allows_lmq(topic: str) -> bool:
    """MixAll#topicAllowsLMQ: retry, rmq_sys_ and SCHEDULE_TOPIC_XXXX messages are never
    dispatched to Light Message Queues (the delayed copy is, once delivered to its topic)."""
    return not (topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or topic.startswith(SYSTEM_TOPIC_PREFIX)
                or topic == RMQ_SYS_SCHEDULE_TOPIC)


def split_lmq_names(value: str) -> list[str]:
    """String#split(LMQ_DISPATCH_SEPARATOR) as upstream splits INNER_MULTI_DISPATCH and
    INNER_MULTI_QUEUE_OFFSET: trailing empty items dropped, "" staying [""]. The counts of the
    two properties are compared after this split (ConsumeQueue#multiDispatchLmqQueue)."""
    if LMQ_DISPATCH_SEPARATOR not in value:
        return [value]
    parts = value.split(LMQ_DISPATCH_SEPARATOR)
    while parts and not parts[-1]:
        parts.pop()
    return parts
