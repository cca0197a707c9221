"""Byte-exact CommitLog record layout (RocketMQ v1), blank records and tag hash codes."""

import struct
import zlib

import pytest

from orbitmq.common.message_codec import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    BlankRecordError,
    RecordError,
    calc_msg_length,
    decode_record,
    decode_records,
    encode_blank,
    encode_record,
    tags_hash_code,
)
from orbitmq.common.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG


def _be_int(v: int) -> bytes:
    return (v & 0xFFFFFFFF).to_bytes(4, "big")


def _be_long(v: int) -> bytes:
    return (v & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big")


BODY = b"hello"
PROPS = "TAGS\x01tagA\x02KEYS\x01k1\x02"


def test_ipv4_record_matches_hand_built_bytes():
    crc = zlib.crc32(BODY) & 0x7FFFFFFF
    props = PROPS.encode()
    topic = b"TopicA"
    total = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + len(BODY) + 1 + len(topic) + 2 + len(props)
    expected = (
        _be_int(total)
        + bytes.fromhex("DAA320A7")
        + _be_int(crc)
        + _be_int(3)  # queueId
        + _be_int(7)  # flag
        + _be_long(42)  # queueOffset
        + _be_long(4096)  # physicalOffset
        + _be_int(0)  # sysFlag
        + _be_long(1_700_000_000_000)  # bornTimestamp
        + bytes([10, 0, 0, 1]) + _be_int(5555)  # bornHost
        + _be_long(1_700_000_000_123)  # storeTimestamp
        + bytes([192, 168, 1, 2]) + _be_int(10911)  # storeHost
        + _be_int(2)  # reconsumeTimes
        + _be_long(0)  # preparedTransactionOffset
        + _be_int(len(BODY)) + BODY
        + bytes([len(topic)]) + topic
        + len(props).to_bytes(2, "big") + props
    )
    got = encode_record(
        topic="TopicA", queue_id=3, body=BODY, flag=7, queue_offset=42, physical_offset=4096,
        born_timestamp=1_700_000_000_000, born_host=("10.0.0.1", 5555), store_timestamp=1_700_000_000_123,
        store_host=("192.168.1.2", 10911), reconsume_times=2, properties=PROPS,
    )
    assert got == expected
    assert len(got) == calc_msg_length(0, len(BODY), len(topic), len(props)) == 91 + 5 + 6 + len(props)
    msg = decode_record(got)
    assert msg.topic == "TopicA" and msg.body == BODY and msg.queue_id == 3 and msg.flag == 7
    assert msg.queue_offset == 42 and msg.commit_log_offset == 4096 and msg.store_size == total
    assert msg.born_host == "10.0.0.1:5555" and msg.store_host == "192.168.1.2:10911"
    assert msg.properties == {"TAGS": "tagA", "KEYS": "k1"} and msg.reconsume_times == 2
    assert msg.body_crc == crc
    assert msg.msg_id == (bytes([192, 168, 1, 2]) + _be_int(10911) + _be_long(4096)).hex().upper()


def test_ipv6_hosts_use_sixteen_byte_addresses_and_flags():
    got = encode_record(
        topic="T", queue_id=0, body=b"x", born_host=("::1", 1), store_host=("fe80::2", 10911),
        born_timestamp=5, store_timestamp=6,
    )
    sys_flag = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
    (stored_flag,) = struct.unpack_from(">i", got, 36)
    assert stored_flag == sys_flag
    born = got[48:68]
    assert born == bytes(15) + b"\x01" + _be_int(1)
    assert struct.unpack_from(">q", got, 68)[0] == 6  # storeTimestamp after the 20-byte born host
    assert got[76:92] == bytes.fromhex("fe800000000000000000000000000002")
    assert len(got) == calc_msg_length(sys_flag, 1, 1, 0) == 91 + 24 + 1 + 1
    msg = decode_record(got)
    assert msg.born_host == "[::1]:1" and msg.store_host == "[fe80::2]:10911" and msg.store_timestamp == 6


def test_blank_record_and_magic_codes():
    assert MESSAGE_MAGIC_CODE == 0xDAA320A7 and BLANK_MAGIC_CODE == 0xCBD43194
    blank = encode_blank(100)
    assert blank == _be_int(100) + bytes.fromhex("CBD43194")
    with pytest.raises(BlankRecordError) as err:
        decode_record(blank + bytes(92))
    assert err.value.total_size == 100


def test_crc_failure_and_truncation_are_reported():
    rec = bytearray(encode_record(topic="T", queue_id=0, body=b"abcdef"))
    rec[90] ^= 0xFF
    with pytest.raises(RecordError, match="CRC"):
        decode_record(bytes(rec))
    assert decode_record(bytes(rec), check_crc=False).body != b"abcdef"
    with pytest.raises(RecordError):
        decode_record(bytes(rec[:50]))
    with pytest.raises(RecordError, match="magic"):
        decode_record(bytes(12) + bytes(rec[12:]))


def test_decode_concatenated_records():
    a = encode_record(topic="T", queue_id=0, body=b"a", queue_offset=0)
    b = encode_record(topic="T", queue_id=0, body=b"bb", queue_offset=1)
    msgs = decode_records(a + b)
    assert [m.body for m in msgs] == [b"a", b"bb"] and [m.queue_offset for m in msgs] == [0, 1]


def test_tags_hash_code_is_java_string_hashcode():
    assert tags_hash_code("TagA") == 2598919
    assert tags_hash_code("") == 0
    # Overflowing values wrap to a signed 32-bit int like Java.
    assert tags_hash_code("polygenelubricants") == -2147483648
    assert tags_hash_code("hello world, a long tag") == _java_hash("hello world, a long tag")
    # Non-BMP characters hash as two UTF-16 code units.
    assert tags_hash_code("\U0001F600") == _java_hash("\U0001F600")


def _java_hash(s: str) -> int:
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h
