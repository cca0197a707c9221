"""RocketMQ's v1 CommitLog record, byte for byte; shared by the store and by clients.

Pull responses carry raw CommitLog records, so the broker writes and the SDK reads the very
same bytes. Layout (big-endian): totalSize int, magic int, bodyCRC int, queueId int, flag int,
queueOffset long, physicalOffset long, sysFlag int, bornTimestamp long, bornHost (4+4 or
16+4), storeTimestamp long, storeHost (4+4 or 16+4), reconsumeTimes int,
preparedTransactionOffset long, bodyLength int + body, topicLength byte + topic,
propertiesLength short + properties.
"""

from __future__ import annotations

import functools
import ipaddress
import struct
import zlib
from collections.abc import Iterator, Mapping

from orbitmq.common import speedups
from orbitmq.common.java_hash import java_string_hash
from orbitmq.common.message import MessageExt, properties_to_string, string_to_properties
from orbitmq.common.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG

MESSAGE_MAGIC_CODE = 0xDAA320A7
BLANK_MAGIC_CODE = 0xCBD43194
END_FILE_MIN_BLANK_LENGTH = 8
# Fixed part of an IPv4/IPv4 record: everything except body, topic and properties bytes.
FIXED_OVERHEAD_V4 = 91
MAX_TOPIC_LENGTH = 127
MAX_PROPERTIES_LENGTH = 32767

# Byte positions inside a record (MessageDecoder.*Postion), valid for every host form.
MAGIC_POSITION = 4
BODY_CRC_POSITION = 8
QUEUE_ID_POSITION = 12
FLAG_POSITION = 16
QUEUE_OFFSET_POSITION = 20
PHYSICAL_OFFSET_POSITION = 28
SYS_FLAG_POSITION = 36
BORN_TIMESTAMP_POSITION = 40
BORN_HOST_POSITION = 48

SIZE_MAGIC = struct.Struct(">iI")
INT = struct.Struct(">i")
LONG = struct.Struct(">q")


class RecordError(ValueError):
    """The bytes at an offset are not a valid CommitLog message record."""


class BlankRecordError(RecordError):
    """The bytes at an offset are the blank end-of-segment filler, not a message."""

    def __init__(self, total_size: int) -> None:
        super().__init__(f"blank end-of-segment record of {total_size} bytes")
        self.total_size = total_size


def _host_struct(v6: bool) -> str:
    return "16si" if v6 else "4si"


@functools.cache
def header_struct(born_v6: bool, store_v6: bool) -> struct.Struct:
    """Struct for totalSize … bodyLength (the part before the body) for one host form."""
    return struct.Struct(
        ">iIiiiqqiq" + _host_struct(born_v6) + "q" + _host_struct(store_v6) + "iqi"
    )


def store_host_position(sys_flag: int) -> int:
    """Where storeTimestamp starts; the store host follows it."""
    return BORN_HOST_POSITION + (20 if sys_flag & BORNHOST_V6_FLAG else 8)


def body_length_position(sys_flag: int) -> int:
    born = 20 if sys_flag & BORNHOST_V6_FLAG else 8
    store = 20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8
    return BORN_HOST_POSITION + born + 8 + store + 4 + 8


def store_timestamp_position(sys_flag: int) -> int:
    return store_host_position(sys_flag)


def calc_msg_length(sys_flag: int, body_length: int, topic_length: int, properties_length: int) -> int:
    """Total record size, as CommitLog.calMsgLength computes it for the v1 layout."""
    born = 20 if sys_flag & BORNHOST_V6_FLAG else 8
    store = 20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8
    return FIXED_OVERHEAD_V4 - 16 + born + store + body_length + topic_length + properties_length


def body_crc32(body: bytes | bytearray | memoryview) -> int:
    """UtilAll.crc32: CRC32 masked to a non-negative Java int."""
    return zlib.crc32(body) & 0x7FFFFFFF


# Compiled twin: _speedups_message.tags_hash_code (same value, uncached).
@functools.lru_cache(maxsize=8192)
def tags_hash_code(tag: str) -> int:
    """Java String.hashCode of the TAGS property (signed 32-bit), the ConsumeQueue tag code."""
    return java_string_hash(tag)


_py_tags_hash_code = tags_hash_code
# Compiled: hashing the tag in C is as quick as the cache lookup, and unbounded.
_fast = speedups.load("orbitmq.common._speedups_message")
if _fast is not None:
    tags_hash_code = _fast.tags_hash_code


@functools.lru_cache(maxsize=4096)
def host_to_bytes(host: str, port: int) -> tuple[bytes, bool]:
    """(address bytes, is IPv6) for a socket address; the port goes in its own int field."""
    try:
        addr = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        raise ValueError(f"invalid host {host!r}: an IPv4 or IPv6 address literal is required") from None
    if not 0 <= port <= 0xFFFF:
        raise ValueError(f"invalid port {port}: must be 0..65535")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped.packed, False
    return addr.packed, addr.version == 6


