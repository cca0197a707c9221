# cython: language_level=3
"""Compiled SendMessage path of the proxy: a batch of gRPC messages into Remoting properties.

Swapped in at the end of producer.py (``encode_messages``, ``ok_response``) and converter.py
(``encode_message_properties``); the pure-Python functions there (``_py_<name>``) stay the
fallback and the oracle.

Reading a upb message field by field costs ~70 ns an attribute, in C as in Python, so each
message is serialized once (one C call, ~0.3 us) and its wire bytes are read here instead.
Only the common shape is written here: no user properties, no delivery timestamp, not a
transaction, printable ASCII tag/keys/group/message id/born host, a valid born timestamp.
Anything else (every refusal included) goes to the Python function for that message, so the
values, the errors and their order are the Python code's.

The field numbers and types this reader and the response writer rely on are WIRE_FIELDS, checked
against the generated descriptors when the module is imported: a mismatch raises
WireFieldsMismatch, which orbitmq.common.speedups.load passes on, so importing converter.py or
producer.py fails (the proxy does not start) rather than misreading messages or silently running
the slow path. The Python code reads through protobuf and needs no such table.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.unicode cimport PyUnicode_CheckExact, PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdio cimport snprintf
from libc.string cimport memcmp, memcpy

from google.protobuf import timestamp_pb2 as _timestamp_pb
from google.protobuf.descriptor import FieldDescriptor as _FieldDescriptor

from orbitmq.common.message import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageConst
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as _pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as _spb
from orbitmq.proxy import errors as _errors

# gRPC message types (definition.proto).
DEF MT_UNSPECIFIED = 0
DEF MT_NORMAL = 1
DEF MT_FIFO = 2
DEF MT_DELAY = 3
# Timestamp's valid range (0001-01-01 .. 9999-12-31), as protobuf checks it.
DEF MIN_TIMESTAMP_SECONDS = -62135596800
DEF MAX_TIMESTAMP_SECONDS = 253402300799
DEF STACK_BUFFER = 1024
DEF MAX_KEYS = 16

assert (_pb.MessageType.MESSAGE_TYPE_UNSPECIFIED, _pb.MessageType.NORMAL, _pb.MessageType.FIFO,
        _pb.MessageType.DELAY) == (MT_UNSPECIFIED, MT_NORMAL, MT_FIFO, MT_DELAY)


def _prefix(name: str) -> bytes:
    return (name + NAME_VALUE_SEPARATOR).encode("utf-8")


# "NAME\x01" of each property the proxy sets, in build_message_properties' order.
cdef bytes TAGS_ = _prefix(MessageConst.TAGS)
cdef bytes KEYS_ = _prefix(MessageConst.KEYS)
cdef bytes UNIQ_ = _prefix(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
cdef bytes RECONSUME_ = _prefix(MessageConst.RECONSUME_TIME)
cdef bytes PGROUP_ = _prefix(MessageConst.PRODUCER_GROUP)
cdef bytes SHARDING_ = _prefix(MessageConst.SHARDING_KEY)
cdef bytes TRACE_ = _prefix(MessageConst.TRACE_CONTEXT)
cdef bytes BORN_HOST_ = _prefix(MessageConst.BORN_HOST)
cdef bytes BORN_TIMESTAMP_ = _prefix(MessageConst.BORN_TIMESTAMP)
cdef bytes PS_ = PROPERTY_SEPARATOR.encode("utf-8")
cdef bytes KEY_SEPARATOR_ = MessageConst.KEY_SEPARATOR.encode("utf-8")
assert len(PS_) == 1 and len(KEY_SEPARATOR_) == 1
cdef unsigned char PS = PS_[0]
cdef unsigned char KEY_SEPARATOR = KEY_SEPARATOR_[0]


# ---- protobuf wire format -------------------------------------------------------------------

cdef enum:
    # Wire types (protobuf's encoding guide).
    WT_VARINT = 0
    WT_FIXED64 = 1
    WT_LEN = 2
    WT_FIXED32 = 5
    # Field numbers (service.proto, definition.proto, google/protobuf/timestamp.proto).
    REQUEST_MESSAGES = 1            # SendMessageRequest.messages
    MESSAGE_TOPIC = 1               # Message
    MESSAGE_USER_PROPERTIES = 2
    MESSAGE_SYSTEM_PROPERTIES = 3
    MESSAGE_BODY = 4
    RESOURCE_NAMESPACE = 1          # Resource
    RESOURCE_NAME = 2
    SYS_TAG = 1                     # SystemProperties
    SYS_KEYS = 2
    SYS_MESSAGE_ID = 3
    SYS_MESSAGE_TYPE = 6
    SYS_BORN_TIMESTAMP = 7
    SYS_BORN_HOST = 8
    SYS_DELIVERY_TIMESTAMP = 11
    SYS_DELIVERY_ATTEMPT = 16
    SYS_MESSAGE_GROUP = 17
    SYS_TRACE_CONTEXT = 18
    SYS_PRIORITY = 22               # RIP-80: a priority message, left to the Python path
    TIMESTAMP_SECONDS = 1           # google.protobuf.Timestamp
    TIMESTAMP_NANOS = 2
    RESPONSE_STATUS = 1             # SendMessageResponse
    RESPONSE_ENTRIES = 2
    ENTRY_STATUS = 1                # SendResultEntry
    ENTRY_MESSAGE_ID = 2
    ENTRY_OFFSET = 4
    # The tag bytes ok_response writes: field number << 3 | wire type, each below 16 (one byte).
    RESPONSE_STATUS_TAG = RESPONSE_STATUS << 3 | WT_LEN
    RESPONSE_ENTRIES_TAG = RESPONSE_ENTRIES << 3 | WT_LEN
    ENTRY_STATUS_TAG = ENTRY_STATUS << 3 | WT_LEN
    ENTRY_MESSAGE_ID_TAG = ENTRY_MESSAGE_ID << 3 | WT_LEN
    ENTRY_OFFSET_TAG = ENTRY_OFFSET << 3 | WT_VARINT

_DEFINITION = _pb.DESCRIPTOR
_SERVICE = _spb.DESCRIPTOR
_TIMESTAMP = _timestamp_pb.DESCRIPTOR
# (file, message, field, number, type): every field read or written above, with the type it is
# read as ("repeated " when it may occur more than once; a message field names its message).
WIRE_FIELDS = (
    (_SERVICE, "SendMessageRequest", "messages", REQUEST_MESSAGES, "repeated apache.rocketmq.v2.Message"),
    (_DEFINITION, "Message", "topic", MESSAGE_TOPIC, "apache.rocketmq.v2.Resource"),
    (_DEFINITION, "Message", "user_properties", MESSAGE_USER_PROPERTIES,
     "repeated apache.rocketmq.v2.Message.UserPropertiesEntry"),
    (_DEFINITION, "Message", "system_properties", MESSAGE_SYSTEM_PROPERTIES, "apache.rocketmq.v2.SystemProperties"),
    (_DEFINITION, "Message", "body", MESSAGE_BODY, "bytes"),
    (_DEFINITION, "Resource", "resource_namespace", RESOURCE_NAMESPACE, "string"),
    (_DEFINITION, "Resource", "name", RESOURCE_NAME, "string"),
    (_DEFINITION, "SystemProperties", "tag", SYS_TAG, "string"),
    (_DEFINITION, "SystemProperties", "keys", SYS_KEYS, "repeated string"),
    (_DEFINITION, "SystemProperties", "message_id", SYS_MESSAGE_ID, "string"),
    (_DEFINITION, "SystemProperties", "message_type", SYS_MESSAGE_TYPE, "enum"),
    (_DEFINITION, "SystemProperties", "born_timestamp", SYS_BORN_TIMESTAMP, "google.protobuf.Timestamp"),
    (_DEFINITION, "SystemProperties", "born_host", SYS_BORN_HOST, "string"),
    (_DEFINITION, "SystemProperties", "delivery_timestamp", SYS_DELIVERY_TIMESTAMP, "google.protobuf.Timestamp"),
    (_DEFINITION, "SystemProperties", "delivery_attempt", SYS_DELIVERY_ATTEMPT, "int32"),
    (_DEFINITION, "SystemProperties", "message_group", SYS_MESSAGE_GROUP, "string"),
    (_DEFINITION, "SystemProperties", "trace_context", SYS_TRACE_CONTEXT, "string"),
    (_DEFINITION, "SystemProperties", "priority", SYS_PRIORITY, "int32"),
    (_TIMESTAMP, "Timestamp", "seconds", TIMESTAMP_SECONDS, "int64"),
    (_TIMESTAMP, "Timestamp", "nanos", TIMESTAMP_NANOS, "int32"),
    (_SERVICE, "SendMessageResponse", "status", RESPONSE_STATUS, "apache.rocketmq.v2.Status"),
    (_SERVICE, "SendMessageResponse", "entries", RESPONSE_ENTRIES, "repeated apache.rocketmq.v2.SendResultEntry"),
    (_SERVICE, "SendResultEntry", "status", ENTRY_STATUS, "apache.rocketmq.v2.Status"),
    (_SERVICE, "SendResultEntry", "message_id", ENTRY_MESSAGE_ID, "string"),
    (_SERVICE, "SendResultEntry", "offset", ENTRY_OFFSET, "int64"),
)
_TYPE_NAMES = {getattr(_FieldDescriptor, name): name[5:].lower()
               for name in dir(_FieldDescriptor) if name.startswith("TYPE_")}


class WireFieldsMismatch(RuntimeError):
    """The generated descriptors disagree with the field numbers or types this reader was written for."""


def _described_as(field) -> str:
    """A descriptor field in WIRE_FIELDS' notation."""
    kind = field.message_type.full_name if field.type == _FieldDescriptor.TYPE_MESSAGE else _TYPE_NAMES[field.type]
    repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == _FieldDescriptor.LABEL_REPEATED
    return f"repeated {kind}" if repeated else kind


