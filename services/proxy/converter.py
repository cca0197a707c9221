"""gRPC <-> Remoting message conversion, the way RocketMQ's proxy does it.

Inbound (SendMessageActivity.buildMessageProperty): user properties, tag, keys, UNIQ_KEY from
system_properties.message_id, delay as TIMER_DELIVER_MS (or a DELAY level), message group as
the sharding key, born host/timestamp. Outbound (GrpcConverter.buildMessage): system properties
rebuilt from the stored message's properties, MD5 body digest, delivery attempt =
reconsumeTimes + 1. A zlib body goes out as Encoding.GZIP, an LZ4 or ZSTD one inflated.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Mapping, Sequence
from itertools import repeat

from orbitmq.common import speedups, sysflag
from orbitmq.common.compression import CompressionError, decompress_by_sys_flag
from orbitmq.common.constants import is_retry_topic
from orbitmq.common.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    STRING_HASH_SET,
    MessageConst,
    MessageExt,
    properties_to_string,
)
from orbitmq.common.namespace import NAMESPACE_SEPARATOR, namespace_of, without_namespace
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.pool import Timestamp
from orbitmq.proxy import validation
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.errors import ProxyError

log = logging.getLogger(__name__)

Code = pb.Code
# Enum values looked up once: protobuf's enum wrapper attribute access is slow on hot paths.
NORMAL = pb.MessageType.NORMAL
FIFO = pb.MessageType.FIFO
DELAY = pb.MessageType.DELAY
TRANSACTION = pb.MessageType.TRANSACTION
PRIORITY = pb.MessageType.PRIORITY
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


def check_batch_transactions(properties: Sequence[str], sys_flag: int) -> None:
    """A batch is sent with its first message's sysFlag (SendMessageActivity#buildSysFlag): in a batch
    mixing transactional and other messages some would be stored as what they are not. Beyond
    upstream, which has the same gap, it is refused with MESSAGE_CORRUPTED, the code
    SendMessageActivity gives a batch whose messages disagree (their topics).

    Read from the properties strings just written (one C-level scan each, no protobuf access): a
    transactional message's holds ``\x02TRAN_MSG\x01true\x02`` right after UNIQ_KEY, and no other
    part can hold those separators (every value with a control character is refused)."""
    marked = sum(map(str.__contains__, properties, repeat(_TRANSACTION_MARK)))
    if marked != (len(properties) if sys_flag & sysflag.TRANSACTION_PREPARED_TYPE else 0):
        raise ProxyError(Code.MESSAGE_CORRUPTED, "a batch cannot mix transactional and other messages")


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
_PRIORITY = MessageConst.PRIORITY
_TRACE_CONTEXT = MessageConst.TRACE_CONTEXT
_BORN_HOST = MessageConst.BORN_HOST
_BORN_TIMESTAMP = MessageConst.BORN_TIMESTAMP


def _check_user_size_and_message_id(user_size: int, message_id: str, config: ProxyConfig) -> None:
    """SendMessageActivity's checks once user properties, tag and keys have been counted."""
    if user_size > config.max_user_property_size:
        raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE,
                         f"the total size of user property is too large, max is {config.max_user_property_size}")
    if not message_id.strip():
        raise ProxyError(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    # Beyond upstream (fuzz finding): the id becomes UNIQ_KEY inside the properties string, so a
    # \x01/\x02 in it would smuggle in other properties; control characters are refused.
    if validation.contains_control_character(message_id):
        raise ProxyError(Code.ILLEGAL_MESSAGE_ID, "message id cannot contain control character")


def _check_no_control(value: str, what: str) -> None:
    """Beyond upstream (fuzz finding): system properties a client sets verbatim (trace context, born
    host) must not carry \x01/\x02, which would smuggle other properties into the string."""
    if not value.isprintable() and validation.contains_control_character(value):
        raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"the {what} cannot contain control character")


def _check_no_control_in_property(key: str, value: str) -> None:
    """SendMessageActivity's control-character checks of one user property, key first."""
    if validation.contains_control_character(key):
        raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the key of property cannot contain control character")
    if validation.contains_control_character(value):
        raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                         "the value of property cannot contain control character")


