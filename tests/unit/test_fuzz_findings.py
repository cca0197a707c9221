"""Regression tests for what the fuzz harnesses (tests/fuzz) found: each decoder now fails with
its documented exception, and the proxy no longer lets a client smuggle properties in."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from orbitmq.auth.engine import remoting_requirements
from orbitmq.broker.store.index_file import IndexFile, index_file_size
from orbitmq.common.message_codec import RecordError, decode_pop_records, decode_record, encode_record
from orbitmq.common.message_id import decode_offset_message_id
from orbitmq.controller.replicas_info import EventDecodeError, decode_event, parse_sync_state_set_body
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proxy import converter
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.errors import ProxyError
from orbitmq.remoting.codes import RequestCode


def _bad_utf8_record() -> bytes:
    good = encode_record(topic="TT", queue_id=0, body=b"b")
    at = good.rindex(b"TT")
    return good[:at] + b"\xff\xfe" + good[at + 2:]


def test_a_record_whose_topic_is_not_utf8_is_a_record_error() -> None:
    with pytest.raises(RecordError):
        decode_record(_bad_utf8_record(), 0, False)
    with pytest.raises(RecordError):
        decode_pop_records(_bad_utf8_record())


def test_an_index_file_header_counting_more_items_than_the_file_holds(tmp_path: Path) -> None:
    path = tmp_path / "20250101000000000"
    data = bytearray(index_file_size(8, 8))
    struct.pack_into(">qqqqii", data, 0, 0, 1 << 40, 0, 0, 1, 1 << 25)  # indexCount 33554432
    slot = 40  # the 40-byte header, then the hash slots
    for i in range(8):
        struct.pack_into(">i", data, slot + 4 * i, 1 << 24)  # every slot points far past the end
    path.write_bytes(bytes(data))
    index = IndexFile(str(path), 8, 8)
    try:
        assert index.index_count == 8
        assert index.select_phy_offset("T#k", 32, 0, 1 << 62) == []
    finally:
        index.close()


def test_a_message_id_with_whitespace_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        decode_offset_message_id("7F007F0000 100009300000\x0c00000065")


def test_controller_bodies_of_the_wrong_json_shape() -> None:
    with pytest.raises(EventDecodeError):
        decode_event(b"\x00\x01" + b"5")
    with pytest.raises(ValueError):
        parse_sync_state_set_body(b'{"syncStateSet":[[1]],"syncStateSetEpoch":1}')
    with pytest.raises(ValueError):
        parse_sync_state_set_body(b'{"syncStateSet":[1],"syncStateSetEpoch":[1]}')


@pytest.mark.parametrize("body", [b"5", b"[1]", b'{"consumerDataSet":[1,{"subscriptionDataSet":[2,{"topic":3}]}]}',
                                  b'{"consumerGroup":["g"]}', b'{"groupName":{}}'])
def test_acl_requirements_of_a_body_of_the_wrong_shape(body: bytes) -> None:
    for code in (RequestCode.HEART_BEAT, RequestCode.UNREGISTER_CLIENT, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                 RequestCode.LOCK_BATCH_MQ):
        remoting_requirements(code, {}, body, "DefaultCluster")  # no AttributeError


def _message(**sysp: str) -> pb.Message:
    msg = pb.Message()
    msg.topic.name = "T"
    msg.body = b"x"
    msg.system_properties.message_id = "01AB"
    for key, value in sysp.items():
        setattr(msg.system_properties, key, value)
    return msg


@pytest.mark.parametrize("field", ["message_id", "born_host", "trace_context"])
def test_a_system_property_cannot_smuggle_other_properties(field: str) -> None:
    msg = _message(**{field: "01AB\x02DELAY\x013\x02"})
    config = ProxyConfig()
    for encode in (converter.encode_message_properties, converter._py_encode_message_properties,
                   converter.build_message_properties):
        with pytest.raises(ProxyError):
            encode(msg, "G", "127.0.0.1:1", config)


def test_printable_system_properties_still_take_the_compiled_path() -> None:
    msg = _message(born_host="10.0.0.1", trace_context="00-\u00e9-01")
    text, _, _ = converter.encode_message_properties(msg, "G", "127.0.0.1:1", ProxyConfig())
    assert "\u00e9" in text and "10.0.0.1" in text