def host_to_string(addr: bytes, port: int) -> str:
    """How MessageExt shows a host: "ip:port", IPv6 in brackets."""
    if len(addr) == 4:  # IPv4, every record's born and store host: without ipaddress's cost
        return f"{addr[0]}.{addr[1]}.{addr[2]}.{addr[3]}:{port}"
    ip = ipaddress.ip_address(addr)
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


def encode_record(
    *,
    topic: str,
    queue_id: int,
    body: bytes,
    flag: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: tuple[str, int] = ("127.0.0.1", 0),
    store_timestamp: int = 0,
    store_host: tuple[str, int] = ("127.0.0.1", 10911),
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    properties: Mapping[str, str] | str = "",
    body_crc: int | None = None,
) -> bytes:
    """One complete record; the host-form sysFlag bits are set from the addresses given."""
    born_addr, born_v6 = host_to_bytes(*born_host)
    store_addr, store_v6 = host_to_bytes(*store_host)
    sys_flag &= ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    if born_v6:
        sys_flag |= BORNHOST_V6_FLAG
    if store_v6:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    props = properties if isinstance(properties, str) else properties_to_string(properties)
    topic_b = topic.encode("utf-8")
    props_b = props.encode("utf-8")
    if len(topic_b) > MAX_TOPIC_LENGTH:
        raise RecordError(f"topic is {len(topic_b)} bytes, more than {MAX_TOPIC_LENGTH}")
    if len(props_b) > MAX_PROPERTIES_LENGTH:
        raise RecordError(f"properties are {len(props_b)} bytes, more than {MAX_PROPERTIES_LENGTH}")
    total = calc_msg_length(sys_flag, len(body), len(topic_b), len(props_b))
    header = header_struct(born_v6, store_v6).pack(
        total, MESSAGE_MAGIC_CODE, body_crc32(body) if body_crc is None else body_crc, queue_id, flag,
        queue_offset, physical_offset, sys_flag, born_timestamp, born_addr, born_host[1],
        store_timestamp, store_addr, store_host[1], reconsume_times, prepared_transaction_offset, len(body),
    )
    return b"".join((header, body, bytes((len(topic_b),)), topic_b, len(props_b).to_bytes(2, "big"), props_b))


def encode_blank(total_size: int) -> bytes:
    """The end-of-segment filler header; bytes after the first 8 are not significant."""
    if total_size < END_FILE_MIN_BLANK_LENGTH:
        raise RecordError(f"a blank record needs at least {END_FILE_MIN_BLANK_LENGTH} bytes")
    return SIZE_MAGIC.pack(total_size, BLANK_MAGIC_CODE)


def offset_msg_id(store_addr: bytes, store_port: int, physical_offset: int) -> str:
    """MessageDecoder.createMessageId: store host + port + CommitLog offset, upper-case hex."""
    return (store_addr + struct.pack(">iq", store_port, physical_offset)).hex().upper()


def decode_record(buf, offset: int = 0, check_crc: bool = True) -> MessageExt:
    """Decode the record at ``offset``; RecordError (BlankRecordError for filler) if invalid."""
    end = len(buf)
    if offset + 8 > end:
        raise RecordError(f"truncated record at {offset}: fewer than 8 bytes left")
    total, magic = SIZE_MAGIC.unpack_from(buf, offset)
    if magic == BLANK_MAGIC_CODE:
        raise BlankRecordError(total)
    if magic != MESSAGE_MAGIC_CODE:
        raise RecordError(f"illegal magic code 0x{magic:08X} at {offset}")
    if total < FIXED_OVERHEAD_V4 or offset + total > end:
        raise RecordError(f"record at {offset} claims {total} bytes, {end - offset} available")
    (sys_flag,) = INT.unpack_from(buf, offset + SYS_FLAG_POSITION)
    born_v6 = bool(sys_flag & BORNHOST_V6_FLAG)
    store_v6 = bool(sys_flag & STOREHOSTADDRESS_V6_FLAG)
    hs = header_struct(born_v6, store_v6)
    if hs.size > total:
        raise RecordError(f"record at {offset} is shorter than its header")
    (
        _total, _magic, body_crc, queue_id, flag, queue_offset, physical_offset, _sys, born_ts,
        born_addr, born_port, store_ts, store_addr, store_port, reconsume, prepared, body_len,
    ) = hs.unpack_from(buf, offset)
    pos = offset + hs.size
    if body_len < 0 or pos + body_len + 3 > offset + total:
        raise RecordError(f"record at {offset}: body length {body_len} does not fit its size {total}")
    body = bytes(buf[pos : pos + body_len])
    pos += body_len
    if check_crc and body_crc32(body) != body_crc:
        raise RecordError(f"record at {offset}: body CRC check failed")
    topic_len = buf[pos]
    pos += 1
    topic_at = pos
    pos += topic_len
    props_len = int.from_bytes(buf[pos : pos + 2], "big")
    pos += 2
    if pos + props_len != offset + total:
        raise RecordError(f"record at {offset}: field lengths do not add up to its size {total}")
    try:  # the bytes come from a file or the network: bad UTF-8 is a bad record (fuzz finding)
        topic = bytes(buf[topic_at : topic_at + topic_len]).decode("utf-8")
        props = bytes(buf[pos : pos + props_len]).decode("utf-8") if props_len else ""
    except UnicodeDecodeError as exc:
        raise RecordError(f"record at {offset}: topic or properties are not UTF-8: {exc}") from None
    return MessageExt(
        topic=topic,
        body=body,
        flag=flag,
        properties=string_to_properties(props),
        queue_id=queue_id,
        store_size=total,
        queue_offset=queue_offset,
        sys_flag=sys_flag,
        born_timestamp=born_ts,
        born_host=host_to_string(born_addr, born_port),
        store_timestamp=store_ts,
        store_host=host_to_string(store_addr, store_port),
        msg_id=offset_msg_id(store_addr, store_port, physical_offset),
        commit_log_offset=physical_offset,
        body_crc=body_crc,
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
    )