def _check_user_property_count(user_props: Mapping[str, str], config: ProxyConfig) -> None:
    if len(user_props) > config.user_property_max_num:
        raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE,
                         f"too many user properties, max is {config.user_property_max_num}")


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
        _check_user_property_count(user_props, config)
        for key, value in user_props.items():
            if key in STRING_HASH_SET:
                raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
            _check_no_control_in_property(key, value)
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

    message_id = sysp.message_id
    _check_user_size_and_message_id(user_size, message_id, config)
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
        _check_no_control(trace, "trace context")
        props[_TRACE_CONTEXT] = trace
    born_host = sysp.born_host or remote_addr
    if born_host and not born_host.isspace():
        _check_no_control(born_host, "born host")
        props[_BORN_HOST] = born_host
    if sysp.HasField("born_timestamp"):
        props[_BORN_TIMESTAMP] = str(timestamp_ms(sysp.born_timestamp))
    if sysp.HasField("priority"):
        # SendMessageActivity#buildMessage: Message#setPriority, which refuses a negative one.
        priority = sysp.priority
        if priority < 0:
            raise ProxyError(Code.BAD_REQUEST, f"the priority must be greater than or equal to 0, got {priority}")
        props[_PRIORITY] = str(priority)
    return props


# System properties a user property may also name (they are not in STRING_HASH_SET): the dict of
# build_message_properties then overwrites the user's value in place, so such messages take that path.
_SHADOWED = frozenset({MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS, _SHARDING_KEY, _TRACE_CONTEXT})
_RESERVED_OR_SHADOWED = STRING_HASH_SET | _SHADOWED
_PS = PROPERTY_SEPARATOR
# "NAME\x01" of every property the proxy sets, in build_message_properties' order.
_TAGS_ = _TAGS + NAME_VALUE_SEPARATOR
_KEYS_ = _KEYS + NAME_VALUE_SEPARATOR
_UNIQ_ = _UNIQ_KEY + NAME_VALUE_SEPARATOR
_TRAN_TRUE = f"{MessageConst.TRANSACTION_PREPARED}{NAME_VALUE_SEPARATOR}true{_PS}"
_TRANSACTION_MARK = f"{_PS}{_TRAN_TRUE}"  # check_batch_transactions
_IMMUNITY_ = MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS + NAME_VALUE_SEPARATOR
_DELAY_ = MessageConst.DELAY_TIME_LEVEL + NAME_VALUE_SEPARATOR
_DELIVER_ = MessageConst.TIMER_DELIVER_MS + NAME_VALUE_SEPARATOR
_RECONSUME_ = _RECONSUME_TIME + NAME_VALUE_SEPARATOR
_PGROUP_ = _PRODUCER_GROUP + NAME_VALUE_SEPARATOR
_SHARDING_ = _SHARDING_KEY + NAME_VALUE_SEPARATOR
_TRACE_ = _TRACE_CONTEXT + NAME_VALUE_SEPARATOR
_BORN_HOST_ = _BORN_HOST + NAME_VALUE_SEPARATOR
_BORN_TIMESTAMP_ = _BORN_TIMESTAMP + NAME_VALUE_SEPARATOR
_NV = NAME_VALUE_SEPARATOR


# Compiled twin: _speedups_producer.encode_message_properties (same result; hands back the rest).
def encode_message_properties(message: pb.Message, producer_group: str, remote_addr: str,
                              config: ProxyConfig) -> tuple[str, str, int]:
    """properties_to_string(build_message_properties(...)) in one pass, plus what the send needs.

    Returns (properties string, message id, message type as message_type_of_request sees it).
    Same checks in the same order and the same string (property order included) as the dict
    path, without the dict: each protobuf field is read once and the string is built directly,
    in build_message_properties' property order.
    """
    user_props = message.user_properties
    if user_props:
        user = _user_properties_part(user_props, config)
        if user is None:  # a user property a system one overwrites in place: the dict keeps that order
            return _encode_via_dict(message, producer_group, remote_addr, config)
        user_part, user_size = user
    else:
        user_part, user_size = "", 0
    sysp = message.system_properties
    if sysp.HasField("priority"):  # rare: the dict path writes the property and its check
        return _encode_via_dict(message, producer_group, remote_addr, config)
    tag = sysp.tag
    keys = sysp.keys
    if tag or keys:
        tag_keys_part, user_size = _tag_and_keys_part(tag, keys, user_size)
    else:
        tag_keys_part = ""
    message_id = sysp.message_id
    _check_user_size_and_message_id(user_size, message_id, config)
    message_type = sysp.message_type
    tran_part = _transaction_part(sysp) if message_type == TRANSACTION else ""
    has_delivery = sysp.HasField("delivery_timestamp")
    delay_part = _delivery_part(sysp.delivery_timestamp, config) if has_delivery else ""
    group = sysp.message_group
    origin_part = _origin_part(sysp, group, remote_addr, config)
    return (f"{user_part}{tag_keys_part}{_UNIQ_}{message_id}{_PS}{tran_part}{delay_part}"
            f"{_RECONSUME_}{sysp.delivery_attempt}{_PS}{_PGROUP_}{producer_group}{_PS}{origin_part}",
            message_id, _implied_message_type(message_type, has_delivery, group))


