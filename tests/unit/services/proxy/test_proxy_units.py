"""Proxy and high-level client pieces that need no process: receipt handles, POP check-point
strings, error mapping, message conversion, NameServer address lists, queue hashing."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbitmq.client import MQBrokerError, MQClientError, parse_namesrv_addr
from orbitmq.client.api import _attach_pop_ck
from orbitmq.common import extra_info as ei
from orbitmq.common.java_hash import java_string_hash
from orbitmq.common.message import MessageConst, MessageExt
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proxy import converter, errors
from orbitmq.proxy.cluster import consistent_hash
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.errors import ProxyError
from orbitmq.proxy.receipt_handle import InvalidReceiptHandle, ReceiptHandle
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.errors import RemotingTimeoutError

Code = pb.Code


def test_receipt_handle_decodes_rocketmq_layout() -> None:
    now = int(time.time() * 1000)
    raw = ei.build_extra_info(10, now, 30_000, 3, "%RETRY%G_T", "broker-b", 2, 12) + " 4096"
    handle = ReceiptHandle.decode(raw)
    assert (handle.start_offset, handle.retrieve_time, handle.invisible_time, handle.revive_queue_id) == (
        10, now, 30_000, 3)
    assert (handle.topic_type, handle.broker_name, handle.queue_id, handle.offset) == ("1", "broker-b", 2, 12)
    assert handle.commit_log_offset == 4096
    assert handle.real_topic("T", "G") == "%RETRY%G_T"
    assert not handle.is_expired(now + 29_999)
    assert handle.is_expired(now + 30_000)
    assert handle.encode() == raw
    assert ReceiptHandle.decode(ei.build_extra_info(1, now, 1, 0, "T", "b", 0, 1)).commit_log_offset == -1


@pytest.mark.parametrize("raw", ["", "1 2 3", "a b c d e f g h", "1 2 3 4 0 b x 5"])
def test_receipt_handle_rejects_garbage(raw: str) -> None:
    with pytest.raises(InvalidReceiptHandle):
        ReceiptHandle.decode(raw)


@given(st.integers(0, 2**40), st.integers(0, 2**41), st.integers(0, 10**8), st.integers(0, 999),
       st.sampled_from(["T", "%RETRY%g_T", "%RETRY%g+T"]), st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True),
       st.integers(0, 1024), st.integers(0, 2**40), st.integers(0, 2**50))
def test_receipt_handle_round_trip(start, pop_time, invisible, revive, topic, broker, queue, offset, clo) -> None:
    raw = ei.build_extra_info(start, pop_time, invisible, revive, topic, broker, queue, offset) + f" {clo}"
    handle = ReceiptHandle.decode(raw)
    assert (handle.start_offset, handle.retrieve_time, handle.invisible_time, handle.revive_queue_id,
            handle.broker_name, handle.queue_id, handle.offset, handle.commit_log_offset) == (
        start, pop_time, invisible, revive, broker, queue, offset, clo)
    assert handle.topic_type == ei.retry_flag(topic)


def test_pop_ck_built_from_offset_infos() -> None:
    """MQClientAPIImpl.processPopResponse: handles from startOffsetInfo/msgOffsetInfo per queue."""
    msgs = [MessageExt(topic="T", queue_id=1, queue_offset=o) for o in (5, 6)] + [
        MessageExt(topic="%RETRY%G_T", queue_id=0, queue_offset=9, properties={MessageConst.POP_CK: "kept"})]
    rh = h.PopMessageResponseHeader(pop_time=1000, invisible_time=60_000, revive_qid=2, rest_num=0,
                                    start_offset_info="0 1 5", msg_offset_info="0 1 5,6")
    header = h.PopMessageRequestHeader(consumer_group="G", topic="T", queue_id=-1, max_msg_nums=32,
                                       invisible_time=60_000, poll_time=0, born_time=0, init_mode=0)
    _attach_pop_ck(msgs, rh, header, "broker-a")
    assert msgs[0].properties[MessageConst.POP_CK] == "5 1000 60000 2 0 broker-a 1 5"
    assert msgs[1].properties[MessageConst.POP_CK] == "5 1000 60000 2 0 broker-a 1 6"
    assert msgs[2].properties[MessageConst.POP_CK] == "kept"
    assert all(m.topic == "T" for m in msgs)
    assert msgs[0].properties[MessageConst.FIRST_POP_TIME] == "1000"


def test_error_mapping() -> None:
    assert errors.status_of(MQBrokerError(ResponseCode.SYSTEM_BUSY, "busy")).code == Code.TOO_MANY_REQUESTS
    assert errors.status_of(MQBrokerError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "x")).code == \
        Code.CONSUMER_GROUP_NOT_FOUND
    assert errors.status_of(MQBrokerError(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "x")).code == Code.NOT_IMPLEMENTED
    assert errors.status_of(MQClientError("no route", ResponseCode.TOPIC_NOT_EXIST)).code == Code.TOPIC_NOT_FOUND
    assert errors.status_of(RemotingTimeoutError("a:1", 3.0)).code == Code.PROXY_TIMEOUT
    assert errors.status_of(ProxyError(Code.ILLEGAL_TOPIC, "bad")).message == "bad"
    st_ = errors.status_of(ZeroDivisionError("boom"))
    assert st_.code == Code.INTERNAL_SERVER_ERROR and "Traceback" not in st_.message


def test_message_conversion_round_trip() -> None:
    config = ProxyConfig()
    proto = pb.Message(topic=pb.Resource(name="T"), body=b"payload", user_properties={"a": "1"},
                       system_properties=pb.SystemProperties(message_id="ID1", tag="TagA", keys=["k1", "k2"],
                                                             message_group="grp"))
    props = converter.build_message_properties(proto, "T", "10.0.0.1:5555", config)
    assert props[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == "ID1"
    assert props[MessageConst.TAGS] == "TagA"
    assert props[MessageConst.KEYS] == "k1 k2"
    assert props[MessageConst.SHARDING_KEY] == "grp"
    assert props[MessageConst.BORN_HOST] == "10.0.0.1:5555"
    stored = MessageExt(topic="T", body=b"payload", properties=dict(props, **{MessageConst.POP_CK: "h"}),
                        reconsume_times=2, queue_id=3, queue_offset=7)
    back = converter.build_proto_message(stored)
    assert back.body == b"payload" and dict(back.user_properties) == {"a": "1"}
    sp = back.system_properties
    assert (sp.message_id, sp.tag, list(sp.keys), sp.message_group) == ("ID1", "TagA", ["k1", "k2"], "grp")
    assert sp.message_type == pb.MessageType.FIFO
    assert (sp.receipt_handle, sp.delivery_attempt, sp.queue_id, sp.queue_offset) == ("h", 3, 3, 7)
    assert sp.body_digest.checksum == "321C3CF486ED509164EDEC1E1981FEC8"  # MD5("payload"), upper case


def test_delay_becomes_timer_property_or_level() -> None:
    proto = pb.Message(topic=pb.Resource(name="T"), body=b"x",
                       system_properties=pb.SystemProperties(message_id="ID", message_type=pb.MessageType.DELAY))
    deliver = int(time.time() * 1000) + 4_000
    proto.system_properties.delivery_timestamp.FromMilliseconds(deliver)
    props = converter.build_message_properties(proto, "T", "", ProxyConfig(use_delay_level=False))
    assert props[MessageConst.TIMER_DELIVER_MS] == str(deliver)
    assert MessageConst.DELAY_TIME_LEVEL not in props
    leveled = converter.build_message_properties(proto, "T", "", ProxyConfig(use_delay_level=True))
    assert leveled[MessageConst.DELAY_TIME_LEVEL] == "2"  # 4 s -> the 5 s level


def test_namesrv_addr_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_namesrv_addr("a:9876;b:9876; a:9876 ;") == ["a:9876", "b:9876"]
    assert parse_namesrv_addr(None) == []
    with pytest.raises(ValueError):
        parse_namesrv_addr("nohost")
    from orbitmq.client import resolve_namesrv_addr

    monkeypatch.setenv("NAMESRV_ADDR", "x:1;y:2")
    assert resolve_namesrv_addr() == ["x:1", "y:2"]
    assert resolve_namesrv_addr("z:3") == ["z:3"]


def test_message_group_hashing_is_java_compatible_and_stable() -> None:
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("message-group-\u00e9") == java_string_hash("message-group-\u00e9")
    assert java_string_hash("") == 0
    for buckets in (1, 2, 8, 16):
        for key in ("a", "b", "order-42"):
            bucket = consistent_hash(java_string_hash(key), buckets)
            assert 0 <= bucket < buckets
            assert bucket == consistent_hash(java_string_hash(key), buckets)
    # Consistent hashing moves few keys when a queue is added.
    keys = [f"k{i}" for i in range(1000)]
    moved = sum(consistent_hash(java_string_hash(k), 8) != consistent_hash(java_string_hash(k), 9) for k in keys)
    assert moved < 250
