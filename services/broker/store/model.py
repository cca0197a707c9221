"""Value types of the store API: the message handed to the store and the results it returns.

Names and members follow RocketMQ (MessageExtBrokerInner, PutMessageStatus, AppendMessageResult,
GetMessageStatus, GetMessageResult) because the broker maps them 1:1 to response codes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from orbitmq.common.message import MessageConst, properties_to_string


@dataclass(slots=True)
class MessageExtBrokerInner:
    """A message as the broker hands it to the store.

    ``properties_string`` is what lands on disk; when empty it is built from ``properties``
    (callers that change ``properties`` after setting the string must refresh it, as in RocketMQ).
    ``tags_code`` is informational: the ConsumeQueue tag code is derived from the stored TAGS.
    ``store_host`` None means the store's own address.
    """

    topic: str
    queue_id: int = 0
    body: bytes = b""
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    properties_string: str = ""
    tags_code: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    store_host: tuple[str, int] | None = None
    reconsume_times: int = 0
    sys_flag: int = 0
    prepared_transaction_offset: int = 0
    # Set by the store when the message is appended.
    store_timestamp: int = 0
    body_crc: int = 0
    # (string, string_to_properties(string)) when whoever built the message already parsed the
    # properties string it stores: the store hands the dict to dispatch instead of parsing it
    # again, but only while ``properties_string`` is still that very string object. The dict is
    # not ``properties`` (which hooks may change) unless no put hook runs before the append
    # (new_batch_inner_messages(undelayed=True)); nobody changes it after construction.
    parsed_properties: tuple[str, dict[str, str]] | None = None

    def encoded_properties(self) -> str:
        return self.properties_string or (properties_to_string(self.properties) if self.properties else "")

    @property
    def wait_store_msg_ok(self) -> bool:
        raw = self.properties.get(MessageConst.WAIT_STORE_MSG_OK)
        return raw is None or raw.lower() == "true"

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.TAGS)


class PutMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    # Controller mode, SYNC_MASTER: fewer in-sync replicas than minInSyncReplicas; nothing stored.
    IN_SYNC_REPLICAS_NOT_ENOUGH = "IN_SYNC_REPLICAS_NOT_ENOUGH"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    # Writes refused because the disk is over diskSpaceWarningLevelRatio (RunningFlags DISK_FULL);
    # RocketMQ reports this as SERVICE_NOT_AVAILABLE, the broker maps it the same way.
    DISK_FULL = "DISK_FULL"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
    # EscapeBridge (services/broker/failover): no other broker set took the escaped message.
    PUT_TO_REMOTE_BROKER_FAIL = "PUT_TO_REMOTE_BROKER_FAIL"
    # Timer messages (services/broker/timer): the put-time conversion refused the message.
    WHEEL_TIMER_FLOW_CONTROL = "WHEEL_TIMER_FLOW_CONTROL"
    WHEEL_TIMER_MSG_ILLEGAL = "WHEEL_TIMER_MSG_ILLEGAL"
    WHEEL_TIMER_NOT_ENABLE = "WHEEL_TIMER_NOT_ENABLE"
    # enableLmq and enableMultiDispatch: a multi-dispatch message while more LMQ queues than
    # maxLmqConsumeQueueNum exist (MessageStore.put_message); nothing stored.
    LMQ_CONSUME_QUEUE_NUM_EXCEEDED = "LMQ_CONSUME_QUEUE_NUM_EXCEEDED"


class AppendMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    END_OF_FILE = "END_OF_FILE"
    MESSAGE_SIZE_EXCEEDED = "MESSAGE_SIZE_EXCEEDED"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class AppendMessageResult:
    """Where a put landed. ``msg_id`` (the offset message id; for a batch, the ids joined by
    commas as RocketMQ does) is built on first access: most callers never read it."""

    __slots__ = ("status", "wrote_offset", "wrote_bytes", "_msg_id", "_id_prefix", "store_timestamp",
                 "logics_offset", "msg_num", "offsets")

    def __init__(
        self,
        status: AppendMessageStatus,
        wrote_offset: int = 0,
        wrote_bytes: int = 0,
        msg_id: str | None = "",
        store_timestamp: int = 0,
        logics_offset: int = 0,
        msg_num: int = 1,
        offsets: list[tuple[int, int]] | None = None,
        id_prefix: str = "",
    ) -> None:
        self.status = status
        self.wrote_offset = wrote_offset
        self.wrote_bytes = wrote_bytes
        self._msg_id = msg_id
        self._id_prefix = id_prefix
        self.store_timestamp = store_timestamp
        self.logics_offset = logics_offset
        self.msg_num = msg_num
        # Per-message detail of a batch: (physical offset, queue offset) of each record.
        self.offsets = offsets

    @property
    def msg_id(self) -> str:
        if self._msg_id is None:
            self._msg_id = f"{self._id_prefix}{self.wrote_offset:016X}"
        return self._msg_id

    @msg_id.setter
    def msg_id(self, value: str) -> None:
        self._msg_id = value

    def is_ok(self) -> bool:
        return self.status is AppendMessageStatus.PUT_OK

    def __repr__(self) -> str:
        return (f"AppendMessageResult(status={self.status.name}, wrote_offset={self.wrote_offset}, "
                f"wrote_bytes={self.wrote_bytes}, msg_id={self.msg_id!r}, store_timestamp={self.store_timestamp}, "
                f"logics_offset={self.logics_offset}, msg_num={self.msg_num})")


@dataclass(slots=True)
class PutMessageResult:
    status: PutMessageStatus
    append_message_result: AppendMessageResult | None = None
    # Stored by another broker set's master (EscapeBridge#putMessageToRemoteBroker): its offsets
    # are that set's, nothing was appended to the local CommitLog.
    remote: bool = field(default=False, kw_only=True)

    def is_ok(self) -> bool:
        """True when the message is stored, even if a flush/replica wait timed out."""
        r = self.append_message_result
        return r is not None and r.is_ok()


_new = object.__new__
_APPEND_PUT_OK = AppendMessageStatus.PUT_OK


def put_ok_result(wrote_offset: int, wrote_bytes: int, store_timestamp: int, logics_offset: int,
                  id_prefix: str) -> PutMessageResult:
    """PUT_OK result of one appended record, as PutMessageResult(PUT_OK, AppendMessageResult(...)).

    The single-put append path makes one per message; filling the slots directly skips two
    Python-level __init__ calls (~75 ns of a ~2.5 µs append). Keep it in step with __init__.
    """
    r = _new(AppendMessageResult)
    r.status = _APPEND_PUT_OK
    r.wrote_offset = wrote_offset
    r.wrote_bytes = wrote_bytes
    r._msg_id = None
    r._id_prefix = id_prefix
    r.store_timestamp = store_timestamp
    r.logics_offset = logics_offset
    r.msg_num = 1
    r.offsets = None
    p = _new(PutMessageResult)
    p.status = PutMessageStatus.PUT_OK
    p.append_message_result = r
    p.remote = False
    return p


class GetMessageStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetMessageResult:
    status: GetMessageStatus
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    # Raw CommitLog records, one bytes object per message, and their queue offsets.
    message_buffer_list: list[bytes] = field(default_factory=list)
    message_queue_offset: list[int] = field(default_factory=list)
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        return len(self.message_buffer_list)

    def add_message(self, record: bytes, queue_offset: int) -> None:
        self.message_buffer_list.append(record)
        self.message_queue_offset.append(queue_offset)
        self.buffer_total_size += len(record)