def _user_properties_part(user_props: Mapping[str, str], config: ProxyConfig) -> tuple[str, int] | None:
    """("KEY\\x01VALUE\\x02" of each user property, their UTF-8 size); None: the dict path must write them.

    SendMessageActivity's checks (count, reserved key, control characters), in its order.
    """
    _check_user_property_count(user_props, config)
    parts: list[str] = []
    size = 0
    for key, value in user_props.items():
        if key in _RESERVED_OR_SHADOWED:
            if key in STRING_HASH_SET:
                raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
            return None
        # Printable text holds no control character: one C call decides the common case.
        if not (key.isprintable() and value.isprintable()):
            _check_no_control_in_property(key, value)
        size += ((len(key) if key.isascii() else len(key.encode("utf-8")))
                 + (len(value) if value.isascii() else len(value.encode("utf-8"))))
        parts.append(f"{key}{_NV}{value}{_PS}")
    return "".join(parts), size


def _tag_and_keys_part(tag: str, keys: Sequence[str], user_size: int) -> tuple[str, int]:
    """The TAGS and KEYS properties, validated, and the user size with them counted (as upstream)."""
    part = ""
    if tag:
        if "|" in tag or not tag.isprintable() or not tag.strip():
            validation.validate_tag(tag)  # raises the error of the first failing check, if any
        part = f"{_TAGS_}{tag}{_PS}"
        user_size += len(tag) if tag.isascii() else len(tag.encode("utf-8"))
    if keys:
        for key in keys:
            validation.validate_message_key(key)
            user_size += utf8_len(key)
        part = f"{part}{_KEYS_}{_KEY_SEPARATOR.join(keys)}{_PS}"
    return part, user_size


def _transaction_part(sysp: pb.SystemProperties) -> str:
    """TRAN_MSG=true, and the check immunity time when the producer set one."""
    if sysp.HasField("orphaned_transaction_recovery_duration"):
        return f"{_TRAN_TRUE}{_IMMUNITY_}{sysp.orphaned_transaction_recovery_duration.seconds}{_PS}"
    return _TRAN_TRUE


def _delivery_part(delivery: Timestamp, config: ProxyConfig) -> str:
    """TIMER_DELIVER_MS (after a DELAY level where config.use_delay_level maps the time to one)."""
    deliver_ms = timestamp_ms(delivery)
    now = now_ms()
    if config.max_delay_time_mills > 0 and deliver_ms - now > config.max_delay_time_mills:
        raise ProxyError(Code.ILLEGAL_DELIVERY_TIME,
                         f"the max delay time of message is too large, max is {config.max_delay_time_mills}")
    part = f"{_DELIVER_}{deliver_ms}{_PS}"
    if config.use_delay_level:
        level = config.compute_delay_level(deliver_ms, now)
        if level:
            return f"{_DELAY_}{level}{_PS}{part}"
    return part


def _origin_part(sysp: pb.SystemProperties, group: str, remote_addr: str, config: ProxyConfig) -> str:
    """The properties after PGROUP: sharding key (message group), trace context, born host and time."""
    part = ""
    if group:
        validation.validate_message_group(group, config.max_message_group_size)
        part = f"{_SHARDING_}{group}{_PS}"
    trace = sysp.trace_context
    if trace:
        _check_no_control(trace, "trace context")
        part = f"{part}{_TRACE_}{trace}{_PS}"
    born_host = sysp.born_host or remote_addr
    if born_host and not born_host.isspace():
        _check_no_control(born_host, "born host")
        part = f"{part}{_BORN_HOST_}{born_host}{_PS}"
    if sysp.HasField("born_timestamp"):
        ts = sysp.born_timestamp
        seconds, nanos = ts.seconds, ts.nanos  # timestamp_ms inlined: it runs for every message
        if 0 <= nanos < 1_000_000_000 and _MIN_TIMESTAMP_SECONDS <= seconds <= _MAX_TIMESTAMP_SECONDS:
            return f"{part}{_BORN_TIMESTAMP_}{seconds * 1000 + nanos // 1_000_000}{_PS}"
        return f"{part}{_BORN_TIMESTAMP_}{timestamp_ms(ts)}{_PS}"
    return part