def check_wire_fields(table=WIRE_FIELDS) -> None:
    """Raises WireFieldsMismatch naming every row of ``table`` the descriptors contradict."""
    wrong = []
    for file, message_name, field_name, number, kind in table:
        message = file.message_types_by_name.get(message_name)
        field = message.fields_by_name.get(field_name) if message is not None else None
        if field is None:
            wrong.append(f"{file.package}.{message_name}.{field_name}: not in {file.name}")
        elif field.number != number or _described_as(field) != kind:
            wrong.append(f"{field.full_name}: read as field {number} ({kind}), "
                         f"{file.name} has {field.number} ({_described_as(field)})")
    if wrong:
        raise WireFieldsMismatch(
            "services/proxy/_speedups_producer.pyx does not match the generated protobuf code: "
            + "; ".join(wrong) + ". Fix its field table and rebuild it (setup.py build_ext), "
            "or run with ORBITMQ_NO_SPEEDUPS=1 meanwhile.")


check_wire_fields()

cdef struct Span:
    Py_ssize_t start
    Py_ssize_t size


cdef struct Parsed:
    # pb.Message
    Span ns
    Span name
    Span body
    bint has_user
    # pb.SystemProperties
    Span tag
    Span message_id
    Span born_host
    Span group
    Span trace
    Span keys[MAX_KEYS]
    Py_ssize_t keys_count
    Py_ssize_t keys_size   # bytes of all keys, separators excluded
    bint keys_plain        # at most MAX_KEYS, each passing validate_message_key as printable ASCII
    int32_t message_type
    int32_t attempt
    bint has_delivery
    bint has_born
    int64_t born_seconds
    int32_t born_nanos


