"""gRPC <-> Remoting message conversion, the way RocketMQ's proxy does it.

Inbound (SendMessageActivity.buildMessageProperty): user properties, tag, keys, UNIQ_KEY from
system_properties.message_id, delay as TIMER_DELIVER_MS (or a DELAY level), message group as
the sharding key, born host/timestamp. Outbound (GrpcConverter.buildMessage): system properties
rebuilt from the stored message's properties, MD5 body digest, delivery attempt =
reconsumeTimes + 1.
"""

from __future__ import annotations

import hashlib
import time

from google.protobuf.timestamp_pb2 import Timestamp

from orbitmq.common import sysflag
from orbitmq.common.constants import is_retry_topic
from orbitmq.common.message import STRING_HASH_SET, MessageConst, MessageExt
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proxy import validation
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.errors import ProxyError

Code = pb.Code
# Enum values looked up once: protobuf's enum wrapper attribute access is slow on hot paths.
NORMAL = pb.MessageType.NORMAL
FIFO = pb.MessageType.FIFO
DELAY = pb.MessageType.DELAY
TRANSACTION = pb.MessageType.TRANSACTION
UNSPECIFIED = pb.MessageType.MESSAGE_TYPE_UNSPECIFIED
GZIP = pb.Encoding.GZIP
IDENTITY = pb.Encoding.IDENTITY
MD5 = pb.DigestType.MD5
# Properties handed back as system properties, so not repeated among the user properties.
_NOT_USER_PROPERTIES = STRING_HASH_SET | {MessageConst.SHARDING_KEY, MessageConst.TRACE_CONTEXT}


def now_ms() -> int:
    return int(time.time() * 1000)


def timestamp_from_ms(ms: int) -> Timestamp:
    ts = Timestamp()
    ts.FromMilliseconds(int(ms))
    return ts


def build_sys_flag(message: pb.Message) -> int:
    flag = 0
    if message.system_properties.body_encoding == GZIP:
        flag |= sysflag.COMPRESSED_FLAG
    if message.system_properties.message_type == TRANSACTION:
        flag |= sysflag.TRANSACTION_PREPARED_TYPE
    return flag


