"""RocketMQ's message-trace text format (TraceDataEncoder / TraceConstants), both ways.

The proxy writes these records for gRPC clients and `orbitmq admin queryMsgTraceById` reads
them back, together with records written by Remoting clients' own trace hooks. Fields are
separated by U+0001 and every record ends with U+0002; Java writes missing values as ``null``.

OrbitMQ appends one field upstream does not write, the consuming client's host, after the
last upstream field of SubBefore and SubAfter (upstream decoders ignore trailing fields), and
puts the producing client's host at Pub's index 14, the slot upstream's decoder reads as
clientHost.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

CONTENT_SPLITOR = "\u0001"
FIELD_SPLITOR = "\u0002"
DEFAULT_REGION = "DefaultRegion"
# A trace message's body is cut at this many characters (TraceConstants / AsyncTraceDispatcher).
MAX_TRACE_BODY_CHARS = 128_000
NULL = "null"


class TraceType(enum.StrEnum):
    PUB = "Pub"
    SUB_BEFORE = "SubBefore"
    SUB_AFTER = "SubAfter"
    END_TRANSACTION = "EndTransaction"
    RECALL = "Recall"


class MessageType(enum.IntEnum):
    """org.apache.rocketmq.common.message.MessageType; the ordinal is what the record holds."""

    NORMAL = 0
    TRANS_HALF = 1
    TRANS_COMMIT = 2
    DELAY = 3
    ORDER = 4


class ContextCode(enum.IntEnum):
    """ConsumeReturnType ordinals (SubAfter's contextCode)."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclass
class TraceRecord:
    """One decoded record; fields a type does not carry keep their defaults."""

    type: TraceType
    timestamp: int = 0
    region_id: str = ""
    group: str = ""
    topic: str = ""
    msg_id: str = ""
    tags: str = ""
    keys: str = ""
    store_host: str = ""
    body_length: int = 0
    cost_time: int = 0
    msg_type: int = 0
    offset_msg_id: str = ""
    success: bool = True
    request_id: str = ""
    retry_times: int = 0
    context_code: int = 0
    transaction_id: str = ""
    transaction_state: str = ""
    from_transaction_check: bool = False
    client_host: str = ""


def _text(value: object) -> str:
    """Java's StringBuilder.append: None is "null", booleans are lower case."""
    if value is None or value == "":
        return NULL
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _join(fields: list[object]) -> str:
    return CONTENT_SPLITOR.join(_text(f) for f in fields) + FIELD_SPLITOR


def encode_pub(*, timestamp: int, region_id: str, group: str, topic: str, msg_id: str, tags: str | None,
               keys: str | None, store_host: str, body_length: int, cost_time: int, msg_type: int,
               offset_msg_id: str, success: bool, client_host: str = "") -> str:
    fields: list[object] = [TraceType.PUB.value, timestamp, region_id, group, topic, msg_id, tags, keys, store_host,
                            body_length, cost_time, msg_type, offset_msg_id, success]
    if client_host:
        fields.append(client_host)
    return _join(fields)


def encode_sub_before(*, timestamp: int, region_id: str, group: str, request_id: str, msg_id: str,
                      retry_times: int, keys: str | None, client_host: str = "") -> str:
    fields: list[object] = [TraceType.SUB_BEFORE.value, timestamp, region_id, group, request_id, msg_id,
                            retry_times, keys]
    if client_host:
        fields.append(client_host)
    return _join(fields)


def encode_sub_after(*, request_id: str, msg_id: str, cost_time: int, success: bool, keys: str | None,
                     context_code: int, timestamp: int, group: str, client_host: str = "") -> str:
    fields: list[object] = [TraceType.SUB_AFTER.value, request_id, msg_id, cost_time, success, keys, context_code,
                            timestamp, group]
    if client_host:
        fields.append(client_host)
    return _join(fields)


def encode_end_transaction(*, timestamp: int, region_id: str, group: str, topic: str, msg_id: str,
                           tags: str | None, keys: str | None, store_host: str, transaction_id: str,
                           transaction_state: str, from_transaction_check: bool) -> str:
    return _join([TraceType.END_TRANSACTION.value, timestamp, region_id, group, topic, msg_id, tags, keys,
                  store_host, int(MessageType.TRANS_COMMIT), transaction_id, transaction_state,
                  from_transaction_check])


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def _str(text: str) -> str:
    return "" if text == NULL else text


def _decode_one(line: list[str]) -> TraceRecord | None:
    kind = line[0]
    n = len(line)
    if kind == TraceType.PUB and n >= 13:
        record = TraceRecord(TraceType.PUB, _int(line[1]), line[2], line[3], line[4], line[5], _str(line[6]),
                             _str(line[7]), line[8], _int(line[9]), _int(line[10]), _int(line[11]))
        if n == 13:  # an old client without offsetMsgId: the 13th field is success
            record.success = line[12] == "true"
        else:
            record.offset_msg_id = _str(line[12])
            record.success = line[13] == "true"
            if n >= 15:
                record.client_host = _str(line[14])
        return record
    if kind == TraceType.SUB_BEFORE and n >= 8:
        return TraceRecord(TraceType.SUB_BEFORE, _int(line[1]), line[2], line[3], request_id=line[4],
                           msg_id=line[5], retry_times=_int(line[6]), keys=_str(line[7]),
                           client_host=_str(line[8]) if n >= 9 else "")
    if kind == TraceType.SUB_AFTER and n >= 6:
        record = TraceRecord(TraceType.SUB_AFTER, request_id=line[1], msg_id=line[2], cost_time=_int(line[3]),
                             success=line[4] == "true", keys=_str(line[5]))
        if n >= 7:
            record.context_code = _int(line[6])
        if n >= 9:
            record.timestamp = _int(line[7])
            record.group = line[8]
        if n >= 10:
            record.client_host = _str(line[9])
        return record
    if kind == TraceType.END_TRANSACTION and n >= 13:
        return TraceRecord(TraceType.END_TRANSACTION, _int(line[1]), line[2], line[3], line[4], line[5],
                           _str(line[6]), _str(line[7]), line[8], msg_type=_int(line[9]), transaction_id=line[10],
                           transaction_state=line[11], from_transaction_check=line[12] == "true")
    if kind == TraceType.RECALL and n >= 7:
        return TraceRecord(TraceType.RECALL, _int(line[1]), line[2], line[3], line[4], line[5],
                           success=line[6] == "true")
    return None


def decode(body: str) -> list[TraceRecord]:
    """Every well-formed record of a trace message body; unknown or short records are skipped."""
    records = []
    for chunk in body.split(FIELD_SPLITOR):
        if not chunk.strip():
            continue
        record = _decode_one(chunk.split(CONTENT_SPLITOR))
        if record is not None:
            records.append(record)
    return records


def pack(records: list[str], limit: int = MAX_TRACE_BODY_CHARS) -> list[str]:
    """Concatenated records as trace message bodies of at most ``limit`` characters each
    (a single longer record gets a body of its own)."""
    bodies: list[str] = []
    current: list[str] = []
    size = 0
    for record in records:
        if current and size + len(record) > limit:
            bodies.append("".join(current))
            current, size = [], 0
        current.append(record)
        size += len(record)
    if current:
        bodies.append("".join(current))
    return bodies
