"""The compiled Remoting codec (orbitmq.remoting._speedups_protocol) is the one in use and gives
exactly what the pure-Python codec gives: the same frames, the same decoded commands (values, types,
ext_fields order) and, for bad frames and unencodable commands, the same exception and message.

Never skipped: a missing build must fail here, not fall back to the Python code unnoticed. The
tests call the compiled functions themselves; with ORBITMQ_NO_SPEEDUPS=1 the codec in use must be
the Python one.
"""

from __future__ import annotations

import enum
import json
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.remoting import _speedups_protocol, protocol
from orbitmq.remoting._speedups_protocol import (
    decode_command,
    encode_command,
    json_header_encode,
)
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import LanguageCode, RemotingCommand, SerializeType
from tests.support.speedups import assert_in_use


def test_the_compiled_codec_is_the_one_in_use() -> None:
    """The compiled functions are in use (the Python ones with ORBITMQ_NO_SPEEDUPS=1)."""
    assert_in_use(protocol, "decode_command", _speedups_protocol)
    assert_in_use(protocol, "_encode_command", _speedups_protocol, "encode_command")
    assert_in_use(protocol, "_json_header_encode", _speedups_protocol, "json_header_encode")
    # and the Python oracles are the Python functions
    for fn in (protocol._py_decode_command, protocol._py_encode_command, protocol._py_json_header_encode):
        assert type(fn).__name__ == "function", fn


def test_the_usual_frames_take_the_compiled_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """What RocketMQ peers send is handled without the Python fallback (which would be correct, but slow)."""
    from orbitmq.remoting import _speedups_protocol as fast

    def no_fallback(*args: Any) -> Any:
        raise AssertionError("fell back to the Python codec")

    for name in ("_py_decode_command", "_py_encode_command", "_py_json_header_encode"):
        monkeypatch.setattr(fast, name, no_fallback)
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {
        "a": "group", "b": "Topic", "i": "UNIQ_KEY\x01AB\x02WAIT\x01true", "k": "false"}, b"body")
    response = request.response_to(ResponseCode.SUCCESS, "ok \"quoted\"", {"msgId": "7F01", "queueId": "0"})
    response.mark_response()
    for cmd in (request, response):
        frame = encode_command(cmd)
        json_header_encode(cmd)
        assert decode_command(frame, 4, len(frame)) == cmd
    header = _CANONICAL
    assert decode_command(_frame(header, b"b"), 0, len(header) + 5).code == 310


def test_channel_uses_the_compiled_decoder() -> None:
    from orbitmq.remoting import channel

    assert channel.decode_command is protocol.decode_command
    assert_in_use(protocol, "decode_command", _speedups_protocol)


# ---- outcome comparison ---------------------------------------------------------------------------

def _snapshot(value: Any) -> Any:
    """Everything observable about a result: values with their exact types, dict orders."""
    if isinstance(value, RemotingCommand):
        return ("command", [(k, _snapshot(v)) for k, v in vars(value).items()])
    if isinstance(value, dict):
        return ("dict", [(_snapshot(k), _snapshot(v)) for k, v in value.items()])
    return (type(value), value)


def _outcome(fn: Any, *args: Any) -> Any:
    try:
        result = fn(*args)
    except Exception as exc:
        return ("raised", type(exc), str(exc))
    return ("returned", _snapshot(result))


def _same(py: Any, fast: Any, *args: Any) -> Any:
    expected = _outcome(py, *args)
    assert _outcome(fast, *args) == expected
    return expected


def _same_encoding(cmd: RemotingCommand) -> None:
    _same(protocol._py_json_header_encode, json_header_encode, cmd)
    _same(protocol._py_encode_command, encode_command, cmd)
    # the public methods go through the compiled functions
    _same(lambda c: protocol._encode_header(c, protocol._py_json_header_encode), RemotingCommand.encode_header, cmd)
    _same(protocol._py_encode_command, RemotingCommand.encode, cmd)


def _same_decoding(frame: Any, start: Any = None, stop: Any = None) -> Any:
    """frame is a whole header+body (no length field); decode it at several offsets."""
    start = 0 if start is None else start
    stop = len(frame) if stop is None else stop
    outcome = _same(protocol._py_decode_command, decode_command, frame, start, stop)
    if isinstance(frame, bytes):
        padded = b"\x01\x02\x03" + frame + b"\xff"
        _same(protocol._py_decode_command, decode_command, padded, start + 3, stop + 3)
    return outcome


# ---- encode -------------------------------------------------------------------------------------

