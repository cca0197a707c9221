"""The proxy's SendMessage fast path writes exactly what the Message-based path wrote.

encode_message_properties must give the string properties_to_string(build_message_properties(...))
gives (property order included: the broker stores the string as sent), or raise the same
ProxyError; encode_batch must give encode_messages' bytes; send_encoded / send_batch_encoded
must put the same Remoting request on the wire as send_message / send_batch.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.bench.load import LoadOptions, build_request
from orbitmq.client import api as api_module
from orbitmq.client.api import MQClientAPI
from orbitmq.client.batch import encode_batch, encode_messages
from orbitmq.client.route_cache import TopicRouteCache
from orbitmq.common.message import Message, MessageConst, properties_to_string
from orbitmq.common.route import BrokerData, QueueData, TopicRouteData
from orbitmq.common.topic_config import TopicConfig, TopicMessageType
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy import converter
from orbitmq.proxy.cluster import ClusterService
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.context import ProxyContext
from orbitmq.proxy.errors import ProxyError
from orbitmq.proxy.producer import ProducerActivity, ok_response
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

Code = pb.Code
NOW = 1_700_000_000_000
REMOTE = "10.1.2.3:40000"


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    # Delay levels depend on "now": both paths must see the same instant.
    monkeypatch.setattr(converter, "now_ms", lambda: NOW)
    monkeypatch.setattr(api_module, "_now_ms", lambda: NOW)


def _message(**sys_fields: Any) -> pb.Message:
    user = sys_fields.pop("user", None)
    delivery = sys_fields.pop("delivery", None)
    born = sys_fields.pop("born", None)
    orphan = sys_fields.pop("orphan", None)
    sysp = pb.SystemProperties(**sys_fields)
    if delivery is not None:
        sysp.delivery_timestamp.FromMilliseconds(delivery)
    if born is not None:
        sysp.born_timestamp.FromMilliseconds(born)
    if orphan is not None:
        sysp.orphaned_transaction_recovery_duration.seconds = orphan
    return pb.Message(topic=pb.Resource(name="T"), body=b"body", user_properties=user or {}, system_properties=sysp)


CASES = [
    _message(message_id="ID0"),
    _message(message_id="ID1", tag="TagA", keys=["k1", "k2"], born=NOW - 5, born_host="1.1.1.1:1"),
    _message(message_id="ID2", user={"a": "1", "b": "two", "\u00e9t\u00e9": "\u65e5\u672c\u8a9e"}, tag="\u6807\u7b7e",
             keys=["\u00fc", ""]),
    _message(message_id="ID3", message_type=pb.MessageType.DELAY, delivery=NOW + 90_000, born=NOW),
    _message(message_id="ID4", message_type=pb.MessageType.DELAY, delivery=NOW - 10),
    _message(message_id="ID5", message_type=pb.MessageType.FIFO, message_group="group-\u00e4", delivery_attempt=3),
    _message(message_id="ID6", message_type=pb.MessageType.TRANSACTION, orphan=42, trace_context="00-abc-01"),
    _message(message_id="ID7", message_type=pb.MessageType.TRANSACTION),
    _message(message_id="ID8", born_host="   "),
    _message(message_id=" ID9 ", user={"": "empty key", "k": ""}, born=-62135596800_000),
    # User properties the proxy overwrites in place (not reserved): the dict path's order.
    _message(message_id="IDA", user={"x": "1", MessageConst.SHARDING_KEY: "user", "y": "2"}, message_group="g"),
    _message(message_id="IDB", user={MessageConst.SHARDING_KEY: "user", MessageConst.TRACE_CONTEXT: "t"}),
    _message(message_id="IDC", user={MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS: "9"},
             message_type=pb.MessageType.TRANSACTION, orphan=7),
    _message(message_id="IDD", user={"nb": "a\u00a0b"}, tag="t\u00a0g"),  # printable-ish, not control
]


def _old(message: pb.Message, config: ProxyConfig, remote: str = REMOTE) -> Any:
    try:
        props = converter.build_message_properties(message, "T", remote, config)
    except ProxyError as exc:
        return ("error", exc.code, exc.message)
    return (properties_to_string(props), message.system_properties.message_id,
            converter.message_type_of_request(message))


def _new(message: pb.Message, config: ProxyConfig, remote: str = REMOTE) -> Any:
    try:
        return converter.encode_message_properties(message, "T", remote, config)
    except ProxyError as exc:
        return ("error", exc.code, exc.message)


@pytest.mark.parametrize("use_delay_level", [True, False])
@pytest.mark.parametrize("index", range(len(CASES)))
def test_properties_string_is_the_dict_paths(index: int, use_delay_level: bool) -> None:
    config = ProxyConfig(use_delay_level=use_delay_level)
    message = CASES[index]
    new = _new(message, config)
    assert new[0] != "error"
    assert new == _old(message, config)
    assert _new(message, config, "") == _old(message, config, "")


def test_properties_order_is_build_message_properties_order() -> None:
    message = _message(message_id="ID", user={"u": "1"}, tag="t", keys=["a", "b"], delivery=NOW + 4_000,
                       message_type=pb.MessageType.DELAY, message_group="g", trace_context="tc", born=NOW)
    text, _, message_type = converter.encode_message_properties(message, "PG", REMOTE,
                                                                ProxyConfig(use_delay_level=True))
    names = [item.split("\x01")[0] for item in text.split("\x02") if item]
    assert names == ["u", "TAGS", "KEYS", "UNIQ_KEY", "DELAY", "TIMER_DELIVER_MS", "RECONSUME_TIME", "PGROUP",
                     "__SHARDINGKEY", "TRACE_CONTEXT", "__BORNHOST", "BORN_TIMESTAMP"]
    assert message_type == pb.MessageType.DELAY


REFUSED = [
    _message(message_id=""),
    _message(message_id="   "),
    _message(message_id="I", user={MessageConst.TAGS: "x"}),
    _message(message_id="I", user={"k\x01": "v"}),
    _message(message_id="I", user={"k": "v\x85"}),
    _message(message_id="I", user={f"k{i}": "v" for i in range(129)}),
    _message(message_id="I", user={"k": "v" * 20_000}),
    _message(message_id="I", tag=" "),
    _message(message_id="I", tag="a|b"),
    _message(message_id="I", tag="a\tb"),
    _message(message_id="I", keys=["ok", " "]),
    _message(message_id="I", keys=["k\x00"]),
    _message(message_id="I", message_group=" "),
    _message(message_id="I", message_group="g" * 64),
    _message(message_id="I", message_group="g\x1f"),
    _message(message_id="I", delivery=NOW + 25 * 3600 * 1000),
    # Several faults at once: the first check in build_message_properties' order wins.
    _message(message_id="", tag="a|b", message_group=" ", user={"k\x02": "v"}),
    _message(message_id="", tag="a|b", message_group=" "),
    _message(message_id="", message_group=" ", delivery=NOW + 25 * 3600 * 1000),
]


@pytest.mark.parametrize("index", range(len(REFUSED)))
def test_refusals_are_the_dict_paths(index: int) -> None:
    config = ProxyConfig()
    old = _old(REFUSED[index], config)
    assert old[0] == "error"
    assert _new(REFUSED[index], config) == old


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_reserved_or_shadowed = st.sampled_from([MessageConst.TAGS, MessageConst.SHARDING_KEY, MessageConst.TRACE_CONTEXT,
                                         MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS, "UNIQ_KEY"])


@settings(max_examples=300, deadline=None)
@given(user=st.dictionaries(st.one_of(_text, _reserved_or_shadowed), _text, max_size=4),
       tag=st.one_of(st.none(), _text), keys=st.lists(_text, max_size=3), message_id=_text,
       message_type=st.sampled_from([0, 1, 2, 3, 4, 9]), group=st.one_of(st.none(), _text),
       trace=st.one_of(st.none(), _text), born_host=_text, attempt=st.one_of(st.none(), st.integers(0, 20)),
       delivery=st.one_of(st.none(), st.integers(-10_000, 30 * 3600 * 1000)),
       born=st.one_of(st.none(), st.integers(-2**40, 2**42)), orphan=st.one_of(st.none(), st.integers(0, 10**6)))
def test_any_message_converts_like_the_dict_path(user, tag, keys, message_id, message_type, group, trace, born_host,
                                                 attempt, delivery, born, orphan) -> None:
    fields: dict[str, Any] = {"message_id": message_id, "message_type": message_type, "keys": keys,
                              "born_host": born_host, "user": user}
    for name, value in (("tag", tag), ("message_group", group), ("trace_context", trace),
                        ("delivery_attempt", attempt)):
        if value is not None:
            fields[name] = value
    if delivery is not None:
        fields["delivery"] = NOW + delivery
    if born is not None:
        fields["born"] = born
    if orphan is not None:
        fields["orphan"] = orphan
    message = _message(**fields)
    config = ProxyConfig()
    assert _new(message, config) == _old(message, config)


def test_batch_body_is_encode_messages_bytes() -> None:
    config = ProxyConfig()
    bodies = [b"", b"x", "\u65e5\u672c".encode(), bytes(range(256)) * 8]
    protos = [CASES[i % len(CASES)] for i in range(len(bodies))]
    texts = [converter.encode_message_properties(p, "T", REMOTE, config)[0] for p in protos]
    dicts = [converter.build_message_properties(p, "T", REMOTE, config) for p in protos]
    expected = encode_messages([Message("T", body, 0, props) for body, props in zip(bodies, dicts, strict=True)])
    assert encode_batch(bodies, texts) == expected
    assert encode_batch([], []) == encode_messages([]) == b""


class _CapturingRemoting:
    def __init__(self) -> None:
        self.requests: list[RemotingCommand] = []
        self.code = 0
        self.extra: dict[str, str] = {}

    async def invoke(self, addr: str, request: RemotingCommand, timeout: float) -> RemotingCommand:  # noqa: ASYNC109
        self.requests.append(request)
        return RemotingCommand.response(self.code, None,
                                        {"msgId": "M", "queueId": "3", "queueOffset": "70", **self.extra})

    async def close(self) -> None:
        pass


def _wire(request: RemotingCommand) -> tuple[int, list[tuple[str, str]], bytes, bytes]:
    request.opaque = 0
    return request.code, list(request.ext_fields.items()), bytes(request.body or b""), request.encode()


@pytest.mark.parametrize("broker_name", ["broker-a", None])
async def test_encoded_sends_put_the_same_request_on_the_wire(broker_name: str | None) -> None:
    config = ProxyConfig()
    remoting = _CapturingRemoting()
    api = MQClientAPI(remoting)  # type: ignore[arg-type]
    proto = CASES[2]
    text, uniq, _ = converter.encode_message_properties(proto, "T", REMOTE, config)
    props = converter.build_message_properties(proto, "T", REMOTE, config)
    old = await api.send_message("b:1", broker_name, Message("T", b"body", 0, props), "T", 5, 8)  # type: ignore[arg-type]
    new = await api.send_encoded("b:1", broker_name, "T", b"body", text, uniq, "T", 5, 8)  # type: ignore[arg-type]
    assert new == old
    assert _wire(remoting.requests[1]) == _wire(remoting.requests[0])
    assert remoting.requests[0].code == RequestCode.SEND_MESSAGE_V2

    remoting.requests.clear()
    protos = CASES[:6]
    bodies = [b"b%d" % i for i in range(len(protos))]
    encoded = [converter.encode_message_properties(p, "T", REMOTE, config) for p in protos]
    messages = [Message("T", body, 0, converter.build_message_properties(p, "T", REMOTE, config))
                for body, p in zip(bodies, protos, strict=True)]
    old = await api.send_batch("b:1", broker_name, messages, "T", 1, 0)  # type: ignore[arg-type]
    new = await api.send_batch_encoded("b:1", broker_name, "T", bodies, [e[0] for e in encoded],  # type: ignore[arg-type]
                                       [e[1] for e in encoded], "T", 1, 0)
    assert new == old
    assert _wire(remoting.requests[1]) == _wire(remoting.requests[0])
    assert remoting.requests[0].code == RequestCode.SEND_BATCH_MESSAGE


async def test_send_encoded_refuses_retry_topics() -> None:
    api = MQClientAPI(_CapturingRemoting())  # type: ignore[arg-type]
    with pytest.raises(Exception, match="retry topic"):
        await api.send_encoded("b:1", "b", "%RETRY%G", b"x", "", "U", "G", 0)


def _activity(topic_type: TopicMessageType = TopicMessageType.NORMAL) -> tuple[ProducerActivity, _CapturingRemoting]:
    config = ProxyConfig()
    remoting = _CapturingRemoting()
    api = MQClientAPI(remoting)  # type: ignore[arg-type]
    routes = TopicRouteCache(api, ["127.0.0.1:1"])
    route = TopicRouteData([QueueData("b", 4, 4, 6)], [BrokerData("c", "b", {0: "127.0.0.1:2"})])
    for topic in ("T", "%RETRY%G"):
        routes._routes[topic] = route
    cluster = ClusterService(config, api, routes)
    for topic in ("T", "%RETRY%G"):
        cluster._topic_configs.put(topic, TopicConfig(topic, 4, 4, attributes={"message.type": topic_type.value}))
    return ProducerActivity(config, cluster), remoting


CTX = ProxyContext("client", "JAVA", "5", REMOTE, "", None)


async def test_send_message_answers_one_entry_per_message() -> None:
    activity, remoting = _activity()
    request = build_request(LoadOptions(batch=32, topic="T"), b"payload")
    response = await activity.send_message(CTX, request)
    assert response.status.code == Code.OK and response.status.message == "OK"
    assert [e.message_id for e in response.entries] == [m.system_properties.message_id for m in request.messages]
    assert [e.offset for e in response.entries] == list(range(70, 102))
    assert all(e.status.code == Code.OK and e.status.message == "OK" for e in response.entries)
    assert len(remoting.requests) == 1 and remoting.requests[0].code == RequestCode.SEND_BATCH_MESSAGE
    # The cached queue path rotates like select_write_queue: the next request takes the next queue.
    await activity.send_message(CTX, request)
    assert int(remoting.requests[1].ext_fields["e"]) == (int(remoting.requests[0].ext_fields["e"]) + 1) % 4

    single = spb.SendMessageRequest(messages=[request.messages[0]])
    response = await activity.send_message(CTX, single)
    assert [(e.message_id, e.offset) for e in response.entries] == [(request.messages[0].system_properties.message_id,
                                                                      70)]
    assert remoting.requests[-1].code == RequestCode.SEND_MESSAGE_V2
    assert remoting.requests[-1].ext_fields["i"] == converter.encode_message_properties(
        request.messages[0], "T", REMOTE, activity.config)[0]


async def test_single_message_to_a_retry_topic_keeps_reconsume_times_in_the_header() -> None:
    activity, remoting = _activity()
    message = _message(message_id="R1", delivery_attempt=4)
    message.topic.name = "%RETRY%G"
    await activity.send_message(CTX, spb.SendMessageRequest(messages=[message]))
    sent = remoting.requests[-1]
    assert sent.code == RequestCode.SEND_MESSAGE_V2
    assert sent.ext_fields["j"] == "4" and "RECONSUME_TIME" not in sent.ext_fields["i"]


@pytest.mark.parametrize(("mutate", "code", "text"), [
    (lambda r: r.messages[5].topic.__setattr__("name", "Other"), Code.MESSAGE_CORRUPTED, "topic in message is not same"),
    (lambda r: r.messages[3].__setattr__("body", b""), Code.MESSAGE_BODY_EMPTY, "message body cannot be empty"),
    (lambda r: r.messages[7].system_properties.__setattr__("tag", "a|b"), Code.ILLEGAL_MESSAGE_TAG,
     "tag cannot contain '|'"),
    (lambda r: r.messages[9].system_properties.__setattr__("message_group", "g"),
     Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "TopicMessageType validate failed, the expected type is NORMAL, "
     "but actual type is FIFO (topic T)"),
])
async def test_send_message_refusals(mutate: Any, code: int, text: str) -> None:
    activity, remoting = _activity()
    request = build_request(LoadOptions(batch=12, topic="T"), b"payload")
    mutate(request)
    with pytest.raises(ProxyError) as info:
        await activity.send_message(CTX, request)
    assert (info.value.code, info.value.message) == (code, text)
    assert remoting.requests == []


@pytest.mark.parametrize("batch", [1, 12])  # SEND_MESSAGE_V2 / the compiled batch path
@pytest.mark.parametrize(("topic_type", "fields", "actual"), [
    # The declared type is not what counts (TopicMessageType#parseFromMessageProperty): a FIFO
    # message without a group is NORMAL, a NORMAL one with a group FIFO, DELAY without a time NORMAL.
    (TopicMessageType.FIFO, {"message_type": pb.MessageType.FIFO}, "NORMAL"),
    (TopicMessageType.NORMAL, {"message_type": pb.MessageType.NORMAL, "message_group": "g"}, "FIFO"),
    (TopicMessageType.DELAY, {"message_type": pb.MessageType.DELAY}, "NORMAL"),
    (TopicMessageType.NORMAL, {"message_type": pb.MessageType.FIFO}, None),
    (TopicMessageType.NORMAL, {"message_type": pb.MessageType.DELAY}, None),
    (TopicMessageType.FIFO, {"message_type": pb.MessageType.NORMAL, "message_group": "g"}, None),
])
async def test_message_type_comes_from_the_properties(topic_type: TopicMessageType, fields: dict[str, Any],
                                                      actual: str | None, batch: int) -> None:
    """Found beside Apache RocketMQ 5.5.0's proxy (tests/compat): a raw FIFO send without a group
    to a FIFO topic is refused there (40014) and was stored here."""
    activity, remoting = _activity(topic_type)
    request = build_request(LoadOptions(batch=batch, topic="T"), b"payload")
    for message in request.messages:
        for name, value in fields.items():
            setattr(message.system_properties, name, value)
    if actual is None:
        response = await activity.send_message(CTX, request)
        assert response.status.code == Code.OK and len(remoting.requests) == 1
        return
    with pytest.raises(ProxyError) as info:
        await activity.send_message(CTX, request)
    assert (info.value.code, info.value.message) == (
        Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, f"TopicMessageType validate failed, the expected type is "
        f"{topic_type.value}, but actual type is {actual} (topic T)")
    assert remoting.requests == []


async def test_body_size_limit_and_mixed_topics() -> None:
    activity, _ = _activity(TopicMessageType.MIXED)
    activity.config.max_message_size = 10
    request = build_request(LoadOptions(batch=2, topic="T"), b"x" * 11)
    with pytest.raises(ProxyError) as info:
        await activity.send_message(CTX, request)
    assert (info.value.code, info.value.message) == (Code.MESSAGE_BODY_TOO_LARGE, "message body cannot exceed the max 10")
    activity.config.max_message_size = 0
    for message_type in (pb.MessageType.FIFO, pb.MessageType.DELAY):
        request.messages[1].system_properties.message_type = message_type
        response = await activity.send_message(CTX, request)
        assert response.status.code == Code.OK
    # A MIXED topic takes a transactional message too, but not in a batch with others: the batch's
    # one sysFlag would store it as a normal message (or the others as half messages).
    request.messages[1].system_properties.message_type = pb.MessageType.TRANSACTION
    with pytest.raises(ProxyError) as info:
        await activity.send_message(CTX, request)
    assert info.value.code == Code.MESSAGE_CORRUPTED


@pytest.mark.parametrize("first_offset", [0, 1, 100, 127, 128, 200, 16_383, 16_384, 2**35 - 3, 2**63 - 40])
def test_ok_response_equals_entries_added_one_by_one(first_offset: int) -> None:
    ids = ["7F0000010001ABCDEF", "\u00fcnic\u00f6de-\u65e5\u672c", "x" * 130, "", *(f"ID{i}" for i in range(28))]
    expected = spb.SendMessageResponse(status=pb.Status(code=Code.OK, message="OK"))
    for i, message_id in enumerate(ids):
        expected.entries.add(status=pb.Status(code=Code.OK, message="OK"), message_id=message_id,
                             offset=first_offset + i, transaction_id="", recall_handle="")
    built = ok_response(ids, first_offset)
    assert built == expected
    assert built.SerializeToString() == expected.SerializeToString()
    assert ok_response([], first_offset) == spb.SendMessageResponse(status=pb.Status(code=Code.OK, message="OK"))


async def test_send_message_entries_with_transaction_id_and_failed_status() -> None:
    activity, remoting = _activity(TopicMessageType.MIXED)
    request = build_request(LoadOptions(batch=3, topic="T"), b"payload")
    remoting.extra = {"transactionId": "TX", "recallHandle": "RH"}
    response = await activity.send_message(CTX, request)
    assert [(e.status.code, e.offset, e.transaction_id, e.recall_handle) for e in response.entries] == [
        (Code.OK, 70, "TX", "RH"), (Code.OK, 71, "TX", "RH"), (Code.OK, 72, "TX", "RH")]
    remoting.code = ResponseCode.FLUSH_DISK_TIMEOUT
    response = await activity.send_message(CTX, request)
    assert (response.status.code, response.status.message) == (Code.MASTER_PERSISTENCE_TIMEOUT,
                                                                "MASTER_PERSISTENCE_TIMEOUT")
    assert [(e.status.code, e.status.message, e.message_id) for e in response.entries] == [
        (Code.MASTER_PERSISTENCE_TIMEOUT, "send message failed, sendStatus=FLUSH_DISK_TIMEOUT", "")] * 3


def _reference_encode(messages: list[Message]) -> bytes:
    """MessageDecoder.encodeMessages, field by field (the layout the broker's decode_batch reads)."""
    out = bytearray()
    for msg in messages:
        props = properties_to_string(msg.properties).encode("utf-8")
        body = msg.body or b""
        out += struct.pack(">i", 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props))
        out += struct.pack(">iiii", 0, zlib.crc32(body) & 0x7FFFFFFF, msg.flag, len(body))
        out += body + struct.pack(">h", len(props)) + props
    return bytes(out)


