"""The message model shared by broker, proxy and SDK, plus RocketMQ's properties string.

Properties travel and are stored as one string, ``name\\x01value\\x02`` per entry
(MessageDecoder.messageProperties2String); every component must produce and parse exactly
that form because it is what lands in the CommitLog and what Java clients decode.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from orbitmq.common import speedups

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
KEY_SEPARATOR = " "


class MessageConst:
    """System property names (MessageConst.PROPERTY_*), without the PROPERTY_ prefix."""

    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT_STORE_MSG_OK = "WAIT"
    DELAY_TIME_LEVEL = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QUEUE_ID = "REAL_QID"
    TRANSACTION_PREPARED = "TRAN_MSG"
    PRODUCER_GROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    BUYER_ID = "BUYER_ID"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    TRANSFER_FLAG = "TRANSFER_FLAG"
    CORRECTION_FLAG = "CORRECTION_FLAG"
    MQ2_FLAG = "MQ2_FLAG"
    RECONSUME_TIME = "RECONSUME_TIME"
    MSG_REGION = "MSG_REGION"
    TRACE_SWITCH = "TRACE_ON"
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    EXTEND_UNIQ_INFO = "EXTEND_UNIQ_INFO"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
    INNER_NUM = "INNER_NUM"
    INNER_BASE = "INNER_BASE"
    DUP_INFO = "DUP_INFO"
    CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    TRANSACTION_ID = "__transactionId__"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    INSTANCE_ID = "INSTANCE_ID"
    CORRELATION_ID = "CORRELATION_ID"
    MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
    MESSAGE_TTL = "TTL"
    REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
    PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
    CLUSTER = "CLUSTER"
    MESSAGE_TYPE = "MSG_TYPE"
    POP_CK = "POP_CK"
    POP_CK_OFFSET = "POP_CK_OFFSET"
    FIRST_POP_TIME = "1ST_POP_TIME"
    SHARDING_KEY = "__SHARDINGKEY"
    # RIP-80 priority messages (5.4.0): a number >= 0, bigger is more urgent.
    PRIORITY = "_SYS_MSG_PRIORITY_"
    # RocketMQ 5 FIFO: the gRPC message group is stored under the sharding key.
    MESSAGE_GROUP = SHARDING_KEY
    FORWARD_QUEUE_ID = "PROPERTY_FORWARD_QUEUE_ID"
    REDIRECT = "REDIRECT"
    INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
    INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
    TRACE_CONTEXT = "TRACE_CONTEXT"
    TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
    TIMER_DELAY_MS = "TIMER_DELAY_MS"
    TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
    TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
    TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
    TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
    TIMER_OUT_MS = "TIMER_OUT_MS"
    TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
    TIMER_DELAY_LEVEL = "TIMER_DELAY_LEVEL"
    # Aliyun/ONS-style absolute delivery time, still honoured by some clients.
    START_DELIVER_TIME = "__STARTDELIVERTIME"
    BORN_HOST = "__BORNHOST"
    BORN_TIMESTAMP = "BORN_TIMESTAMP"
    DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
    DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
    # Properties starting with this prefix are never written to the broker's disk.
    TRANSIENT_PREFIX = "__RMQ.TRANSIENT."
    TRANSIENT_TOPIC_CONFIG = TRANSIENT_PREFIX + "TOPIC_SYS_FLAG"
    TRANSIENT_GROUP_CONFIG = TRANSIENT_PREFIX + "GROUP_SYS_FLAG"
    KEY_SEPARATOR = KEY_SEPARATOR


# Names a user property may not take (MessageConst.STRING_HASH_SET, plus the delay/DLQ
# names RocketMQ 5 added later), so user data cannot impersonate broker bookkeeping.
STRING_HASH_SET: frozenset[str] = frozenset(
    {
        MessageConst.TRACE_SWITCH,
        MessageConst.MSG_REGION,
        MessageConst.KEYS,
        MessageConst.TAGS,
        MessageConst.WAIT_STORE_MSG_OK,
        MessageConst.DELAY_TIME_LEVEL,
        MessageConst.RETRY_TOPIC,
        MessageConst.REAL_TOPIC,
        MessageConst.REAL_QUEUE_ID,
        MessageConst.TRANSACTION_PREPARED,
        MessageConst.PRODUCER_GROUP,
        MessageConst.MIN_OFFSET,
        MessageConst.MAX_OFFSET,
        MessageConst.BUYER_ID,
        MessageConst.ORIGIN_MESSAGE_ID,
        MessageConst.TRANSFER_FLAG,
        MessageConst.CORRECTION_FLAG,
        MessageConst.MQ2_FLAG,
        MessageConst.RECONSUME_TIME,
        MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        MessageConst.MAX_RECONSUME_TIMES,
        MessageConst.CONSUME_START_TIMESTAMP,
        MessageConst.POP_CK,
        MessageConst.POP_CK_OFFSET,
        MessageConst.FIRST_POP_TIME,
        MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET,
        MessageConst.DUP_INFO,
        MessageConst.EXTEND_UNIQ_INFO,
        MessageConst.INSTANCE_ID,
        MessageConst.CORRELATION_ID,
        MessageConst.MESSAGE_REPLY_TO_CLIENT,
        MessageConst.MESSAGE_TTL,
        MessageConst.REPLY_MESSAGE_ARRIVE_TIME,
        MessageConst.PUSH_REPLY_TIME,
        MessageConst.CLUSTER,
        MessageConst.MESSAGE_TYPE,
        MessageConst.INNER_MULTI_QUEUE_OFFSET,
        MessageConst.TIMER_DELAY_SEC,
        MessageConst.TIMER_DELAY_MS,
        MessageConst.TIMER_DELIVER_MS,
        MessageConst.TIMER_ENQUEUE_MS,
        MessageConst.TIMER_DEQUEUE_MS,
        MessageConst.TIMER_ROLL_TIMES,
        MessageConst.TIMER_OUT_MS,
        MessageConst.TIMER_DEL_UNIQKEY,
        MessageConst.TIMER_DELAY_LEVEL,
        MessageConst.BORN_HOST,
        MessageConst.BORN_TIMESTAMP,
        MessageConst.DLQ_ORIGIN_TOPIC,
        MessageConst.DLQ_ORIGIN_MESSAGE_ID,
        MessageConst.PRIORITY,
    }
)
RESERVED_PROPERTY_NAMES = STRING_HASH_SET


def is_reserved_property(name: str) -> bool:
    """True for names owned by RocketMQ itself (system properties and transient ones)."""
    return name in STRING_HASH_SET or name.startswith(MessageConst.TRANSIENT_PREFIX)


# Compiled twin: _speedups_message.properties_to_string (same string).
def properties_to_string(props: Mapping[str, str]) -> str:
    """Encode properties as RocketMQ stores them; None values are skipped like upstream."""
    parts: list[str] = []
    for name, value in props.items():
        if value is None:
            continue
        parts.append(f"{name}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}")
    return "".join(parts)


_py_properties_to_string = properties_to_string


# Compiled twin: _speedups_message.string_to_properties (same dict).
def string_to_properties(s: str | None) -> dict[str, str]:
    """Decode a properties string; tolerant of a missing final separator and empty items.

    A segment without a name/value separator carries no usable pair and is skipped, as
    MessageDecoder.string2messageProperties does.
    """
    result: dict[str, str] = {}
    if not s:
        return result
    for segment in s.split(PROPERTY_SEPARATOR):
        if not segment:
            continue
        name, sep, value = segment.partition(NAME_VALUE_SEPARATOR)
        if not sep or not name:
            continue
        result[name] = value
    return result


_py_string_to_properties = string_to_properties


# Compiled twin: _speedups_message.parse_properties_exact (same pair).
def parse_properties_exact(s: str | None) -> tuple[dict[str, str], bool]:
    """(string_to_properties(s), whether properties_to_string of that dict gives ``s`` back).

    The second value lets the broker store a properties string exactly as it arrived instead
    of re-encoding it (RocketMQ copies the bytes), while the bytes written stay exactly those
    properties_to_string would produce. ``s`` is canonical when it ends with the separator and
    every entry became a distinct, non-empty name (none skipped, none overwritten).
    """
    props = string_to_properties(s)
    if not s:
        return props, True
    return props, s[-1] == PROPERTY_SEPARATOR and len(props) == s.count(PROPERTY_SEPARATOR)


_py_parse_properties_exact = parse_properties_exact


def properties_to_bytes(props: Mapping[str, str]) -> bytes:
    """UTF-8 form of :func:`properties_to_string`, as written into a CommitLog record."""
    return properties_to_string(props).encode("utf-8")


# Compiled twin: _speedups_message.bytes_to_properties (same dict).
def bytes_to_properties(data: bytes | bytearray | memoryview) -> dict[str, str]:
    """Decode properties read from a CommitLog record or a Remoting header."""
    return string_to_properties(bytes(data).decode("utf-8"))


_py_bytes_to_properties = bytes_to_properties


class ReservedPropertyError(ValueError):
    """A user property tried to use a name reserved for RocketMQ's own bookkeeping."""


