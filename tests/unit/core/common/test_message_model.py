"""Message model, properties codec, message ids, constants and validators."""

from __future__ import annotations

import os
import struct
import time
from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbitmq.common import constants
from orbitmq.common.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    STRING_HASH_SET,
    Message,
    MessageConst,
    MessageExt,
    ReservedPropertyError,
    bytes_to_properties,
    properties_to_bytes,
    properties_to_string,
    string_to_properties,
)
from orbitmq.common.message_id import (
    create_offset_message_id,
    create_offset_message_id_from_addr,
    create_uniq_id,
    decode_offset_message_id,
    split_host_port,
    uniq_id_ip,
    uniq_id_timestamp,
)
from orbitmq.common.validators import (
    ValidationError,
    check_group,
    check_properties_size,
    check_topic,
    is_system_group,
    is_system_topic,
)

# ---------------------------------------------------------------- properties string


def test_properties_to_string_format():
    assert properties_to_string({}) == ""
    assert properties_to_string({"TAGS": "a", "KEYS": "k1 k2"}) == "TAGS\x01a\x02KEYS\x01k1 k2\x02"
    assert NAME_VALUE_SEPARATOR == "\x01" and PROPERTY_SEPARATOR == "\x02"


def test_string_to_properties_is_tolerant():
    assert string_to_properties("") == {}
    assert string_to_properties(None) == {}
    assert string_to_properties("A\x011\x02B\x012") == {"A": "1", "B": "2"}  # no trailing \x02
    assert string_to_properties("\x02\x02A\x011\x02\x02") == {"A": "1"}  # empty segments
    assert string_to_properties("junk\x02A\x011\x02") == {"A": "1"}  # segment without separator
    assert string_to_properties("A\x01\x02") == {"A": ""}


def test_properties_bytes_roundtrip_utf8():
    props = {"中文": "值", "TAGS": "tag"}
    data = properties_to_bytes(props)
    assert data == "中文\x01值\x02TAGS\x01tag\x02".encode()
    assert bytes_to_properties(memoryview(data)) == props


_name = st.text(
    alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1
)
_value = st.text(alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)))


@given(st.dictionaries(_name, _value, max_size=20))
def test_properties_roundtrip_property(props):
    assert string_to_properties(properties_to_string(props)) == props
    assert bytes_to_properties(properties_to_bytes(props)) == props


# ---------------------------------------------------------------- Message / MessageExt


def test_message_convenience_properties():
    msg = Message("TopicTest", b"hello")
    assert msg.flag == 0 and msg.properties == {}
    assert msg.tags is None and msg.keys == [] and msg.uniq_key is None and msg.delay_time_level == 0
    msg.tags = "TagA"
    msg.keys = ["order-1", "user-9"]
    msg.delay_time_level = 3
    msg.uniq_key = "ABC"
    assert msg.properties == {"TAGS": "TagA", "KEYS": "order-1 user-9", "DELAY": "3", "UNIQ_KEY": "ABC"}
    assert msg.keys == ["order-1", "user-9"]
    msg.keys = "a  b"
    assert msg.keys == ["a", "b"]
    msg.delay_time_level = 0
    assert "DELAY" not in msg.properties
    assert msg.wait_store_msg_ok is True
    msg.wait_store_msg_ok = False
    assert msg.properties["WAIT"] == "false" and msg.wait_store_msg_ok is False
    assert string_to_properties(msg.properties_string) == msg.properties


def test_put_user_property_refuses_reserved_names():
    msg = Message("T", b"x")
    msg.put_user_property("color", "red")
    assert msg.properties["color"] == "red"
    for reserved in ("TAGS", "UNIQ_KEY", "DELAY", "TIMER_DELIVER_MS", "__RMQ.TRANSIENT.X"):
        with pytest.raises(ReservedPropertyError, match="used by system"):
            msg.put_user_property(reserved, "v")
    with pytest.raises(ValueError):
        msg.put_user_property("blank", "  ")
    msg.tags = "t"
    assert msg.user_properties == {"color": "red"}


def test_message_const_strings_match_upstream():
    assert MessageConst.WAIT_STORE_MSG_OK == "WAIT"
    assert MessageConst.REAL_QUEUE_ID == "REAL_QID"
    assert MessageConst.TRANSACTION_PREPARED == "TRAN_MSG"
    assert MessageConst.PRODUCER_GROUP == "PGROUP"
    assert MessageConst.TRACE_SWITCH == "TRACE_ON"
    assert MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX == "UNIQ_KEY"
    assert MessageConst.CONSUME_START_TIMESTAMP == "CONSUME_START_TIME"
    assert MessageConst.FIRST_POP_TIME == "1ST_POP_TIME"
    assert MessageConst.SHARDING_KEY == "__SHARDINGKEY"
    assert MessageConst.START_DELIVER_TIME == "__STARTDELIVERTIME"
    assert MessageConst.TIMER_DELIVER_MS == "TIMER_DELIVER_MS"
    assert {"KEYS", "TAGS", "UNIQ_KEY", "REAL_TOPIC", "POP_CK", "TIMER_OUT_MS"} <= STRING_HASH_SET
    assert MessageConst.SHARDING_KEY not in STRING_HASH_SET  # users may set it, as upstream