def validate_body(body: bytes, config: ProxyConfig) -> None:
    if config.enable_message_body_empty_check and not body:
        raise ProxyError(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    limit = config.max_message_size
    if limit > 0 and len(body) > limit:
        raise ProxyError(Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {limit}")


def utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def timestamp_ms(ts: Timestamp) -> int:
    """Timestamp.ToMilliseconds without its Python-level call chain (same result, same error)."""
    seconds, nanos = ts.seconds, ts.nanos
    if 0 <= nanos < 1_000_000_000 and _MIN_TIMESTAMP_SECONDS <= seconds <= _MAX_TIMESTAMP_SECONDS:
        return seconds * 1000 + nanos // 1_000_000
    return ts.ToMilliseconds()  # raises protobuf's own ValueError for an invalid timestamp


# Timestamp's valid range (0001-01-01 .. 9999-12-31), as protobuf checks it.
_MIN_TIMESTAMP_SECONDS = -62135596800
_MAX_TIMESTAMP_SECONDS = 253402300799
_TAGS = MessageConst.TAGS
_KEYS = MessageConst.KEYS
_KEY_SEPARATOR = MessageConst.KEY_SEPARATOR
_UNIQ_KEY = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_RECONSUME_TIME = MessageConst.RECONSUME_TIME
_PRODUCER_GROUP = MessageConst.PRODUCER_GROUP
_SHARDING_KEY = MessageConst.SHARDING_KEY
_TRACE_CONTEXT = MessageConst.TRACE_CONTEXT
_BORN_HOST = MessageConst.BORN_HOST
_BORN_TIMESTAMP = MessageConst.BORN_TIMESTAMP


def build_message_properties(message: pb.Message, producer_group: str, remote_addr: str,
                             config: ProxyConfig) -> dict[str, str]:
    """The Remoting properties of one gRPC message; raises ProxyError for what RocketMQ refuses.

    Runs once per message sent, so it reads each field once and skips the checks of absent
    parts; the checks and their order are SendMessageActivity's.
    """
    props: dict[str, str] = {}
    user_size = 0
    user_props = message.user_properties
    if user_props:
        if len(user_props) > config.user_property_max_num:
            raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE,
                             f"too many user properties, max is {config.user_property_max_num}")
        for key, value in user_props.items():
            if key in STRING_HASH_SET:
                raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
            if validation.contains_control_character(key):
                raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                                 "the key of property cannot contain control character")
            if validation.contains_control_character(value):
                raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                                 "the value of property cannot contain control character")
            user_size += utf8_len(key) + utf8_len(value)
            props[key] = value

    sysp = message.system_properties
    tag = sysp.tag
    if tag:
        validation.validate_tag(tag)
        props[_TAGS] = tag
        user_size += utf8_len(tag)

    keys = sysp.keys
    if keys:
        for key in keys:
            validation.validate_message_key(key)
            user_size += utf8_len(key)
        props[_KEYS] = _KEY_SEPARATOR.join(keys)

    if user_size > config.max_user_property_size:
        raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE,
                         f"the total size of user property is too large, max is {config.max_user_property_size}")

    message_id = sysp.message_id
    if not message_id.strip():
        raise ProxyError(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    props[_UNIQ_KEY] = message_id

    if sysp.message_type == TRANSACTION:
        props[MessageConst.TRANSACTION_PREPARED] = "true"
        if sysp.HasField("orphaned_transaction_recovery_duration"):
            seconds = sysp.orphaned_transaction_recovery_duration.seconds
            props[MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)

    if sysp.HasField("delivery_timestamp"):
        deliver_ms = timestamp_ms(sysp.delivery_timestamp)
        now = now_ms()
        if config.max_delay_time_mills > 0 and deliver_ms - now > config.max_delay_time_mills:
            raise ProxyError(Code.ILLEGAL_DELIVERY_TIME,
                             f"the max delay time of message is too large, max is {config.max_delay_time_mills}")
        if config.use_delay_level:
            level = config.compute_delay_level(deliver_ms, now)
            if level:
                props[MessageConst.DELAY_TIME_LEVEL] = str(level)
        props[MessageConst.TIMER_DELIVER_MS] = str(deliver_ms)

    attempt = sysp.delivery_attempt
    props[_RECONSUME_TIME] = "0" if attempt == 0 else str(attempt)
    props[_PRODUCER_GROUP] = producer_group
    group = sysp.message_group
    if group:
        validation.validate_message_group(group, config.max_message_group_size)
        props[_SHARDING_KEY] = group
    trace = sysp.trace_context
    if trace:
        props[_TRACE_CONTEXT] = trace
    born_host = sysp.born_host or remote_addr
    if born_host and not born_host.isspace():
        props[_BORN_HOST] = born_host
    if sysp.HasField("born_timestamp"):
        props[_BORN_TIMESTAMP] = str(timestamp_ms(sysp.born_timestamp))
    return props


def message_type_of(props: dict[str, str]) -> int:
    """The gRPC message type a stored message was sent as."""
    if props.get(MessageConst.TRANSACTION_PREPARED) == "true":
        return TRANSACTION
    if (MessageConst.DELAY_TIME_LEVEL in props or MessageConst.TIMER_DELIVER_MS in props
            or MessageConst.TIMER_DELAY_SEC in props):
        return DELAY
    if MessageConst.SHARDING_KEY in props:
        return FIFO
    return NORMAL


def message_type_of_request(message: pb.Message) -> int:
    """The message type implied by what a producer set (for the topic type check)."""
    sysp = message.system_properties
    if sysp.message_type != UNSPECIFIED:
        return sysp.message_type
    if sysp.HasField("delivery_timestamp"):
        return DELAY
    if sysp.message_group:
        return FIFO
    return NORMAL


def build_proto_message(msg: MessageExt, topic: str | None = None) -> pb.Message:
    """GrpcConverter.buildMessage: a stored (popped or pulled) message as a gRPC Message."""
    props = msg.properties
    name = topic or msg.topic
    if topic is None and is_retry_topic(name):
        name = props.get(MessageConst.RETRY_TOPIC, name)
    sysp = pb.SystemProperties()
    tag = props.get(MessageConst.TAGS)
    if tag is not None:
        sysp.tag = tag
    keys = props.get(MessageConst.KEYS)
    if keys is not None:
        sysp.keys.extend(keys.split(MessageConst.KEY_SEPARATOR))
    uniq = props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id
    if uniq:
        sysp.message_id = uniq
    sysp.body_digest.type = MD5
    sysp.body_digest.checksum = hashlib.md5(msg.body).hexdigest().upper()
    compressed = msg.sys_flag & sysflag.COMPRESSED_FLAG == sysflag.COMPRESSED_FLAG
    sysp.body_encoding = GZIP if compressed else IDENTITY
    sysp.message_type = message_type_of(props)
    sysp.born_timestamp.CopyFrom(timestamp_from_ms(msg.born_timestamp))
    born_host = props.get(MessageConst.BORN_HOST) or msg.born_host
    if born_host:
        sysp.born_host = born_host
    sysp.store_timestamp.CopyFrom(timestamp_from_ms(msg.store_timestamp))
    if msg.store_host:
        sysp.store_host = msg.store_host
    if MessageConst.TIMER_DELAY_SEC in props:
        sysp.delivery_timestamp.CopyFrom(timestamp_from_ms(now_ms() + int(props[MessageConst.TIMER_DELAY_SEC]) * 1000))
    elif MessageConst.TIMER_DELIVER_MS in props:
        sysp.delivery_timestamp.CopyFrom(timestamp_from_ms(int(props[MessageConst.TIMER_DELIVER_MS])))
    group = props.get(MessageConst.SHARDING_KEY)
    if group is not None:
        sysp.message_group = group
    handle = props.get(MessageConst.POP_CK)
    if handle is not None:
        sysp.receipt_handle = handle
    sysp.queue_id = msg.queue_id
    sysp.queue_offset = msg.queue_offset
    sysp.delivery_attempt = msg.reconsume_times + 1
    trace = props.get(MessageConst.TRACE_CONTEXT)
    if trace is not None:
        sysp.trace_context = trace
    dlq_topic = props.get(MessageConst.DLQ_ORIGIN_TOPIC)
    dlq_id = props.get(MessageConst.DLQ_ORIGIN_MESSAGE_ID)
    if dlq_topic is not None and dlq_id is not None:
        sysp.dead_letter_queue.topic = dlq_topic
        sysp.dead_letter_queue.message_id = dlq_id
    user = {k: v for k, v in props.items() if k not in _NOT_USER_PROPERTIES}
    return pb.Message(topic=pb.Resource(name=name), user_properties=user, system_properties=sysp, body=msg.body)