@dataclass
class Message:
    """A message as a producer builds it: topic, body, flag and string properties."""

    topic: str
    body: bytes = b""
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)

    def get_property(self, name: str, default: str | None = None) -> str | None:
        return self.properties.get(name, default)

    def put_property(self, name: str, value: str) -> None:
        """Set a property without the reserved-name check; for system code paths."""
        self.properties[name] = str(value)

    def clear_property(self, name: str) -> None:
        self.properties.pop(name, None)

    def put_user_property(self, name: str, value: str) -> None:
        """Set a user property; reserved names are refused as Message.putUserProperty does."""
        if is_reserved_property(name):
            raise ReservedPropertyError(f"The Property<{name}> is used by system, input another please")
        if not name or not value or not name.strip() or not str(value).strip():
            raise ValueError("The name or value of property can not be null or blank string!")
        self.properties[name] = str(value)

    def get_user_property(self, name: str) -> str | None:
        return self.properties.get(name)

    @property
    def user_properties(self) -> dict[str, str]:
        """Properties that are not RocketMQ's own."""
        return {k: v for k, v in self.properties.items() if not is_reserved_property(k)}

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        self._set_or_clear(MessageConst.TAGS, value)

    @property
    def keys(self) -> list[str]:
        """The business keys (space-separated in the KEYS property)."""
        raw = self.properties.get(MessageConst.KEYS)
        return [k for k in raw.split(KEY_SEPARATOR) if k] if raw else []

    @keys.setter
    def keys(self, value: str | list[str] | tuple[str, ...] | None) -> None:
        if value is None or (not isinstance(value, str) and not value):
            self.properties.pop(MessageConst.KEYS, None)
            return
        self.properties[MessageConst.KEYS] = value if isinstance(value, str) else KEY_SEPARATOR.join(value)

    @property
    def uniq_key(self) -> str | None:
        """The client-side message id (UNIQ_KEY), which clients show as the message id."""
        return self.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @uniq_key.setter
    def uniq_key(self, value: str | None) -> None:
        self._set_or_clear(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, value)

    @property
    def delay_time_level(self) -> int:
        raw = self.properties.get(MessageConst.DELAY_TIME_LEVEL)
        return int(raw) if raw else 0

    @delay_time_level.setter
    def delay_time_level(self, level: int) -> None:
        if level:
            self.properties[MessageConst.DELAY_TIME_LEVEL] = str(int(level))
        else:
            self.properties.pop(MessageConst.DELAY_TIME_LEVEL, None)

    @property
    def wait_store_msg_ok(self) -> bool:
        """Defaults to true: a missing WAIT property means the producer waits for the store."""
        raw = self.properties.get(MessageConst.WAIT_STORE_MSG_OK)
        return raw is None or raw.lower() == "true"

    @wait_store_msg_ok.setter
    def wait_store_msg_ok(self, value: bool) -> None:
        self.properties[MessageConst.WAIT_STORE_MSG_OK] = "true" if value else "false"

    @property
    def properties_string(self) -> str:
        return properties_to_string(self.properties)

    def _set_or_clear(self, name: str, value: str | None) -> None:
        if value is None:
            self.properties.pop(name, None)
        else:
            self.properties[name] = value


@dataclass
class MessageExt(Message):
    """A stored message: the producer's message plus what the broker assigned to it."""

    queue_id: int = 0
    store_size: int = 0
    queue_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: str = ""
    store_timestamp: int = 0
    store_host: str = ""
    msg_id: str = ""
    commit_log_offset: int = 0
    body_crc: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0

    @property
    def uniq_id_or_msg_id(self) -> str:
        """What clients call the message id: UNIQ_KEY when present, else the offset id."""
        return self.uniq_key or self.msg_id


_fast = speedups.load("orbitmq.common._speedups_message")  # None: the code above runs
if _fast is not None:
    bytes_to_properties = _fast.bytes_to_properties
    parse_properties_exact = _fast.parse_properties_exact
    properties_to_string = _fast.properties_to_string
    string_to_properties = _fast.string_to_properties