def test_message_ext_fields():
    ext = MessageExt(
        "T",
        b"b",
        queue_id=2,
        queue_offset=7,
        store_host="10.0.0.1:10911",
        born_host="1.2.3.4:5",
        commit_log_offset=4096,
        msg_id="M",
        reconsume_times=1,
    )
    assert isinstance(ext, Message)
    assert ext.uniq_id_or_msg_id == "M"
    ext.uniq_key = "U"
    assert ext.uniq_id_or_msg_id == "U"
    assert ext.store_size == 0 and ext.prepared_transaction_offset == 0


# ---------------------------------------------------------------- client unique id


def test_uniq_id_layout():
    before = int(time.time() * 1000)
    uid = create_uniq_id()
    after = int(time.time() * 1000)
    assert len(uid) == 32 and uid == uid.upper()
    raw = bytes.fromhex(uid)
    (pid,) = struct.unpack_from(">H", raw, 4)
    assert pid == os.getpid() & 0xFFFF
    assert before <= uniq_id_timestamp(uid) <= after
    second = create_uniq_id()
    assert second[:20] == uid[:20]  # fixed per-process prefix
    assert (
        struct.unpack_from(">H", bytes.fromhex(second), 14)[0]
        == (struct.unpack_from(">H", raw, 14)[0] + 1) & 0xFFFF
    )
    parts = uniq_id_ip(uid).split(".")
    assert len(parts) == 4 and all(0 <= int(p) <= 255 for p in parts)


def test_uniq_ids_unique_across_100k():
    ids = [create_uniq_id() for _ in range(100_000)]
    assert len(set(ids)) == 100_000


def _month_start_ms(year: int, month: int) -> int:
    return int(datetime(year, month, 1).timestamp() * 1000)


def test_uniq_id_timestamp_previous_month_and_ipv6():
    prefix = bytes([192, 168, 1, 20]) + b"\x00\x01" + b"\xaa\xbb\xcc\xdd"
    span = 20 * 86_400_000  # day 21 of a month
    uid = (prefix + struct.pack(">IH", span, 5)).hex().upper()
    now_in_march = _month_start_ms(2026, 3) + 86_400_000  # 2 March
    # An offset in the future of "now" must belong to the previous month (February).
    assert uniq_id_timestamp(uid, now_ms=now_in_march) == _month_start_ms(2026, 2) + span
    now_late_march = _month_start_ms(2026, 3) + 25 * 86_400_000
    assert uniq_id_timestamp(uid, now_ms=now_late_march) == _month_start_ms(2026, 3) + span
    assert uniq_id_ip(uid) == "192.168.1.20"

    v6 = bytes.fromhex("20010db8000000000000000000000001") + b"\x00\x01" + b"\x00\x00\x00\x00"
    uid6 = (v6 + struct.pack(">IH", 1000, 0)).hex().upper()
    assert len(uid6) == 56
    assert uniq_id_ip(uid6) == "2001:db8::1"
    assert uniq_id_timestamp(uid6, now_ms=now_late_march) == _month_start_ms(2026, 3) + 1000


@pytest.mark.parametrize("bad", ["", "ABC", "Z" * 32, "0" * 33])
def test_uniq_id_bad_input(bad):
    with pytest.raises(ValueError, match="unique message id"):
        uniq_id_timestamp(bad)


# ---------------------------------------------------------------- offset message id


def test_offset_message_id_known_vectors():
    assert create_offset_message_id("10.0.0.1", 10911, 123) == "0A00000100002A9F000000000000007B"
    assert create_offset_message_id("127.0.0.1", 10911, 0) == "7F00000100002A9F0000000000000000"
    assert create_offset_message_id("192.168.0.10", 10911, 0x1122334455667788) == (
        "C0A8000A00002A9F1122334455667788"
    )
    assert decode_offset_message_id("0A00000100002A9F000000000000007B") == ("10.0.0.1", 10911, 123)
    assert decode_offset_message_id("0a00000100002a9f000000000000007b") == ("10.0.0.1", 10911, 123)
    assert create_offset_message_id_from_addr("10.0.0.1:10911", 123) == "0A00000100002A9F000000000000007B"


