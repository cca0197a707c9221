"""build_proto_message (fields set in place) equals the plain conversion it replaced, field by field."""

from __future__ import annotations

import hashlib

import pytest

from orbitmq.common import sysflag
from orbitmq.common.constants import is_retry_topic
from orbitmq.common.message import MessageConst, MessageExt
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.pool import Timestamp
from orbitmq.proxy import converter

NOW = 1_763_769_600_000


def _ts(ms: int) -> Timestamp:
    ts = Timestamp()
    ts.FromMilliseconds(int(ms))
    return ts


def reference_build(msg: MessageExt, topic: str | None = None) -> pb.Message:
    """The conversion as it was written before the in-place rewrite (GrpcConverter.buildMessage)."""
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
    sysp.body_digest.type = pb.DigestType.MD5
    sysp.body_digest.checksum = hashlib.md5(msg.body).hexdigest().upper()
    compressed = msg.sys_flag & sysflag.COMPRESSED_FLAG == sysflag.COMPRESSED_FLAG
    sysp.body_encoding = pb.Encoding.GZIP if compressed else pb.Encoding.IDENTITY
    sysp.message_type = converter.message_type_of(props)
    sysp.born_timestamp.CopyFrom(_ts(msg.born_timestamp))
    born_host = props.get(MessageConst.BORN_HOST) or msg.born_host
    if born_host:
        sysp.born_host = born_host
    sysp.store_timestamp.CopyFrom(_ts(msg.store_timestamp))
    if msg.store_host:
        sysp.store_host = msg.store_host
    if MessageConst.TIMER_DELAY_SEC in props:
        sysp.delivery_timestamp.CopyFrom(_ts(NOW + int(props[MessageConst.TIMER_DELAY_SEC]) * 1000))
    elif MessageConst.TIMER_DELIVER_MS in props:
        sysp.delivery_timestamp.CopyFrom(_ts(int(props[MessageConst.TIMER_DELIVER_MS])))
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
    user = {k: v for k, v in props.items() if k not in converter._NOT_USER_PROPERTIES}
    return pb.Message(topic=pb.Resource(name=name), user_properties=user, system_properties=sysp, body=msg.body)


C = MessageConst
BASE = {C.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "0A0B0C0D0000ABCDEF0123456789", C.RECONSUME_TIME: "0",
        C.PRODUCER_GROUP: "PG", C.BORN_HOST: "10.0.0.1:5555",
        C.POP_CK: "0 1763769600000 60000 0 0 broker-a 3 123 98765", "MIN_OFFSET": "0", "MAX_OFFSET": "124"}


def _msg(props: dict[str, str], **kw) -> MessageExt:
    fields = dict(topic="T", body=b"hello", properties=props, queue_id=3, queue_offset=123,
                  born_timestamp=1_763_769_600_123, born_host="127.0.0.1:5555", store_timestamp=1_763_769_600_130,
                  store_host="127.0.0.1:10911", msg_id="7F00000100002A9F0000000000001234", commit_log_offset=98765)
    fields.update(kw)
    return MessageExt(**fields)


CASES = {
    "tags_keys_user": _msg({**BASE, C.TAGS: "TagA", C.KEYS: "k1 k2", "color": "red", "size": "L"}),
    "empty_tag_and_keys": _msg({**BASE, C.TAGS: "", C.KEYS: ""}),
    "no_properties": _msg({}, msg_id="", born_host="", store_host=""),
    "delay_deliver_ms": _msg({**BASE, C.TIMER_DELIVER_MS: "1763769660000"}),
    "delay_sec": _msg({**BASE, C.TIMER_DELAY_SEC: "30"}),
    "delay_level": _msg({**BASE, C.DELAY_TIME_LEVEL: "3"}),
    "fifo": _msg({**BASE, C.SHARDING_KEY: "order-42", C.TRACE_CONTEXT: "00-abc-def-01"}),
    "fifo_empty_group": _msg({**BASE, C.SHARDING_KEY: ""}),
    "transaction": _msg({**BASE, C.TRANSACTION_PREPARED: "true", C.CHECK_IMMUNITY_TIME_IN_SECONDS: "60"}),
    "retry_topic": _msg({**BASE, C.RETRY_TOPIC: "T"}, topic="%RETRY%G_T", reconsume_times=4),
    "retry_topic_without_origin": _msg(dict(BASE), topic="%RETRY%G_T", reconsume_times=1),
    "dlq": _msg({**BASE, C.DLQ_ORIGIN_TOPIC: "T", C.DLQ_ORIGIN_MESSAGE_ID: "ID1"}, topic="%DLQ%G"),
    "dlq_topic_only": _msg({**BASE, C.DLQ_ORIGIN_TOPIC: "T"}),
    "non_ascii": _msg({**BASE, C.TAGS: "标签", C.KEYS: "ключ κλειδί", "名前": "値"}, body="héllo wörld ✓".encode()),
    "empty_body": _msg(dict(BASE), body=b""),
    "compressed": _msg(dict(BASE), sys_flag=sysflag.COMPRESSED_FLAG, body=b"\x1f\x8b" + bytes(range(256))),
    "zero_times": _msg(dict(BASE), born_timestamp=0, store_timestamp=0, queue_offset=0, queue_id=0),
    "negative_time": _msg(dict(BASE), born_timestamp=-1, store_timestamp=-1_500),
    "empty_topic": _msg(dict(BASE), topic=""),
    "large_body": _msg(dict(BASE), body=bytes(range(256)) * 4096),
}