_ASCII = st.characters(max_codepoint=0x7F)
_ANY_TEXT = st.text(max_size=30) | st.text(_ASCII, max_size=30)  # incl. controls, quotes, surrogates
_INTS = (st.integers(-(2**31), 2**31 - 1) | st.integers(-(2**70), 2**70) | st.sampled_from(
    [0, -1, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**64]))


class _Str(str):
    def __str__(self) -> str:
        return "overridden"


class _OtherEnum(enum.IntEnum):
    X = 0


_ODD_KEYS = st.sampled_from([None, True, 7, 1.5, b"x", _Str("s")])
_ODD_VALUES = _ODD_KEYS | st.just(["l"])


@st.composite
def _any_command(draw: Any) -> RemotingCommand:
    ext = draw(st.dictionaries(_ANY_TEXT, _ANY_TEXT, max_size=8))
    if draw(st.integers(0, 5)) == 0:  # now and then a key or value a Java peer never sends
        ext[draw(_ANY_TEXT | _ODD_KEYS)] = draw(_ANY_TEXT | _ODD_VALUES)
    return RemotingCommand(
        code=draw(_INTS | st.sampled_from([RequestCode.SEND_MESSAGE_V2, ResponseCode.SUCCESS, True, "12", 1.5])),
        language=draw(st.sampled_from([*LanguageCode, 0, 3, 13, 14, -1, True, _OtherEnum.X, "JAVA", None])),
        version=draw(_INTS), opaque=draw(_INTS), flag=draw(_INTS | st.just(None)),
        remark=draw(st.none() | _ANY_TEXT | st.sampled_from([7, b"r", _Str("r")])),
        ext_fields=draw(st.just(ext) | st.sampled_from([None, {}, [("a", "b")]])),
        body=draw(st.binary(max_size=40) | st.binary(max_size=40).map(bytearray)
                  | st.sampled_from([None, b"", memoryview(b"mv"), "text"])),
        serialize_type=draw(st.sampled_from([*SerializeType, 0, 1, 2, None])))


@settings(max_examples=700, deadline=None)
@given(_any_command())
def test_encode_matches_python(cmd: RemotingCommand) -> None:
    _same_encoding(cmd)


_PROPS = "UNIQ_KEY\x017F0000010001AB\x02WAIT\x01true\x02TAGS\x01TagA\x02KEYS\x01k1 k2"


@pytest.mark.parametrize("cmd", [
    RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {
        "a": "group", "b": "Topic", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1700000000000",
        "h": "0", "i": _PROPS, "j": "0", "k": "false", "m": "false", "n": "broker-a"}, b"x" * 1024),
    RemotingCommand.response(ResponseCode.SUCCESS, None, {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true",
                                                          "msgId": "7F" * 16, "queueId": "0", "queueOffset": "9"},
                             opaque=-5),
    RemotingCommand.response(ResponseCode.SYSTEM_ERROR, 'caf\u00e9 \u2603 "q" \\ \t\n\r\b\f\x00\x1f\x7f'),
    RemotingCommand.response(ResponseCode.SYSTEM_ERROR, "lone \ud800 surrogate"),
    RemotingCommand.request(RequestCode.SEND_MESSAGE, {"k\udfff": "v"}),
    RemotingCommand.request(RequestCode.SEND_MESSAGE, {"k": "\u4e2d\u6587 \U0001f600"}),
    RemotingCommand.request(RequestCode.SEND_MESSAGE, {"k": "v" * 5000, "w": "\x01" * 3000}, b"b" * 70000),
    RemotingCommand(code=2**31, version=-(2**63), opaque=2**63 - 1, flag=-(2**31)),
    RemotingCommand(code=1, remark="x" * 0x1000000),  # header over 16 MiB: refused
    RemotingCommand(code=ResponseCode.SUCCESS, language=LanguageCode.GO, serialize_type=SerializeType.ROCKETMQ),
])
def test_encode_edge_cases_match_python(cmd: RemotingCommand) -> None:
    _same_encoding(cmd)


def test_encode_is_byte_exact_against_the_json_module() -> None:
    cmd = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, {"i": _PROPS, "q": 'a"b\\c\n\u00e9'}, b"body")
    cmd.remark = "r\x02"
    header = json.dumps({"code": 320, "extFields": {"i": _PROPS, "q": 'a"b\\c\n\u00e9'}, "flag": 0,
                         "language": "JAVA", "opaque": cmd.opaque, "remark": "r\x02",
                         "serializeTypeCurrentRPC": "JSON", "version": 479},
                        ensure_ascii=False, separators=(",", ":")).encode()
    assert encode_command(cmd) == struct.pack(">ii", 4 + len(header) + 4, len(header)) + header + b"body"