def _implied_message_type(declared: int, has_delivery: bool, group: str, has_priority: bool = False) -> int:
    """The message type a producer's fields imply (message_type_of_request), the way upstream's
    TopicMessageType#parseFromMessageProperty reads the properties they become: TRAN_MSG (set for a
    declared TRANSACTION only), then a delivery time (DELAY), then a message group (FIFO), then a
    priority (PRIORITY, RIP-80), else NORMAL. A declared NORMAL, FIFO, DELAY or PRIORITY is not looked at: a FIFO message without a group is
    NORMAL (a FIFO topic refuses it), a NORMAL one with a group FIFO (a NORMAL topic refuses it)."""
    if declared == TRANSACTION:
        return TRANSACTION
    if has_delivery:
        return DELAY
    if group:
        return FIFO
    # RIP-80: the priority property ranks after the message group (parseFromMessageProperty).
    return PRIORITY if has_priority else NORMAL


_py_encode_message_properties = encode_message_properties


def _encode_via_dict(message: pb.Message, producer_group: str, remote_addr: str,
                     config: ProxyConfig) -> tuple[str, str, int]:
    props = build_message_properties(message, producer_group, remote_addr, config)
    return (properties_to_string(props), message.system_properties.message_id,
            message_type_of_request(message))


def message_type_of(props: dict[str, str]) -> int:
    """The gRPC message type a stored message was sent as."""
    if props.get(MessageConst.TRANSACTION_PREPARED) == "true":
        return TRANSACTION
    if (MessageConst.DELAY_TIME_LEVEL in props or MessageConst.TIMER_DELIVER_MS in props
            or MessageConst.TIMER_DELAY_SEC in props):
        return DELAY
    if MessageConst.SHARDING_KEY in props:
        return FIFO
    if _PRIORITY in props:
        return PRIORITY
    return NORMAL


def message_type_of_request(message: pb.Message) -> int:
    """The message type implied by what a producer set (for the topic type check)."""
    sysp = message.system_properties
    return _implied_message_type(sysp.message_type, sysp.HasField("delivery_timestamp"), sysp.message_group,
                                 sysp.HasField("priority"))


_COMPRESSED = sysflag.COMPRESSED_FLAG
_COMPRESSION_TYPE = sysflag.COMPRESSION_TYPE_COMPARATOR
_ZLIB_TYPES = (0, sysflag.COMPRESSION_ZLIB_TYPE)  # no type bits: a 4.x producer's zlib
_decompress_by_sys_flag = decompress_by_sys_flag
_RETRY_TOPIC = MessageConst.RETRY_TOPIC
_POP_CK = MessageConst.POP_CK
_TIMER_DELAY_SEC = MessageConst.TIMER_DELAY_SEC
_TIMER_DELIVER_MS = MessageConst.TIMER_DELIVER_MS
_DELAY_TIME_LEVEL = MessageConst.DELAY_TIME_LEVEL
_TRANSACTION_PREPARED = MessageConst.TRANSACTION_PREPARED
_DLQ_ORIGIN_TOPIC = MessageConst.DLQ_ORIGIN_TOPIC
_DLQ_ORIGIN_MESSAGE_ID = MessageConst.DLQ_ORIGIN_MESSAGE_ID
_MIN_TIMESTAMP_MS = _MIN_TIMESTAMP_SECONDS * 1000
_MAX_TIMESTAMP_MS = _MAX_TIMESTAMP_SECONDS * 1000 + 999
_md5 = hashlib.md5
_SEPARATOR = NAMESPACE_SEPARATOR


def set_timestamp_ms(ts: Timestamp, ms: int) -> None:
    """ts.FromMilliseconds(ms) without its Python-level checks for the valid range (same fields)."""
    if _MIN_TIMESTAMP_MS <= ms <= _MAX_TIMESTAMP_MS:
        ts.seconds = ms // 1000
        ts.nanos = ms % 1000 * 1_000_000
    else:
        ts.FromMilliseconds(ms)  # raises protobuf's own ValueError


def build_proto_message(msg: MessageExt, topic: str | None = None) -> pb.Message:
    """GrpcConverter.buildMessage: a stored (popped or pulled) message as a gRPC Message."""
    message = pb.Message()
    fill_proto_message(message, msg, topic)
    return message