cdef inline bint read_varint(const unsigned char* buf, Py_ssize_t* pos, Py_ssize_t end,
                             uint64_t* out) noexcept nogil:
    """Base-128 varint at pos (at most 10 bytes); False when truncated or too long."""
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef unsigned char byte
    while pos[0] < end and shift < 70:
        byte = buf[pos[0]]
        pos[0] += 1
        result |= (<uint64_t>(byte & 0x7F)) << shift
        if byte < 0x80:
            out[0] = result
            return True
        shift += 7
    return False


cdef inline bint read_span(const unsigned char* buf, Py_ssize_t* pos, Py_ssize_t end, Span* out) noexcept nogil:
    """A length-delimited field's payload, checked to lie inside [pos, end)."""
    cdef uint64_t size
    if not read_varint(buf, pos, end, &size) or size > <uint64_t>(end - pos[0]):
        return False
    out.start = pos[0]
    out.size = <Py_ssize_t>size
    pos[0] += <Py_ssize_t>size
    return True


cdef inline bint skip_field(const unsigned char* buf, Py_ssize_t* pos, Py_ssize_t end, int wire_type) noexcept nogil:
    cdef uint64_t ignored
    cdef Span span
    if wire_type == WT_VARINT:
        return read_varint(buf, pos, end, &ignored)
    if wire_type == WT_FIXED64:
        if end - pos[0] < 8:
            return False
        pos[0] += 8
        return True
    if wire_type == WT_LEN:
        return read_span(buf, pos, end, &span)
    if wire_type == WT_FIXED32:
        if end - pos[0] < 4:
            return False
        pos[0] += 4
        return True
    return False  # groups: not in these messages, leave them to the Python path


cdef inline bint read_tag(const unsigned char* buf, Py_ssize_t* pos, Py_ssize_t end, uint64_t* field,
                          int* wire_type) noexcept nogil:
    cdef uint64_t key
    if not read_varint(buf, pos, end, &key):
        return False
    field[0] = key >> 3
    wire_type[0] = <int>(key & 7)
    return True


cdef inline bint is_plain(const unsigned char* buf, Span span) noexcept nogil:
    """Printable ASCII (so no control character) with a non-space byte (so strip() keeps it)."""
    cdef Py_ssize_t i
    cdef unsigned char c
    cdef bint blank = True
    for i in range(span.start, span.start + span.size):
        c = buf[i]
        if c < 0x20 or c > 0x7E:
            return False
        if c != 0x20:
            blank = False
    return not blank