# ---- decode -------------------------------------------------------------------------------------

def _frame(header: bytes, body: bytes = b"", type_byte: int = 0) -> bytes:
    """A frame without its total-length field."""
    return struct.pack(">I", (type_byte << 24) | len(header)) + header + body


@settings(max_examples=500, deadline=None)
@given(_any_command())
def test_decode_of_what_python_writes_matches_python(cmd: RemotingCommand) -> None:
    try:
        frame = protocol._py_encode_command(cmd)
    except Exception:
        return
    _same_decoding(frame[4:])


_json_scalars = st.none() | st.booleans() | _INTS | st.floats(allow_nan=False) | _ANY_TEXT
_json = st.recursive(_json_scalars, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(_ANY_TEXT, inner, max_size=3), max_leaves=8)
_FIELD_VALUES = {
    "code": _INTS | _json, "flag": _INTS | _json, "opaque": _INTS | _json, "version": _INTS | _json,
    "language": st.sampled_from(["JAVA", "GO", "RUST", "java", "NOPE", 3, 99, None, True]) | _json,
    "remark": st.none() | _ANY_TEXT | _json,
    "serializeTypeCurrentRPC": st.sampled_from(["JSON", "ROCKETMQ"]) | _json,
    "extFields": st.none() | st.dictionaries(_ANY_TEXT, _ANY_TEXT | _json_scalars, max_size=6) | _json,
}


@st.composite
def _json_headers(draw: Any) -> bytes:
    keys = draw(st.lists(st.sampled_from([*_FIELD_VALUES, "other", "code"]), max_size=10))
    pairs = [(k, draw(_FIELD_VALUES.get(k, _json))) for k in keys]
    ensure_ascii = draw(st.booleans())
    sep = draw(st.sampled_from([(",", ":"), (", ", ": "), (",", ":")]))
    body = ",".join(json.dumps(k) + sep[1] + json.dumps(v, ensure_ascii=ensure_ascii, separators=sep)
                    for k, v in pairs)
    return ("{" + body + "}").encode("utf-8", "surrogatepass")


@settings(max_examples=1200, deadline=None)
@given(_json_headers(), st.binary(max_size=16))
def test_decode_of_any_json_object_matches_python(header: bytes, body: bytes) -> None:
    _same_decoding(_frame(header, body))


@settings(max_examples=800, deadline=None)
@given(_json_headers(), st.data())
def test_decode_of_damaged_headers_matches_python(header: bytes, data: Any) -> None:
    """Truncated, cut, byte-flipped and spliced headers: same command or same error."""
    edit = data.draw(st.sampled_from(["cut", "flip", "insert", "delete"]))
    at = data.draw(st.integers(0, len(header)))
    if edit == "cut":
        header = header[:at]
    elif edit == "flip":
        if at < len(header):
            header = header[:at] + bytes([data.draw(st.integers(0, 255))]) + header[at + 1:]
    elif edit == "insert":
        header = header[:at] + data.draw(st.sampled_from([b"\\", b'"', b"\\u", b"\\ud800", b"\x00", b"\xc3",
                                                          b"\xed\xa0\x80", b" ", b"-", b"0", b"}", b","]))
    else:
        header = header[:at] + header[at + 1:]
    _same_decoding(_frame(header, b"body"))


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=120))
def test_decode_of_garbage_matches_python(data: bytes) -> None:
    _same_decoding(data)
    _same_decoding(_frame(data))
    _same_decoding(_frame(b'{"code":1,"extFields":{"k":"' + data + b'"}}'))
    _same_decoding(_frame(b'{"remark":"' + data + b'","code":2}'))


_CANONICAL = (b'{"code":310,"extFields":{"a":"g","b":"T","i":"UNIQ_KEY\\u0001ABC\\u0002WAIT\\u0001true"},'
              b'"flag":0,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":479}')