def fill_proto_message(message: pb.Message, msg: MessageExt, topic: str | None = None) -> None:
    """build_proto_message into an empty Message, e.g. the one inside a ReceiveMessageResponse.

    Runs once per delivered message, so the fields are set in place (a Message passed to a
    constructor is copied, body included) and each property is looked up once.
    """
    props = msg.properties
    get = props.get
    name = topic or msg.topic
    if topic is None and is_retry_topic(name):
        name = get(_RETRY_TOPIC, name)
    body = msg.body
    sys_flag = msg.sys_flag
    encoding = IDENTITY
    if sys_flag & _COMPRESSED:
        if sys_flag & _COMPRESSION_TYPE in _ZLIB_TYPES:
            encoding = GZIP  # Encoding.GZIP is zlib's stream: the client inflates it
        else:
            # LZ4 and ZSTD have no gRPC Encoding: inflated here, as upstream's proxy inflates
            # every body (MessageDecoder#decodesBatch with deCompressBody).
            try:
                body = _decompress_by_sys_flag(body, sys_flag)
            except CompressionError as exc:  # delivered as stored rather than failing the batch
                log.warning("message %s of %s: body sent as stored (%s)", msg.msg_id, msg.topic, exc)
    message.body = body
    user = {k: v for k, v in props.items() if k not in _NOT_USER_PROPERTIES}
    if user:
        message.user_properties.update(user)
    resource = message.topic
    if _SEPARATOR in name:  # GrpcConverter#buildResource: "ns%topic" answers Resource{ns, topic}
        resource.resource_namespace = namespace_of(name)
        name = without_namespace(name)
    resource.name = name
    sysp = message.system_properties
    tag = get(_TAGS)
    if tag is not None:
        sysp.tag = tag
    keys = get(_KEYS)
    if keys is not None:
        sysp.keys.extend(keys.split(_KEY_SEPARATOR))
    uniq = get(_UNIQ_KEY) or msg.msg_id
    if uniq:
        sysp.message_id = uniq
    digest = sysp.body_digest
    digest.type = MD5
    digest.checksum = _md5(body).hexdigest().upper()
    sysp.body_encoding = encoding
    # message_type_of, inlined.
    if get(_TRANSACTION_PREPARED) == "true":
        sysp.message_type = TRANSACTION
    elif _DELAY_TIME_LEVEL in props or _TIMER_DELIVER_MS in props or _TIMER_DELAY_SEC in props:
        sysp.message_type = DELAY
    elif _SHARDING_KEY in props:
        sysp.message_type = FIFO
    elif _PRIORITY in props:
        sysp.message_type = PRIORITY
    else:
        sysp.message_type = NORMAL
    set_timestamp_ms(sysp.born_timestamp, int(msg.born_timestamp))
    born_host = get(_BORN_HOST) or msg.born_host
    if born_host:
        sysp.born_host = born_host
    set_timestamp_ms(sysp.store_timestamp, int(msg.store_timestamp))
    if msg.store_host:
        sysp.store_host = msg.store_host
    if _TIMER_DELAY_SEC in props:
        set_timestamp_ms(sysp.delivery_timestamp, now_ms() + int(props[_TIMER_DELAY_SEC]) * 1000)
    elif _TIMER_DELIVER_MS in props:
        set_timestamp_ms(sysp.delivery_timestamp, int(props[_TIMER_DELIVER_MS]))
    group = get(_SHARDING_KEY)
    if group is not None:
        sysp.message_group = group
    priority = get(_PRIORITY)
    if priority is not None and priority.isdigit():
        sysp.priority = int(priority)
    handle = get(_POP_CK)
    if handle is not None:
        sysp.receipt_handle = handle
    sysp.queue_id = msg.queue_id
    sysp.queue_offset = msg.queue_offset
    sysp.delivery_attempt = msg.reconsume_times + 1
    trace = get(_TRACE_CONTEXT)
    if trace is not None:
        sysp.trace_context = trace
    dlq_topic = get(_DLQ_ORIGIN_TOPIC)
    if dlq_topic is not None:
        dlq_id = get(_DLQ_ORIGIN_MESSAGE_ID)
        if dlq_id is not None:
            dlq = sysp.dead_letter_queue
            dlq.topic = without_namespace(dlq_topic) if _SEPARATOR in dlq_topic else dlq_topic
            dlq.message_id = dlq_id


_fast = speedups.load("orbitmq.proxy._speedups_producer")  # None: the code above runs
if _fast is not None:
    encode_message_properties = _fast.encode_message_properties