@pytest.fixture(autouse=True)
def _fixed_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(converter, "now_ms", lambda: NOW)


def _assert_same(new: pb.Message, old: pb.Message) -> None:
    assert new == old
    assert new.SerializeToString(deterministic=True) == old.SerializeToString(deterministic=True)
    for field in ("tag", "message_group", "receipt_handle", "trace_context", "dead_letter_queue",
                  "delivery_timestamp", "store_timestamp", "queue_offset", "delivery_attempt"):
        assert new.system_properties.HasField(field) == old.system_properties.HasField(field), field
    for field in ("topic", "system_properties"):
        assert new.HasField(field) == old.HasField(field), field


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_as_reference(name: str) -> None:
    msg = CASES[name]
    _assert_same(converter.build_proto_message(msg), reference_build(msg))


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_as_reference_with_topic(name: str) -> None:
    msg = CASES[name]
    _assert_same(converter.build_proto_message(msg, "Other"), reference_build(msg, "Other"))


@pytest.mark.parametrize("ms", [0, 1, 999, 1000, -1, -999, -1001, 1_763_769_600_123,
                                 -62_135_596_800_000, 253_402_300_799_999])
def test_timestamps_match_from_milliseconds(ms: int) -> None:
    msg = _msg(dict(BASE), born_timestamp=ms, store_timestamp=ms)
    _assert_same(converter.build_proto_message(msg), reference_build(msg))


@pytest.mark.parametrize("ms", [-62_135_596_800_001, 253_402_300_800_000])
def test_out_of_range_timestamp_raises_like_protobuf(ms: int) -> None:
    msg = _msg(dict(BASE), born_timestamp=ms)
    with pytest.raises(ValueError) as old:
        reference_build(msg)
    with pytest.raises(ValueError) as new:
        converter.build_proto_message(msg)
    assert str(new.value) == str(old.value)


@pytest.mark.parametrize("name", sorted(CASES))
def test_filled_response_same_as_wrapped_message(name: str) -> None:
    """ReceiveMessage fills the Message inside the response; the bytes are those of the wrapped copy."""
    from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb

    msg = CASES[name]
    filled = spb.ReceiveMessageResponse()
    converter.fill_proto_message(filled.message, msg)
    wrapped = spb.ReceiveMessageResponse(message=reference_build(msg))
    assert filled == wrapped
    assert filled.WhichOneof("content") == wrapped.WhichOneof("content") == "message"
    assert filled.SerializeToString(deterministic=True) == wrapped.SerializeToString(deterministic=True)


@pytest.mark.parametrize("kind", ["LZ4", "ZSTD"])
def test_lz4_and_zstd_bodies_go_out_inflated(kind: str) -> None:
    """gRPC has no LZ4 or ZSTD Encoding: such a body is inflated, sent as IDENTITY, and its digest
    is of what is sent."""
    from orbitmq.common.compression import CompressionType, compress

    body = b"lz4 and zstd " * 700
    ctype = CompressionType.of(kind)
    msg = _msg(dict(BASE), sys_flag=sysflag.COMPRESSED_FLAG | ctype.compression_flag, body=compress(body, ctype))
    out = converter.build_proto_message(msg)
    assert out.body == body
    assert out.system_properties.body_encoding == pb.Encoding.IDENTITY
    assert out.system_properties.body_digest.checksum == hashlib.md5(body).hexdigest().upper()


@pytest.mark.parametrize("type_bits", [0, sysflag.COMPRESSION_ZLIB_TYPE])
def test_zlib_bodies_go_out_as_gzip_encoding(type_bits: int) -> None:
    """A zlib body (with the ZLIB bits, or none as a 4.x producer writes it) is passed on for the
    client to inflate (Encoding.GZIP)."""
    import zlib

    stored = zlib.compress(b"zlib " * 1000)
    out = converter.build_proto_message(_msg(dict(BASE), sys_flag=sysflag.COMPRESSED_FLAG | type_bits, body=stored))
    assert out.body == stored
    assert out.system_properties.body_encoding == pb.Encoding.GZIP


def test_a_corrupt_lz4_body_is_sent_as_stored() -> None:
    stored = b"not an lz4 frame"
    msg = _msg(dict(BASE), sys_flag=sysflag.COMPRESSED_FLAG | sysflag.COMPRESSION_LZ4_TYPE, body=stored)
    out = converter.build_proto_message(msg)
    assert out.body == stored
    assert out.system_properties.body_encoding == pb.Encoding.IDENTITY