cdef inline bint is_ascii_space(const unsigned char* buf, Span span) noexcept nogil:
    """str.isspace() of ASCII text: \\t \\n \\v \\f \\r, \\x1c-\\x1f and space, at least one."""
    cdef Py_ssize_t i
    cdef unsigned char c
    for i in range(span.start, span.start + span.size):
        c = buf[i]
        if not (0x09 <= c <= 0x0D or 0x1C <= c <= 0x20):
            return False
    return span.size > 0


cdef inline bint has_control(const unsigned char* buf, Span span) noexcept nogil:
    """UTF-8 text holding U+0000-U+001F or U+007F-U+009F (validation.contains_control_character)."""
    cdef Py_ssize_t i
    cdef Py_ssize_t stop = span.start + span.size
    cdef unsigned char c
    for i in range(span.start, stop):
        c = buf[i]
        if c < 0x20 or c == 0x7F or (c == 0xC2 and i + 1 < stop and 0x80 <= buf[i + 1] <= 0x9F):
            return True
    return False


cdef inline bint is_ascii(const unsigned char* buf, Span span) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(span.start, span.start + span.size):
        if buf[i] >= 0x80:
            return False
    return True


cdef bint parse_timestamp(const unsigned char* buf, Span span, int64_t* seconds, int32_t* nanos) noexcept nogil:
    """google.protobuf.Timestamp; fields seen again overwrite (protobuf's merge of a repeated message)."""
    cdef Py_ssize_t pos = span.start
    cdef Py_ssize_t end = span.start + span.size
    cdef uint64_t field, value
    cdef int wire_type
    while pos < end:
        if not read_tag(buf, &pos, end, &field, &wire_type):
            return False
        if (field == TIMESTAMP_SECONDS or field == TIMESTAMP_NANOS) and wire_type == WT_VARINT:
            if not read_varint(buf, &pos, end, &value):
                return False
            if field == TIMESTAMP_SECONDS:
                seconds[0] = <int64_t>value
            else:
                nanos[0] = <int32_t>value
        elif field == TIMESTAMP_SECONDS or field == TIMESTAMP_NANOS or not skip_field(buf, &pos, end, wire_type):
            return False
    return True


cdef bint parse_resource(const unsigned char* buf, Span span, Parsed* p) noexcept nogil:
    cdef Py_ssize_t pos = span.start
    cdef Py_ssize_t end = span.start + span.size
    cdef uint64_t field
    cdef int wire_type
    while pos < end:
        if not read_tag(buf, &pos, end, &field, &wire_type):
            return False
        if field == RESOURCE_NAMESPACE or field == RESOURCE_NAME:
            if wire_type != WT_LEN or not read_span(buf, &pos, end, &p.ns if field == RESOURCE_NAMESPACE else &p.name):
                return False
        elif not skip_field(buf, &pos, end, wire_type):
            return False
    return True


cdef bint parse_system_properties(const unsigned char* buf, Span span, Parsed* p) noexcept nogil:
    cdef Py_ssize_t pos = span.start
    cdef Py_ssize_t end = span.start + span.size
    cdef uint64_t field, value
    cdef int wire_type
    cdef Span sub
    while pos < end:
        if not read_tag(buf, &pos, end, &field, &wire_type):
            return False
        if (field == SYS_TAG or field == SYS_MESSAGE_ID or field == SYS_BORN_HOST or field == SYS_MESSAGE_GROUP
                or field == SYS_TRACE_CONTEXT):
            if wire_type != WT_LEN:
                return False
            if field == SYS_TAG:
                ok = read_span(buf, &pos, end, &p.tag)
            elif field == SYS_MESSAGE_ID:
                ok = read_span(buf, &pos, end, &p.message_id)
            elif field == SYS_BORN_HOST:
                ok = read_span(buf, &pos, end, &p.born_host)
            elif field == SYS_MESSAGE_GROUP:
                ok = read_span(buf, &pos, end, &p.group)
            else:
                ok = read_span(buf, &pos, end, &p.trace)
            if not ok:
                return False
        elif field == SYS_KEYS:
            if wire_type != WT_LEN or not read_span(buf, &pos, end, &sub):
                return False
            if p.keys_count < MAX_KEYS:
                p.keys[p.keys_count] = sub
            else:
                p.keys_plain = False
            p.keys_count += 1
            p.keys_size += sub.size
            if sub.size and not is_plain(buf, sub):
                p.keys_plain = False
        elif field == SYS_MESSAGE_TYPE or field == SYS_DELIVERY_ATTEMPT:
            if wire_type != WT_VARINT or not read_varint(buf, &pos, end, &value):
                return False
            if field == SYS_MESSAGE_TYPE:
                p.message_type = <int32_t>value
            else:
                p.attempt = <int32_t>value
        elif field == SYS_BORN_TIMESTAMP or field == SYS_DELIVERY_TIMESTAMP:
            if wire_type != WT_LEN or not read_span(buf, &pos, end, &sub):
                return False
            if field == SYS_DELIVERY_TIMESTAMP:
                p.has_delivery = True
            else:
                p.has_born = True
                if not parse_timestamp(buf, sub, &p.born_seconds, &p.born_nanos):
                    return False
        elif field == SYS_PRIORITY:
            return False  # the priority property and its checks are written by converter.py
        elif not skip_field(buf, &pos, end, wire_type):
            return False
    return True