def test_offset_message_id_ipv6():
    mid = create_offset_message_id("2001:db8::7", 10911, 65536)
    assert len(mid) == 56
    assert mid == "20010DB8000000000000000000000007" + "00002A9F" + "0000000000010000"
    assert decode_offset_message_id(mid) == ("2001:db8::7", 10911, 65536)
    assert create_offset_message_id_from_addr("[2001:db8::7]:10911", 65536) == mid
    assert split_host_port("::1:10911") == ("::1", 10911)


@given(
    st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)),
    st.integers(0, 65535),
    st.integers(0, 2**63 - 1),
)
def test_offset_message_id_roundtrip(ip, port, offset):
    mid = create_offset_message_id(str(ip), port, offset)
    assert len(mid) == (32 if ip.version == 4 else 56)
    assert decode_offset_message_id(mid) == (str(ip), port, offset)


@pytest.mark.parametrize(
    "bad, match",
    [
        ("", "hex characters"),
        ("0A000001", "hex characters"),
        ("XX00000100002A9F000000000000007B", "not hexadecimal"),
        ("0A00000100002A9FFFFFFFFFFFFFFFFF", "negative"),
        (None, "hex string"),
    ],
)
def test_decode_offset_message_id_bad_input(bad, match):
    with pytest.raises(ValueError, match=match):
        decode_offset_message_id(bad)


def test_create_offset_message_id_bad_input():
    with pytest.raises(ValueError, match="address literal"):
        create_offset_message_id("broker-a.local", 10911, 0)
    with pytest.raises(ValueError, match="port"):
        create_offset_message_id("1.2.3.4", 70000, 0)
    with pytest.raises(ValueError, match="offset"):
        create_offset_message_id("1.2.3.4", 1, -1)
    with pytest.raises(ValueError, match="ip:port"):
        create_offset_message_id_from_addr("1.2.3.4", 0)


# ---------------------------------------------------------------- constants


def test_constants_and_perm():
    assert constants.retry_topic("g1") == "%RETRY%g1" and constants.is_retry_topic("%RETRY%g1")
    assert constants.dlq_topic("g1") == "%DLQ%g1" and constants.is_dlq_topic("%DLQ%g1")
    assert not constants.is_retry_topic("g1") and not constants.is_dlq_topic("%RETRY%g1")
    assert constants.revive_topic("DefaultCluster") == "rmq_sys_REVIVE_LOG_DefaultCluster"
    rw = constants.PERM_READ | constants.PERM_WRITE
    assert rw == 6
    assert constants.perm_to_string(rw) == "RW-"
    assert constants.perm_to_string(constants.PERM_READ) == "R--"
    assert constants.perm_to_string(7) == "RWX"
    assert constants.perm_to_string(constants.PERM_PRIORITY) == "---"
    assert constants.perm_to_string(0) == "---"


# ---------------------------------------------------------------- validators


def test_check_topic_lengths():
    check_topic("a" * 127)
    with pytest.raises(ValidationError, match=r"^The specified topic is longer than topic max length 127\.$"):
        check_topic("a" * 128)


@pytest.mark.parametrize("topic", ["Topic Test", "a.b", "中文", "a/b", "a*", "tab\t"])
def test_check_topic_illegal_chars(topic):
    with pytest.raises(ValidationError) as info:
        check_topic(topic)
    assert str(info.value) == (
        f"The specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    )


@pytest.mark.parametrize("topic", ["", "   ", None])
def test_check_topic_blank(topic):
    with pytest.raises(ValidationError, match="blank"):
        check_topic(topic)


def test_check_topic_legal_and_system():
    for ok in ("TopicTest", "%RETRY%group-1", "a|b", "A_b-9"):
        check_topic(ok)
    for sys_topic in ("TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "rmq_sys_REVIVE_LOG_c"):
        assert is_system_topic(sys_topic)
        check_topic(sys_topic)
        with pytest.raises(ValidationError, match="conflict with system topic"):
            check_topic(sys_topic, allow_system=False)
    assert not is_system_topic("TopicTest")


def test_check_group():
    check_group("g" * 255)
    with pytest.raises(ValidationError, match="longer than group max length 255"):
        check_group("g" * 256)
    with pytest.raises(ValidationError, match=r"group\[bad group\] contains illegal characters"):
        check_group("bad group")
    with pytest.raises(ValidationError, match="blank"):
        check_group("")
    assert is_system_group("DEFAULT_CONSUMER") and is_system_group("CID_RMQ_SYS_X")
    assert not is_system_group("my-group")
    with pytest.raises(ValidationError, match="system group"):
        check_group("TOOLS_CONSUMER", allow_system=False)


def test_check_properties_size():
    check_properties_size("a" * 32767)
    with pytest.raises(ValidationError, match="32767"):
        check_properties_size("a" * 32768)
    with pytest.raises(ValidationError):
        check_properties_size("é" * 16384)  # 32768 bytes once encoded