def iter_records(buf, check_crc: bool = True) -> Iterator[MessageExt]:
    """Decode a concatenation of records, e.g. the body of a pull response."""
    offset = 0
    end = len(buf)
    while offset < end:
        msg = decode_record(buf, offset, check_crc)
        offset += msg.store_size
        yield msg


def decode_records(buf, check_crc: bool = True) -> list[MessageExt]:
    return list(iter_records(buf, check_crc))


_V4_HEADER = header_struct(False, False)
_HOST_FLAGS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
_IQ = struct.Struct(">iq")
# "ip:port" per (address bytes, port): a POP response names the same few hosts in every record.
_host_strings: dict[tuple[bytes, int], str] = {}


def _host_string(addr: bytes, port: int) -> str:
    key = (addr, port)
    text = _host_strings.get(key)
    if text is None:
        text = host_to_string(addr, port)
        if len(_host_strings) >= 4096:
            _host_strings.clear()
        _host_strings[key] = text
    return text


def decode_pop_records(buf: bytes) -> list[MessageExt]:
    """decode_records(buf, check_crc=False) for a POP response body: same messages, same errors.

    An IPv4/IPv4 record with consistent lengths is unpacked in place with its host strings
    cached; anything else (IPv6, a bad magic or length, a truncated buffer) goes through
    decode_record, which raises exactly what decode_records would.
    """
    if type(buf) is not bytes:
        buf = bytes(buf)  # slices of bytes are bytes, as decode_record's fields are
    out: list[MessageExt] = []
    append = out.append
    unpack_from = _V4_HEADER.unpack_from
    hsize = _V4_HEADER.size
    end = len(buf)
    offset = 0
    while offset < end:
        if offset + hsize + 3 <= end:
            (total, magic, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts,
             born_addr, born_port, store_ts, store_addr, store_port, reconsume, prepared,
             body_len) = unpack_from(buf, offset)
            record_end = offset + total
            pos = offset + hsize
            if (magic == MESSAGE_MAGIC_CODE and not sys_flag & _HOST_FLAGS and total >= FIXED_OVERHEAD_V4
                    and record_end <= end and body_len >= 0 and pos + body_len + 3 <= record_end):
                body = buf[pos:pos + body_len]
                pos += body_len
                topic_len = buf[pos]
                topic_at = pos + 1
                pos = topic_at + topic_len
                props_len = int.from_bytes(buf[pos:pos + 2], "big")
                pos += 2
                props: str | None = None
                if pos + props_len == record_end:
                    try:
                        topic = buf[topic_at:topic_at + topic_len].decode("utf-8")
                        props = buf[pos:record_end].decode("utf-8") if props_len else ""
                    except UnicodeDecodeError:  # decode_record below names the bad record
                        props = None
                if props is not None:
                    append(MessageExt(
                        topic=topic,
                        body=body,
                        flag=flag,
                        properties=string_to_properties(props),
                        queue_id=queue_id,
                        store_size=total,
                        queue_offset=queue_offset,
                        sys_flag=sys_flag,
                        born_timestamp=born_ts,
                        born_host=_host_string(born_addr, born_port),
                        store_timestamp=store_ts,
                        store_host=_host_string(store_addr, store_port),
                        msg_id=(store_addr + _IQ.pack(store_port, physical_offset)).hex().upper(),
                        commit_log_offset=physical_offset,
                        body_crc=body_crc,
                        reconsume_times=reconsume,
                        prepared_transaction_offset=prepared,
                    ))
                    offset = record_end
                    continue
        msg = decode_record(buf, offset, False)  # the general decoder, and its error for a bad record
        append(msg)
        offset += msg.store_size
    return out
