"""The compiled SendMessage path (_speedups_producer, _speedups_batch) gives what the Python code gives.

Oracle: the pure-Python functions kept as ``_py_<name>`` (encode_messages with the pure
encode_message_properties underneath). Compared on hypothesis-generated requests covering every
system property the proxy reads, user properties, non-ASCII and control characters, refusals
(their Code and message), unknown fields, and the configs and topic types that change the checks.
A missing build fails here (no skip): the public names must be the compiled ones, and the tests
call the compiled functions themselves, so they compare the same code under ORBITMQ_NO_SPEEDUPS=1.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orbitmq.bench.load import LoadOptions, build_request
from orbitmq.client import _speedups_batch, batch
from orbitmq.common import speedups
from orbitmq.common.message import MessageConst
from orbitmq.common.topic_config import TopicMessageType
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy import _speedups_producer, converter, producer
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.errors import ProxyError
from tests.support.source_roots import REPO
from tests.support.speedups import assert_in_use

NOW = 1_700_000_000_000
TOPIC = "T"
REMOTE = "10.1.2.3:40000"


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    # Delay checks depend on "now": both paths must see the same instant.
    monkeypatch.setattr(converter, "now_ms", lambda: NOW)


def test_public_names_are_the_compiled_ones() -> None:
    """The compiled functions are in use (the Python ones with ORBITMQ_NO_SPEEDUPS=1)."""
    for module, name, compiled in ((producer, "encode_messages", _speedups_producer),
                                   (producer, "ok_response", _speedups_producer),
                                   (converter, "encode_message_properties", _speedups_producer),
                                   (batch, "encode_batch", _speedups_batch)):
        assert_in_use(module, name, compiled)


# ---- requests ------------------------------------------------------------------------------

def _outcome(call: Any) -> Any:
    try:
        return ("ok", call())
    except ProxyError as exc:
        return ("refused", exc.code, exc.message)
    except Exception as exc:  # noqa: BLE001 -- any other error must be the same too
        return ("raised", type(exc), str(exc))


def _python_encode_messages(*args: Any) -> Any:
    """The oracle: encode_messages with the pure-Python encode_message_properties underneath."""
    compiled = converter.encode_message_properties
    converter.encode_message_properties = converter._py_encode_message_properties
    try:
        return _outcome(lambda: producer._py_encode_messages(*args))
    finally:
        converter.encode_message_properties = compiled


_ascii = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=10)
_any = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=10)
_text = st.one_of(_ascii, _ascii, _any, st.sampled_from(["", " ", "a|b", "a\tb", "\x85", "\u00a0", "\u65e5",
                                                         "g" * 70, "  x  ", "\x1f"]))
_reserved = st.sampled_from([MessageConst.TAGS, MessageConst.SHARDING_KEY, MessageConst.TRACE_CONTEXT,
                             MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS, "UNIQ_KEY"])
_int32 = st.integers(-2**31, 2**31 - 1)


_word = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=10)


@st.composite
def _messages(draw: st.DrawFn, plain: bool | None = None) -> pb.Message:
    """plain: the shape clients send (the compiled code writes those); else anything."""
    if plain is None:
        plain = draw(st.booleans())
    text = _word if plain else _text
    sysp = pb.SystemProperties(message_id=draw(_word if plain else st.one_of(_ascii, _text)),
                               message_type=draw(st.sampled_from([0, 1, 1, 2, 3] if plain else [0, 1, 2, 3, 4, 9])),
                               keys=draw(st.lists(_word | st.just(""), max_size=3) if plain else
                                         st.lists(_text, max_size=3) | st.lists(_ascii, min_size=15, max_size=18)),
                               born_host=draw(st.one_of(st.just(""), _ascii) if plain else _text),
                               body_encoding=draw(st.sampled_from([0, 1, 2])))
    for name in ("tag", "message_group", "trace_context"):
        value = draw(st.one_of(st.none(), _any if name == "trace_context" else text))
        if value is not None:
            setattr(sysp, name, value)
    attempt = draw(st.one_of(st.none(), st.integers(0, 20), _int32))
    if attempt is not None:
        sysp.delivery_attempt = attempt
    born = draw(st.one_of(st.none(), st.integers(-62135596800_000, 253402300799_999),
                          st.tuples(st.integers(-2**63, 2**63 - 1), _int32)))
    if isinstance(born, int):
        sysp.born_timestamp.FromMilliseconds(born)
    elif born is not None and not plain:  # any seconds/nanos, valid or not
        sysp.born_timestamp.seconds, sysp.born_timestamp.nanos = born
    delivery = None if plain else draw(st.one_of(st.none(), st.integers(-10_000, 30 * 3600 * 1000)))
    if delivery is not None:
        sysp.delivery_timestamp.FromMilliseconds(NOW + delivery)
    orphan = draw(st.one_of(st.none(), st.integers(0, 10**6)))
    if orphan is not None:
        sysp.orphaned_transaction_recovery_duration.seconds = orphan
    if draw(st.booleans()):
        sysp.receipt_handle = "rh"
        sysp.queue_id = 3
        sysp.store_timestamp.FromMilliseconds(NOW)
    user = {} if plain else draw(st.one_of(st.just({}), st.dictionaries(st.one_of(_text, _reserved), _text,
                                                                        max_size=3)))
    topic = TOPIC if plain else draw(st.sampled_from([TOPIC, TOPIC, "U", ""]))
    namespace = "" if plain else draw(st.sampled_from(["", "", "ns"]))
    body = draw(st.binary(min_size=1, max_size=40) if plain else
                st.one_of(st.binary(max_size=40), st.just(b""), st.just(b"b" * 300)))
    return pb.Message(topic=pb.Resource(name=topic, resource_namespace=namespace), body=body, user_properties=user,
                      system_properties=sysp)


_configs = st.just(ProxyConfig()) | st.builds(ProxyConfig, enable_message_body_empty_check=st.booleans(),
                     max_message_size=st.sampled_from([4 * 1024 * 1024, 100, 0, -1]),
                     max_user_property_size=st.sampled_from([16 * 1024, 12, 0]),
                     max_message_group_size=st.sampled_from([64, 5, 0, -1]),
                     use_delay_level=st.booleans(), user_property_max_num=st.sampled_from([128, 1]))
_topic_types = st.sampled_from([None, None, TopicMessageType.MIXED, *TopicMessageType])
_remotes = st.sampled_from([REMOTE, "", "   ", "h\u00f6st:1", "[::1]:5"])


def _accepted(topic_type: TopicMessageType | None) -> frozenset[int] | None:
    return None if topic_type is None else producer._ACCEPTED_TYPES[topic_type]


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), remote=_remotes)
def test_encode_messages_is_the_python_paths(data: st.DataObject, remote: str) -> None:
    # Mostly batches of one shape: a single refused message hides what the others became.
    plain = data.draw(st.sampled_from([True, True, False, None]))
    messages = data.draw(st.lists(_messages(plain), min_size=1, max_size=5))
    if plain:
        config = data.draw(st.just(ProxyConfig()) | _configs)
        topic_type = data.draw(st.sampled_from([None, TopicMessageType.MIXED]) | _topic_types)
    else:
        config = data.draw(_configs)
        topic_type = data.draw(_topic_types)
    request = spb.SendMessageRequest(messages=messages)
    args = (request, TOPIC, "", remote, config, _accepted(topic_type), topic_type)
    assert _outcome(lambda: _speedups_producer.encode_messages(*args)) == _python_encode_messages(*args)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=_messages(), config=_configs, remote=_remotes, group=st.sampled_from([TOPIC, "", "gr\u00fcppe"]))
def test_encode_message_properties_is_the_python_ones(message: pb.Message, config: ProxyConfig, remote: str,
                                                      group: str) -> None:
    compiled = _outcome(lambda: _speedups_producer.encode_message_properties(message, group, remote, config))
    assert compiled == _outcome(lambda: converter._py_encode_message_properties(message, group, remote, config))


def _bench_request(batch_size: int = 32) -> spb.SendMessageRequest:
    return build_request(LoadOptions(batch=batch_size, topic=TOPIC), b"x" * 1024)


def test_the_common_shape_is_written_by_the_compiled_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """What RocketMQ 5 clients and the benchmark send never reaches the Python fallback."""
    request = _bench_request()
    for proto in request.messages[:8]:
        proto.system_properties.keys.extend(["order-1", "k 2"])
        proto.system_properties.trace_context = "00-\u00e9-01"
        proto.system_properties.delivery_attempt = 2
    request.messages[1].system_properties.message_group = "g1"
    request.messages[2].system_properties.message_type = pb.MessageType.FIFO
    request.messages[2].system_properties.message_group = "g2"
    request.messages[3].system_properties.born_host = "192.168.0.1"
    config = ProxyConfig()
    args = (request, TOPIC, "", REMOTE, config, None, None)
    expected = _python_encode_messages(*args)

    def refuse(*_: Any) -> Any:
        raise AssertionError("the compiled path handed a common message to Python")

    monkeypatch.setattr(producer, "_encode_one", refuse)
    monkeypatch.setattr(converter, "_py_encode_message_properties", refuse)
    assert _outcome(lambda: _speedups_producer.encode_messages(*args)) == expected
    assert expected[0] == "ok" and len(expected[1][0]) == 32


def _set_born(seconds: int, nanos: int) -> Any:
    def change(sysp: pb.SystemProperties) -> None:
        sysp.born_timestamp.seconds, sysp.born_timestamp.nanos = seconds, nanos
    return change


def _setter(name: str, value: Any) -> Any:
    def change(sysp: pb.SystemProperties) -> None:
        if name == "keys":
            sysp.keys.extend(value)
        else:
            setattr(sysp, name, value)
    return change


# One field away from the common shape: each at the edge of a check the compiled code makes.
DEVIATIONS = [
    *(_setter("message_id", v) for v in ("", " ", "   ", "\t", "\x1f", "\x85", "\u00a0", "\u3000x", "\u00e9", "a b",
                                         "\x01A", "\x7f")),
    *(_setter("tag", v) for v in ("", " ", "a|b", "|", "a\tb", "\x7f", "\u00e9", "\u00a0", " a ", "~")),
    *(_setter("keys", v) for v in ([""], [" "], ["a", " "], ["a\x00"], ["\u00e9"], [" x "], ["k"] * 16,
                                   ["k"] * 17, ["x" * 20_000])),
    *(_setter("message_group", v) for v in ("", " ", "g" * 63, "g" * 64, "g\x1f", "\u00e4", "a|b")),
    *(_setter("trace_context", v) for v in ("", " ", "\x00", "\u00e9\U0001f600")),
    *(_setter("born_host", v) for v in (" ", "\t\n\x0b\x0c\r", "\x1c\x1d\x1e\x1f", "\x85", "\u3000", "\u00e9",
                                        "h\x01", " h ")),
    *(_setter("delivery_attempt", v) for v in (0, -1, 2**31 - 1, -(2**31))),
    *(_setter("message_type", v) for v in (0, 2, 3, 4, 9, -1)),
    *(_set_born(s, n) for s, n in ((0, -1), (0, 10**9), (0, 10**9 - 1), (-62135596800, 0), (-62135596801, 0),
                                   (253402300799, 999_999_999), (253402300800, 0), (-1, 500_000_000))),
]


@pytest.mark.parametrize("index", range(len(DEVIATIONS)))
def test_one_field_off_the_common_shape(index: int) -> None:
    request = _bench_request(3)
    DEVIATIONS[index](request.messages[1].system_properties)
    for topic_type in (None, TopicMessageType.NORMAL, TopicMessageType.FIFO):
        args = (request, TOPIC, "", REMOTE, ProxyConfig(), _accepted(topic_type), topic_type)
        assert _outcome(lambda a=args: _speedups_producer.encode_messages(*a)) == _python_encode_messages(*args)
    message = request.messages[1]
    for remote in (REMOTE, "", " "):
        assert _outcome(lambda r=remote: _speedups_producer.encode_message_properties(message, TOPIC, r, ProxyConfig())) == \
            _outcome(lambda r=remote: converter._py_encode_message_properties(message, TOPIC, r, ProxyConfig()))


def test_message_level_deviations() -> None:
    changes = [
        lambda m: m.user_properties.update({"a": "b"}),
        lambda m: setattr(m, "body", b""),
        lambda m: setattr(m, "body", b"x" * 5000),
        lambda m: setattr(m.topic, "name", "U"),
        lambda m: setattr(m.topic, "resource_namespace", "ns"),
        lambda m: m.ClearField("topic"),
        lambda m: m.system_properties.delivery_timestamp.FromMilliseconds(NOW + 10_000),
    ]
    for change in changes:
        request = _bench_request(3)
        change(request.messages[1])
        for config in (ProxyConfig(), ProxyConfig(max_message_size=4096, enable_message_body_empty_check=False)):
            args = (request, TOPIC, "", REMOTE, config, None, None)
            assert _outcome(lambda a=args: _speedups_producer.encode_messages(*a)) == _python_encode_messages(*args)


def test_unknown_fields_are_skipped_like_protobuf() -> None:
    """Fields this proxy does not know (a newer client's) sit in the wire bytes: read past them."""
    unknown = (b"\xf8\x3e\x05"          # field 999, varint
               b"\xf9\x3e" + b"\x01" * 8  # field 999, fixed64
               + b"\xfa\x3e\x02hi"      # field 999, length-delimited
               + b"\xfd\x3e\x00\x00\x00\x00")  # field 999, fixed32
    group = b"\xfb\x3e\x08\x01\xfc\x3e"  # field 999, a group holding a varint
    for extra in (unknown, group):
        request = _bench_request(3)
        sysp = request.messages[0].system_properties
        born = pb.SystemProperties()
        born.born_timestamp.MergeFromString(sysp.born_timestamp.SerializeToString() + extra)
        sysp.MergeFrom(born)
        sysp.MergeFromString(extra)
        request.messages[1].MergeFromString(extra)
        request.messages[2].topic.MergeFromString(extra)
        request.MergeFromString(extra)
        for proto in request.messages:
            proto.ClearField("user_properties")
        args = (request, TOPIC, "", REMOTE, ProxyConfig(), None, None)
        outcome = _outcome(lambda a=args: _speedups_producer.encode_messages(*a))
        assert outcome[0] == "ok"
        assert outcome == _python_encode_messages(*args)


def test_refusals_keep_their_order_across_messages() -> None:
    request = _bench_request(4)
    request.messages[1].system_properties.tag = "a|b"
    request.messages[2].topic.name = "other"
    args = (request, TOPIC, "", REMOTE, ProxyConfig(), None, None)
    outcome = _outcome(lambda: _speedups_producer.encode_messages(*args))
    assert outcome == _python_encode_messages(*args)
    assert outcome[0] == "refused" and "tag" in outcome[2]


def test_odd_arguments_take_the_python_path() -> None:
    request = _bench_request(2)
    config = ProxyConfig()
    for args in ((request, TOPIC, "", "\ud800", config, None, None),  # unencodable remote address
                 (request, TOPIC, "", None, config, None, None),
                 (spb.SendMessageRequest(), TOPIC, "", REMOTE, config, None, None)):
        assert _outcome(lambda a=args: _speedups_producer.encode_messages(*a)) == _python_encode_messages(*args)
    huge = ProxyConfig(max_message_size=2**80)
    args = (request, TOPIC, "", REMOTE, huge, None, None)
    assert _outcome(lambda: _speedups_producer.encode_messages(*args)) == _python_encode_messages(*args)


# ---- SendMessageResponse -------------------------------------------------------------------

_ids = st.lists(st.one_of(_ascii, _any, st.text(min_size=120, max_size=200)), max_size=40)


@settings(max_examples=400, deadline=None)
@given(ids=_ids, first=st.one_of(st.integers(0, 300), st.integers(0, 2**63 - 1 - 64),
                                 st.sampled_from([127, 128, 16383, 16384, 2**63 - 41])))
def test_ok_response_is_the_python_ones(ids: list[str], first: int) -> None:
    if first + len(ids) > 2**63 - 1:
        first = 2**63 - 1 - len(ids)
    compiled = _speedups_producer.ok_response(ids, first)
    expected = producer._py_ok_response(ids, first)
    assert compiled == expected
    assert compiled.SerializeToString() == expected.SerializeToString()


def test_ok_response_odd_arguments() -> None:
    for ids, first in ((("a", "b"), 5), (["a"], True), ([], 0), (["\u65e5" * 50], 2**63 - 2)):
        assert _outcome(lambda i=ids, f=first: _speedups_producer.ok_response(i, f)) == \
            _outcome(lambda i=ids, f=first: producer._py_ok_response(i, f))
    assert _outcome(lambda: _speedups_producer.ok_response(["\ud800"], 1)) == \
        _outcome(lambda: producer._py_ok_response(["\ud800"], 1))
    assert _outcome(lambda: _speedups_producer.ok_response([1], 1)) == _outcome(lambda: producer._py_ok_response([1], 1))


# ---- SEND_BATCH_MESSAGE body ---------------------------------------------------------------

@settings(max_examples=400, deadline=None)
@given(pairs=st.lists(st.tuples(st.binary(max_size=300), st.one_of(_ascii, _any)), max_size=12),
       as_tuple=st.booleans())
def test_encode_batch_is_the_python_ones(pairs: list[tuple[bytes, str]], as_tuple: bool) -> None:
    bodies = [body for body, _ in pairs]
    texts = [text for _, text in pairs]
    if as_tuple:
        bodies, texts = tuple(bodies), tuple(texts)
    assert _speedups_batch.encode_batch(bodies, texts) == batch._py_encode_batch(bodies, texts)


def test_encode_batch_odd_arguments() -> None:
    cases = [
        ([b"a", b"b"], ["x"]),                       # zip(strict=True)'s ValueError
        ([b"a"], ["x", "y"]),
        ([b"a", b"b"], ["x", "\ud800"]),             # UnicodeEncodeError
        ([b"a"], ["p" * 32767]),                     # the largest properties a short holds
        ([b"a"], ["p" * 32768]),                     # struct.error
        ([b"a"], ["\u00e9" * 16384]),                # 32768 UTF-8 bytes: struct.error too
        ([bytearray(b"ab"), memoryview(b"cd")], ["x", "y"]),
        ([b"a"], [b"bytes"]),
        (iter([b"a"]), iter(["x"])),
        ([], []),
        ([b"big" * 100_000], ["k\x01v\x02"]),
    ]
    for bodies, texts in cases:
        if isinstance(bodies, type(iter([]))):
            got = _outcome(lambda b=bodies, t=texts: _speedups_batch.encode_batch(b, t))
            assert got == _outcome(lambda: batch._py_encode_batch(iter([b"a"]), iter(["x"])))
            continue
        got = _outcome(lambda b=bodies, t=texts: _speedups_batch.encode_batch(b, t))
        assert got == _outcome(lambda b=bodies, t=texts: batch._py_encode_batch(b, t)), (bodies[:1], texts[:1])
    assert isinstance(_speedups_batch.encode_batch([b"a"], ["x"]), bytes)
    with pytest.raises(struct.error):
        _speedups_batch.encode_batch([b"a"], ["p" * 32768])


# ---- the wire table -----------------------------------------------------------------------------

def test_the_wire_table_matches_the_generated_descriptors() -> None:
    _speedups_producer.check_wire_fields()  # as at import
    names = {(message, field) for _, message, field, _, _ in _speedups_producer.WIRE_FIELDS}
    assert ("Message", "body") in names and ("SendResultEntry", "offset") in names


def test_a_mismatched_wire_table_fails_naming_each_field() -> None:
    table = list(_speedups_producer.WIRE_FIELDS)
    rows = {(message, field): i for i, (_, message, field, _, _) in enumerate(table)}
    file, message, field, number, _ = table[rows["Message", "body"]]
    table[rows["Message", "body"]] = (file, message, field, number + 1, "bytes")           # renumbered
    file, message, field, number, _ = table[rows["SystemProperties", "delivery_attempt"]]
    table[rows["SystemProperties", "delivery_attempt"]] = (file, message, field, number, "sint32")  # retyped
    file, message, field, number, _ = table[rows["SystemProperties", "keys"]]
    table[rows["SystemProperties", "keys"]] = (file, message, field, number, "string")     # not repeated
    table.append((file, "SystemProperties", "gone", 40, "string"))
    table.append((file, "Gone", "tag", 1, "string"))
    with pytest.raises(_speedups_producer.WireFieldsMismatch) as failure:
        _speedups_producer.check_wire_fields(table)
    text = str(failure.value)
    for expected in ("apache.rocketmq.v2.Message.body: read as field 5 (bytes)",
                     "SystemProperties.delivery_attempt: read as field 16 (sint32)",
                     "SystemProperties.keys: read as field 2 (string)",
                     "SystemProperties.gone: not in", "Gone.tag: not in", "ORBITMQ_NO_SPEEDUPS=1"):
        assert expected in text
    assert not isinstance(failure.value, ImportError)  # so speedups.load does not fall back on it


# Generated code whose Message.body has another number than the reader's: importing the converter
# (which loads the reader) must fail, unless the switch keeps the reader out.
_RENUMBERED_BODY = r"""
import sys, types
from google.protobuf import descriptor_pb2, descriptor_pool
import orbitmq.proto.apache.rocketmq.v2 as package
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as real

pool = descriptor_pool.DescriptorPool()

def add(file):
    for dependency in file.dependencies:
        add(dependency)
    try:
        pool.FindFileByName(file.name)
    except KeyError:
        proto = descriptor_pb2.FileDescriptorProto.FromString(file.serialized_pb)
        if file is real.DESCRIPTOR:
            for message in proto.message_type:
                for field in message.field:
                    if message.name == "Message" and field.name == "body":
                        field.number = 5
        pool.Add(proto)

add(real.DESCRIPTOR)
fake = types.ModuleType(real.__name__)
fake.__dict__.update(real.__dict__)
fake.DESCRIPTOR = pool.FindFileByName(real.DESCRIPTOR.name)
sys.modules[real.__name__] = package.definition_pb2 = fake
import orbitmq.proxy.converter
print("imported")
"""


@pytest.mark.parametrize("switched_off", [False, True], ids=["built", "ORBITMQ_NO_SPEEDUPS=1"])
def test_mismatched_generated_code_fails_the_import(switched_off: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != speedups.SWITCH}
    if switched_off:
        env[speedups.SWITCH] = "1"
    result = subprocess.run([sys.executable, "-c", _RENUMBERED_BODY], capture_output=True, text=True,
                            timeout=120, cwd=REPO, env=env)
    if switched_off:
        assert result.returncode == 0 and "imported" in result.stdout, result.stderr
    else:
        assert result.returncode != 0 and "imported" not in result.stdout
        assert "WireFieldsMismatch" in result.stderr
        assert "apache.rocketmq.v2.Message.body: read as field 4 (bytes)" in result.stderr, result.stderr