cdef bint parse_message(const unsigned char* buf, Py_ssize_t start, Py_ssize_t size, Parsed* p) noexcept nogil:
    """The fields of a serialized pb.Message (buf[start:size]) the send path reads; False: Python reads it."""
    cdef Py_ssize_t pos = start
    cdef uint64_t field
    cdef int wire_type
    cdef Span sub
    p.ns.size = p.name.size = p.body.size = 0
    p.tag.size = p.message_id.size = p.born_host.size = p.group.size = p.trace.size = 0
    p.ns.start = p.name.start = p.body.start = 0
    p.tag.start = p.message_id.start = p.born_host.start = p.group.start = p.trace.start = 0
    p.has_user = p.has_delivery = p.has_born = False
    p.keys_count = p.keys_size = 0
    p.keys_plain = True
    p.message_type = p.attempt = 0
    p.born_seconds = 0
    p.born_nanos = 0
    while pos < size:
        if not read_tag(buf, &pos, size, &field, &wire_type):
            return False
        if (field == MESSAGE_TOPIC or field == MESSAGE_USER_PROPERTIES or field == MESSAGE_SYSTEM_PROPERTIES
                or field == MESSAGE_BODY):
            if wire_type != WT_LEN or not read_span(buf, &pos, size, &sub):
                return False
            if field == MESSAGE_TOPIC:
                if not parse_resource(buf, sub, p):
                    return False
            elif field == MESSAGE_USER_PROPERTIES:
                p.has_user = True
            elif field == MESSAGE_SYSTEM_PROPERTIES:
                if not parse_system_properties(buf, sub, p):
                    return False
            else:
                p.body = sub
        elif not skip_field(buf, &pos, size, wire_type):
            return False
    return True


# ---- the properties string ------------------------------------------------------------------

cdef inline Py_ssize_t put(char* out, Py_ssize_t at, const char* data, Py_ssize_t size) noexcept nogil:
    memcpy(out + at, data, size)
    return at + size