@pytest.mark.parametrize("header", [
    _CANONICAL,
    b"{}",
    b'{"code":1}',
    b'{"code":null,"flag":null,"opaque":null,"version":null,"remark":null,"extFields":null}',
    b'{"code":-0,"opaque":-2147483648,"flag":2147483647,"version":-1}',
    b'{"code":2147483648}', b'{"code":-2147483649}', b'{"code":12345678901}', b'{"code":01}',
    b'{"code":1.0}', b'{"code":1e3}', b'{"code":"7"}', b'{"code":true}', b'{"code":-}', b'{"code":}',
    b'{"language":"GO"}', b'{"language":"go"}', b'{"language":9}', b'{"language":null}',
    b'{"language":"J\\u0041VA"}', b'{"co\\u0064e":5}',
    b'{"remark":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\u2603"}', b'{"remark":"\\ud83d\\ude00"}',
    b'{"remark":"\\ud800"}', b'{"remark":"\\udc00x"}', b'{"remark":"\\x"}', b'{"remark":"\\u12"}',
    b'{"remark":"\\u12g4"}', b'{"remark":"a\\"}', b'{"remark":"\x01"}', b'{"remark":"\x7f"}',
    '{"remark":"caf\u00e9"}'.encode(), b'{"remark":"\xff"}', b'{"remark":"\xed\xa0\x80"}', b'{"remark":1}',
    b'{"extFields":{}}', b'{"extFields":{"a":"1","a":"2","b":"3"}}', b'{"extFields":{"a":null}}',
    b'{"extFields":{"a":1,"b":true}}', b'{"extFields":[]}', b'{"extFields":""}', b'{"extFields":0}',
    b'{"extFields":{"a":"1"},"extFields":null}', b'{"extFields":{"":""}}', b'{"extFields":{"a":"1",}}',
    b'{"extFields":{"\\u0061":"\\u0062"}}', b'{"extFields":{"a":"1"}', b'{"extFields":{"a" :"1"}}',
    b'{"other":[1,2],"code":3}', b'{"other":{"x":1}}', b'{"other":1.5}', b'{"other":nul}', b'{"other":false}',
    b'{"other":true,"code":4}', b'{"serializeTypeCurrentRPC":"ROCKETMQ","code":8}',
    b'{"code":1,}', b'{,"code":1}', b'{"code" : 1}', b' {"code":1}', b'{"code":1} ', b'{"code":1}x',
    b'{"code":1', b'{"code"', b'{"', b"{", b"}", b"", b"[]", b"null", b'"x"', b"\xef\xbb\xbf{}",
    b'{"code":1,"code":"x"}', b'{"code":"x","code":1}', b'{"language":"NOPE","language":"JAVA"}',
])
def test_decode_edge_cases_match_python(header: bytes) -> None:
    _same_decoding(_frame(header, b"body"))


@pytest.mark.parametrize("frame", [
    b"", b"\x00", b"\x00\x00\x00", b"\x00\x00\x00\x00", _frame(b"{}")[:5],
    struct.pack(">i", 50) + b"{}", struct.pack(">I", 0xFFFFFF) + b"{}",
    _frame(b"{}", type_byte=7), _frame(b"{}", type_byte=0xFF), _frame(b"{}", type_byte=1),
    protocol._py_encode_command(RemotingCommand(code=5, remark="r", ext_fields={"k": "v"}, body=b"b",
                                                serialize_type=SerializeType.ROCKETMQ))[4:],
])
def test_decode_of_bad_and_binary_frames_matches_python(frame: bytes) -> None:
    _same_decoding(frame)


@pytest.mark.parametrize(("start", "stop"), [
    (0, None), (1, None), (0, 3), (-1, None), (0, 10**6), (5, 2), (0, -1), (True, None), (0.0, None),
    (None, None), (2**70, None),
])
def test_decode_with_odd_bounds_matches_python(start: Any, stop: Any) -> None:
    frame = _frame(_CANONICAL, b"body")
    stop = len(frame) if stop is None else stop
    _same(protocol._py_decode_command, decode_command, frame, start, stop)


@pytest.mark.parametrize("kind", [bytearray, memoryview, str])
def test_decode_of_other_buffer_types_matches_python(kind: Any) -> None:
    frame = _frame(_CANONICAL, b"body")
    data = frame.decode("latin-1") if kind is str else kind(frame)
    _same(protocol._py_decode_command, decode_command, data, 0, len(frame))


def test_decode_canonical_request() -> None:
    cmd = decode_command(_frame(_CANONICAL, b"body"), 0, len(_CANONICAL) + 8)
    assert type(cmd) is RemotingCommand
    assert cmd == RemotingCommand(code=310, opaque=42, ext_fields={
        "a": "g", "b": "T", "i": "UNIQ_KEY\x01ABC\x02WAIT\x01true"}, body=b"body")
    assert cmd.language is LanguageCode.JAVA and cmd.serialize_type is SerializeType.JSON
    assert list(vars(cmd)) == [f.name for f in RemotingCommand.__dataclass_fields__.values()]


@settings(max_examples=500, deadline=None)
@given(_any_command())
def test_round_trip_through_both_codecs(cmd: RemotingCommand) -> None:
    try:
        frame = encode_command(cmd)
    except Exception:
        return
    assert frame == protocol._py_encode_command(cmd)
    _same(protocol._py_decode_command, decode_command, frame, 4, len(frame))