def test_encode_messages_keeps_the_batch_layout() -> None:
    messages = [Message("T", b"", 0, {}), Message("T", b"abc", 7, {"a": "1", "\u00e9": "\u65e5"}),
                Message("T", bytes(range(256)) * 5, -1, {"KEYS": "k1 k2", "UNIQ_KEY": "U"})]
    assert encode_messages(messages) == _reference_encode(messages)
    with pytest.raises(struct.error):
        encode_messages([Message("T", b"x", 0, {"big": "v" * 40_000})])
    with pytest.raises(struct.error):
        encode_batch([b"x"], ["big\x01" + "v" * 40_000 + "\x02"])


@pytest.mark.parametrize("fields", [
    {"msgId": "M", "queueId": "3", "queueOffset": "70"},
    {"msgId": "M", "queueId": " 3 ", "queueOffset": "70", "transactionId": "TX", "recallHandle": "RH"},
    {"queueId": "3", "queueOffset": "70"},
    {"msgId": None, "queueId": "3", "queueOffset": "70"},
    {"msgId": "M", "queueId": "x", "queueOffset": "70"},
    {"msgId": "M", "queueId": "3"},
    {"msgId": "M", "queueId": "3", "queueOffset": None},
    None,
])
def test_send_result_decodes_like_the_response_header(fields: dict[str, Any] | None) -> None:
    from orbitmq.remoting import headers as h

    response = RemotingCommand.response(0, None, dict(fields) if fields is not None else None)
    response.ext_fields = fields

    def outcome(fn: Any) -> Any:
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 -- compared by type and text
            return (type(exc), str(exc))

    def reference() -> Any:
        rh = h.SendMessageResponseHeader.from_command(response)
        return (rh.msg_id, rh.queue_id, rh.queue_offset, rh.transaction_id, rh.recall_handle)

    def fast() -> Any:
        r = MQClientAPI(_CapturingRemoting())._send_result(response, "b:1", "T", "b", "U")  # type: ignore[arg-type]
        return (r.offset_msg_id, r.queue_id, r.queue_offset, r.transaction_id, r.recall_handle)

    assert outcome(fast) == outcome(reference)