cdef inline Py_ssize_t put_bytes(char* out, Py_ssize_t at, bytes data) noexcept:
    return put(out, at, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


cdef class BatchContext:
    """What every message of one SendMessage request shares, read once per request."""
    cdef bytes topic
    cdef bytes namespace
    cdef bytes producer_group
    cdef bytes remote
    cdef bint remote_used       # remote_addr stands in for an empty born_host
    cdef bint empty_check
    cdef long long max_body
    cdef long long max_user_size
    cdef long long max_group_size
    cdef bint accept_normal     # message types the topic takes (all without a type check)
    cdef bint accept_fifo
    cdef bint accept_delay


cdef BatchContext make_context(topic, namespace, producer_group, remote_address, config, accepted):
    """None when an argument is not what the fast path expects (then Python does the whole call)."""
    cdef BatchContext ctx = BatchContext()
    if not (PyUnicode_CheckExact(topic) and PyUnicode_CheckExact(namespace)
            and PyUnicode_CheckExact(producer_group) and PyUnicode_CheckExact(remote_address)):
        return None
    try:
        ctx.topic = topic.encode("utf-8")
        ctx.namespace = namespace.encode("utf-8")
        ctx.producer_group = producer_group.encode("utf-8")
        ctx.remote = remote_address.encode("utf-8")
        ctx.empty_check = bool(config.enable_message_body_empty_check)
        ctx.max_body = config.max_message_size
        ctx.max_user_size = config.max_user_property_size
        ctx.max_group_size = config.max_message_group_size
    except (UnicodeEncodeError, OverflowError, TypeError):
        return None
    ctx.remote_used = bool(remote_address) and not remote_address.isspace()
    ctx.accept_normal = accepted is None or MT_NORMAL in accepted
    ctx.accept_fifo = accepted is None or MT_FIFO in accepted
    ctx.accept_delay = accepted is None or MT_DELAY in accepted
    return ctx


cdef int32_t encode_parsed(const unsigned char* buf, Parsed* p, BatchContext ctx, list properties,
                           list ids) except -2:
    """Appends a parsed message's properties and id and gives its message type, or -1: Python decides it.

    The checks are build_message_properties' in its order, each one only ever passing here: a
    message any of them could refuse is the Python path's, which raises the right error first.
    """
    cdef int32_t message_type = p.message_type
    cdef Py_ssize_t user_size = p.tag.size + p.keys_size
    cdef int64_t born_ms = 0
    cdef char digits[2][24]
    cdef Py_ssize_t attempt_len, born_len = 0, size, at
    cdef Span host = p.born_host
    cdef bint host_from_wire = p.born_host.size > 0
    cdef bint with_host
    cdef char stack[STACK_BUFFER]
    cdef char* out
    if p.has_user or p.has_delivery:
        return -1
    if not (message_type == MT_UNSPECIFIED or message_type == MT_NORMAL or message_type == MT_FIFO
            or message_type == MT_DELAY):
        return -1  # a transaction (or an unknown type): rare, Python writes it
    if p.tag.size and not (is_plain(buf, p.tag) and memchr_byte(buf, p.tag, 0x7C) < 0):
        return -1
    if not p.keys_plain or user_size > ctx.max_user_size:
        return -1
    if not has_visible_ascii(buf, p.message_id) or not is_plain(buf, p.message_id):  # no \x01\x02 smuggling
        return -1
    if p.group.size and not (is_plain(buf, p.group)
                             and (ctx.max_group_size <= 0 or p.group.size < ctx.max_group_size)):
        return -1
    if p.trace.size and has_control(buf, p.trace):
        return -1  # control characters: Python refuses them (no \x01\x02 smuggling)
    if host_from_wire:
        if not is_ascii(buf, host) or (has_control(buf, host) and not is_ascii_space(buf, host)):
            return -1  # control characters, as above
        with_host = not is_ascii_space(buf, host)
    else:
        with_host = ctx.remote_used
    if p.has_born:
        if not (0 <= p.born_nanos < 1000000000
                and MIN_TIMESTAMP_SECONDS <= p.born_seconds <= MAX_TIMESTAMP_SECONDS):
            return -1
        born_ms = p.born_seconds * 1000 + p.born_nanos // 1000000
        born_len = snprintf(digits[1], 24, "%lld", <long long>born_ms)
    # TopicMessageType#parseFromMessageProperty (converter._implied_message_type): no delivery time
    # on this path, so a message group makes it FIFO and nothing else NORMAL, whatever was declared.
    message_type = MT_FIFO if p.group.size else MT_NORMAL
    if not (ctx.accept_normal if message_type == MT_NORMAL else
            ctx.accept_fifo if message_type == MT_FIFO else ctx.accept_delay):
        return -1
    attempt_len = snprintf(digits[0], 24, "%d", <int>p.attempt)

    size = (len(UNIQ_) + p.message_id.size + 1 + len(RECONSUME_) + attempt_len + 1
            + len(PGROUP_) + PyBytes_GET_SIZE(ctx.producer_group) + 1)
    if p.tag.size:
        size += len(TAGS_) + p.tag.size + 1
    if p.keys_count:
        size += len(KEYS_) + p.keys_size + p.keys_count - 1 + 1
    if p.group.size:
        size += len(SHARDING_) + p.group.size + 1
    if p.trace.size:
        size += len(TRACE_) + p.trace.size + 1
    if with_host:
        size += len(BORN_HOST_) + (host.size if host_from_wire else PyBytes_GET_SIZE(ctx.remote)) + 1
    if p.has_born:
        size += len(BORN_TIMESTAMP_) + born_len + 1
    if size <= STACK_BUFFER:
        out = stack
    else:
        out = <char*>PyMem_Malloc(size)
        if out == NULL:
            raise MemoryError()
    try:
        at = 0
        if p.tag.size:
            at = put_bytes(out, at, TAGS_)
            at = put(out, at, <const char*>buf + p.tag.start, p.tag.size)
            out[at] = PS
            at += 1
        if p.keys_count:
            at = put_bytes(out, at, KEYS_)
            at = put_keys(buf, p, out, at)
            out[at] = PS
            at += 1
        at = put_bytes(out, at, UNIQ_)
        at = put(out, at, <const char*>buf + p.message_id.start, p.message_id.size)
        out[at] = PS
        at = put_bytes(out, at + 1, RECONSUME_)
        at = put(out, at, digits[0], attempt_len)
        out[at] = PS
        at = put_bytes(out, at + 1, PGROUP_)
        at = put_bytes(out, at, ctx.producer_group)
        out[at] = PS
        at += 1
        if p.group.size:
            at = put_bytes(out, at, SHARDING_)
            at = put(out, at, <const char*>buf + p.group.start, p.group.size)
            out[at] = PS
            at += 1
        if p.trace.size:
            at = put_bytes(out, at, TRACE_)
            at = put(out, at, <const char*>buf + p.trace.start, p.trace.size)
            out[at] = PS
            at += 1
        if with_host:
            at = put_bytes(out, at, BORN_HOST_)
            if host_from_wire:
                at = put(out, at, <const char*>buf + host.start, host.size)
            else:
                at = put_bytes(out, at, ctx.remote)
            out[at] = PS
            at += 1
        if p.has_born:
            at = put_bytes(out, at, BORN_TIMESTAMP_)
            at = put(out, at, digits[1], born_len)
            out[at] = PS
            at += 1
        if at != size:
            raise AssertionError("properties size miscounted")
        try:
            text = PyUnicode_DecodeUTF8(out, size, NULL)
        except UnicodeDecodeError:
            return -1  # not from a upb message (its strings are valid UTF-8): Python decides
    finally:
        if out != stack:
            PyMem_Free(out)
    properties.append(text)
    ids.append(PyUnicode_DecodeUTF8(<const char*>buf + p.message_id.start, p.message_id.size, NULL))
    return message_type


cdef inline Py_ssize_t memchr_byte(const unsigned char* buf, Span span, unsigned char c) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(span.start, span.start + span.size):
        if buf[i] == c:
            return i
    return -1


cdef inline bint has_visible_ascii(const unsigned char* buf, Span span) noexcept nogil:
    """A byte in 0x21..0x7E: then str.strip() leaves something (the message id check)."""
    cdef Py_ssize_t i
    for i in range(span.start, span.start + span.size):
        if 0x21 <= buf[i] <= 0x7E:
            return True
    return False


cdef Py_ssize_t put_keys(const unsigned char* buf, Parsed* p, char* out, Py_ssize_t at) noexcept nogil:
    """The keys joined by KEY_SEPARATOR (keys_plain: at most MAX_KEYS of them)."""
    cdef Py_ssize_t i
    for i in range(p.keys_count):
        if i:
            out[at] = KEY_SEPARATOR
            at += 1
        at = put(out, at, <const char*>buf + p.keys[i].start, p.keys[i].size)
    return at


# ---- entry points ---------------------------------------------------------------------------

cdef object _producer = None
cdef object _converter = None


cdef object producer_module():
    """orbitmq.proxy.producer, imported on first use: it imports this module at its end."""
    global _producer
    if _producer is None:
        from orbitmq.proxy import producer
        _producer = producer
    return _producer


cdef object converter_module():
    global _converter
    if _converter is None:
        from orbitmq.proxy import converter
        _converter = converter
    return _converter


def encode_messages(request, topic, namespace, remote_address, config, accepted, topic_type, producer_group=None):
    """producer.encode_messages: (bodies, properties strings, message ids) of one SendMessage.

    The request is serialized once (cheaper than a message at a time) and each message read
    from its bytes; a message this code does not write is handed to producer._encode_one.
    """
    cdef BatchContext ctx = make_context(topic, namespace, topic if producer_group is None else producer_group,
                                         remote_address, config, accepted)
    cdef Parsed parsed
    cdef const unsigned char* buf
    cdef Py_ssize_t size, pos = 0, index = 0
    cdef uint64_t field
    cdef int wire_type
    cdef Span span
    cdef list bodies = [], properties = [], ids = []
    cdef Span* spans
    cdef Py_ssize_t count, i
    if ctx is None:
        return producer_module()._py_encode_messages(request, topic, namespace, remote_address, config, accepted,
                                                     topic_type, producer_group)
    protos = request.messages
    data = request.SerializeToString()
    count = len(protos)
    if not PyBytes_CheckExact(data) or count == 0:
        return producer_module()._py_encode_messages(request, topic, namespace, remote_address, config, accepted,
                                                     topic_type, producer_group)
    buf = <const unsigned char*>PyBytes_AS_STRING(data)
    size = PyBytes_GET_SIZE(data)
    spans = <Span*>PyMem_Malloc(count * sizeof(Span))
    if spans == NULL:
        raise MemoryError()
    try:
        # SendMessageRequest.messages: where each message's bytes are, in order.
        while pos < size:
            if not read_tag(buf, &pos, size, &field, &wire_type):
                break
            if field == REQUEST_MESSAGES:
                if wire_type != WT_LEN or index == count or not read_span(buf, &pos, size, &spans[index]):
                    break
                index += 1
            elif not skip_field(buf, &pos, size, wire_type):
                break
        if pos != size or index != count:
            return producer_module()._py_encode_messages(request, topic, namespace, remote_address, config,
                                                         accepted, topic_type, producer_group)
        one = None
        for i in range(count):
            span = spans[i]
            if not (parse_message(buf, span.start, span.start + span.size, &parsed)
                    and same_span(buf, parsed.name, ctx.topic) and same_span(buf, parsed.ns, ctx.namespace)
                    and not (ctx.empty_check and parsed.body.size == 0)
                    and not (0 < ctx.max_body < parsed.body.size)
                    and encode_parsed(buf, &parsed, ctx, properties, ids) >= 0):
                if one is None:
                    one = producer_module()._encode_one
                body, text, message_id = one(protos[i], topic, namespace, remote_address, config, accepted,
                                             topic_type, producer_group)
                properties.append(text)
                ids.append(message_id)
            else:
                body = PyBytes_FromStringAndSize(<const char*>buf + parsed.body.start, parsed.body.size)
            bodies.append(body)
    finally:
        PyMem_Free(spans)
    return bodies, properties, ids


def encode_message_properties(message, producer_group, remote_addr, config):
    """converter.encode_message_properties: (properties string, message id, message type)."""
    cdef BatchContext ctx = make_context("", "", producer_group, remote_addr, config, None)
    cdef Parsed parsed
    cdef const unsigned char* buf
    cdef int32_t message_type = -1
    cdef list properties = [], ids = []
    if ctx is not None:
        data = message.SerializeToString()
        if PyBytes_CheckExact(data):
            buf = <const unsigned char*>PyBytes_AS_STRING(data)
            if parse_message(buf, 0, PyBytes_GET_SIZE(data), &parsed):
                message_type = encode_parsed(buf, &parsed, ctx, properties, ids)
    if message_type < 0:
        return converter_module()._py_encode_message_properties(message, producer_group, remote_addr, config)
    return properties[0], ids[0], message_type


cdef inline bint same_span(const unsigned char* buf, Span span, bytes expected) noexcept:
    return (span.size == PyBytes_GET_SIZE(expected)
            and memcmp(buf + span.start, PyBytes_AS_STRING(expected), span.size) == 0)


# ---- SendMessageResponse --------------------------------------------------------------------

cdef bytes OK_STATUS_BYTES = _errors.OK_STATUS.SerializeToString()


cdef inline Py_ssize_t varint_size(uint64_t value) noexcept nogil:
    cdef Py_ssize_t n = 1
    while value > 0x7F:
        value >>= 7
        n += 1
    return n


cdef inline Py_ssize_t put_varint(char* out, Py_ssize_t at, uint64_t value) noexcept nogil:
    while value > 0x7F:
        out[at] = <char>((value & 0x7F) | 0x80)
        value >>= 7
        at += 1
    out[at] = <char>value
    return at + 1


def ok_response(message_ids, first_offset):
    """producer.ok_response: SendMessageResponse{OK, one OK entry per id at consecutive offsets}.

    The whole response is written in protobuf wire format into one buffer and parsed once.
    """
    cdef Py_ssize_t status_size = PyBytes_GET_SIZE(OK_STATUS_BYTES)
    cdef Py_ssize_t status_field = 1 + varint_size(status_size) + status_size
    cdef Py_ssize_t total = status_field, entry, at, count, i
    cdef uint64_t offset
    cdef list raws
    cdef bytes raw, wire
    cdef char* out
    if not (type(message_ids) is list and type(first_offset) is int and 0 <= first_offset <= 0x7FFFFFFFFFFFFFFF
            and first_offset + len(message_ids) - 1 <= 0x7FFFFFFFFFFFFFFF):
        return producer_module()._py_ok_response(message_ids, first_offset)
    raws = [message_id.encode("utf-8") for message_id in message_ids]
    count = len(raws)
    offset = first_offset
    for i in range(count):
        raw = raws[i]
        entry = (status_field + 1 + varint_size(PyBytes_GET_SIZE(raw)) + PyBytes_GET_SIZE(raw)
                 + 1 + varint_size(offset + i))
        total += 1 + varint_size(entry) + entry
    wire = PyBytes_FromStringAndSize(NULL, total)
    out = PyBytes_AS_STRING(wire)
    out[0] = RESPONSE_STATUS_TAG
    at = put_varint(out, 1, status_size)
    at = put_bytes(out, at, OK_STATUS_BYTES)
    for i in range(count):
        raw = raws[i]
        entry = (status_field + 1 + varint_size(PyBytes_GET_SIZE(raw)) + PyBytes_GET_SIZE(raw)
                 + 1 + varint_size(offset + i))
        out[at] = RESPONSE_ENTRIES_TAG
        at = put_varint(out, at + 1, entry)
        out[at] = ENTRY_STATUS_TAG
        at = put_varint(out, at + 1, status_size)
        at = put_bytes(out, at, OK_STATUS_BYTES)
        out[at] = ENTRY_MESSAGE_ID_TAG
        at = put_varint(out, at + 1, PyBytes_GET_SIZE(raw))
        at = put_bytes(out, at, raw)
        out[at] = ENTRY_OFFSET_TAG
        at = put_varint(out, at + 1, offset + i)
    if at != total:
        raise AssertionError("response size miscounted")
    return _spb.SendMessageResponse.FromString(wire)
