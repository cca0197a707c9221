"""The Remoting fast paths give the same bytes and results as the straightforward code they replace.

Header JSON written by hand vs json.JSONEncoder on the equivalent dict; frames cut out of arbitrary
data_received chunks; typed headers from generated code vs the generic field loop; one timer per
channel for response timeouts; guard-wrapped processors answered by the table itself.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.broker.processors.base import Fields, RequestError
from orbitmq.broker.processors.registry import guard
from orbitmq.remoting import (
    LanguageCode,
    RemotingCommand,
    RemotingCommandError,
    RemotingTimeoutError,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from orbitmq.remoting import headers as h
from orbitmq.remoting.channel import Channel
from orbitmq.remoting.processor import ProcessorTable

_REFERENCE_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _reference_json_header(cmd: RemotingCommand) -> bytes:
    """The header as the codec wrote it before: a dict in fastjson's key order through JSONEncoder."""
    obj: dict[str, Any] = {"code": int(cmd.code)}
    if cmd.ext_fields:
        obj["extFields"] = {str(k): str(v) for k, v in cmd.ext_fields.items()}
    obj["flag"] = int(cmd.flag)
    obj["language"] = LanguageCode(cmd.language).name
    obj["opaque"] = int(cmd.opaque)
    if cmd.remark is not None:
        obj["remark"] = cmd.remark
    obj["serializeTypeCurrentRPC"] = SerializeType(cmd.serialize_type).name
    obj["version"] = int(cmd.version)
    return _REFERENCE_ENCODER.encode(obj).encode("utf-8")


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
_int32 = st.integers(-(2**31), 2**31 - 1)


@settings(max_examples=300, deadline=None)
@given(code=_int32, flag=_int32, opaque=_int32, version=_int32,
       language=st.sampled_from(list(LanguageCode)), remark=st.none() | _text,
       ext=st.dictionaries(_text, _text | st.integers() | st.booleans(), max_size=8))
def test_json_header_matches_the_json_encoder(code, flag, opaque, version, language, remark, ext):
    cmd = RemotingCommand(code=code, language=language, version=version, opaque=opaque, flag=flag,
                          remark=remark, ext_fields=ext, body=b"xyz")
    header = cmd.encode_header()
    assert header == _reference_json_header(cmd)
    frame = cmd.encode()
    assert frame == struct.pack(">ii", 4 + len(header) + 3, len(header)) + header + b"xyz"
    back = RemotingCommand.decode(frame[4:])
    assert back.ext_fields == {str(k): str(v) for k, v in ext.items()}
    assert (back.code, back.flag, back.opaque, back.version, back.language, back.remark) == (
        code, flag, opaque, version, language, remark)


def test_json_header_with_enum_codes_and_escapes():
    cmd = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, {"i": "WAIT\x01true\x02", "q": 'a"b\\c\n'})
    cmd.remark = "caf\u00e9 \u2603 \"quoted\"\t"
    assert cmd.encode_header() == _reference_json_header(cmd)
    cmd.ext_fields = {}
    cmd.remark = None
    assert cmd.encode_header() == _reference_json_header(cmd)


@pytest.mark.parametrize("header", [
    b' {"code":1}', b'{"code":1} ', b'\n{"code":1,"opaque":2}\t',  # whitespace json.loads accepts
])
def test_json_header_with_surrounding_whitespace_decodes(header):
    frame = struct.pack(">I", len(header)) + header
    assert RemotingCommand.decode(frame).code == 1


@pytest.mark.parametrize("header", [b'{"code":1}x', b'\xef\xbb\xbf{"code":1}', b'{"code":1', b"", b"[1]"])
def test_bad_json_headers_still_refused(header):
    frame = struct.pack(">I", len(header)) + header
    with pytest.raises(RemotingCommandError):
        RemotingCommand.decode(frame)


def test_non_string_ext_values_from_other_encoders():
    header = b'{"code":1,"extFields":{"a":1,"b":true,"c":null,"d":"x","e":1.5}}'
    cmd = RemotingCommand.decode(struct.pack(">I", len(header)) + header)
    assert cmd.ext_fields == {"a": "1", "b": "true", "d": "x", "e": "1.5"}


# ---- frames out of data_received chunks ------------------------------------------------------

class _FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1), "sockname": ("127.0.0.1", 2)}.get(name, default)

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def _responses(n: int, serialize_type: SerializeType) -> list[RemotingCommand]:
    out = []
    for i in range(n):
        cmd = RemotingCommand.response(ResponseCode.SUCCESS, remark=None if i % 3 else f"r{i}",
                                       ext_fields={"n": str(i)}, body=bytes([i % 256]) * (i * 37 % 5000),
                                       opaque=i, serialize_type=serialize_type)
        out.append(cmd)
    return out


@pytest.mark.parametrize("serialize_type", list(SerializeType))
async def test_frames_split_at_any_boundary_are_all_delivered(serialize_type):
    rng = random.Random(7)
    commands = _responses(60, serialize_type)
    stream = b"".join(c.encode() for c in commands)
    channel = Channel(ProcessorTable())
    channel.connection_made(_FakeTransport())
    futures = {}
    for c in commands:
        futures[c.opaque] = channel._response_table[c.opaque] = asyncio.get_running_loop().create_future()
    pos = 0
    while pos < len(stream):
        step = rng.choice([1, 2, 3, 4, 5, 7, 100, 4096, 70000])
        channel.data_received(stream[pos:pos + step])
        pos += step
    assert not channel._buffer and channel.is_active
    for c in commands:
        got = futures[c.opaque].result()
        assert got == c and type(got.body) is bytes


async def test_bad_length_after_good_frames_closes_the_channel():
    channel = Channel(ProcessorTable())
    transport = _FakeTransport()
    channel.connection_made(transport)
    future = channel._response_table[5] = asyncio.get_running_loop().create_future()
    good = RemotingCommand.response(ResponseCode.SUCCESS, opaque=5).encode()
    channel.data_received(good + struct.pack(">i", -1))
    assert future.result().opaque == 5
    assert transport.closed and not channel.is_active


async def test_oversize_length_closes_before_the_frame_arrives():
    channel = Channel(ProcessorTable(), max_frame_size=1000)
    transport = _FakeTransport()
    channel.connection_made(transport)
    channel.data_received(b"\x00\x00")
    assert channel.is_active
    channel.data_received(struct.pack(">h", 2000) + b"x")
    assert transport.closed and not channel.is_active


# ---- response timeouts: one timer per channel -----------------------------------------------

async def test_mixed_timeouts_expire_in_deadline_order_and_answered_ones_do_not():
    channel = Channel(ProcessorTable())
    transport = _FakeTransport()
    channel.connection_made(transport)
    order: list[float] = []

    async def call(wait: float, answer: bool) -> str:
        req = RemotingCommand.request(RequestCode.HEART_BEAT)
        task = asyncio.ensure_future(channel.invoke(req, wait))
        await asyncio.sleep(0)
        if answer:
            channel.data_received(req.response_to(ResponseCode.SUCCESS).encode())
        try:
            await task
            return "ok"
        except RemotingTimeoutError:
            order.append(wait)
            return "timeout"

    results = await asyncio.gather(call(0.3, False), call(0.05, False), call(0.3, True), call(0.15, False),
                                   call(0.01, True))
    assert results == ["timeout", "timeout", "ok", "timeout", "ok"]
    assert order == [0.05, 0.15, 0.3]
    assert channel._response_table == {}
    await asyncio.sleep(0)
    assert channel._timer is None  # nothing left to watch


async def test_answered_deadlines_are_compacted():
    channel = Channel(ProcessorTable())
    channel.connection_made(_FakeTransport())
    loop = asyncio.get_running_loop()
    for _ in range(5000):
        future = loop.create_future()
        future.set_result(None)
        channel._watch(loop.time() + 60, future)
    assert len(channel._deadlines) <= 1100
    channel._begin_close()
    assert channel._timer is None and not channel._deadlines


# ---- typed headers: generated code == the generic field loop ----------------------------------

def _generic_from(cls: type[h.CommandCustomHeader], ext: dict[str, str]) -> Any:
    kwargs = {}
    for attr, wire, kind, required in cls._wire_fields():
        raw = ext.get(wire)
        if raw is None:
            if required:
                raise RemotingCommandError(f"{cls.__name__}: the custom field <{wire}> is null")
            continue
        kwargs[attr] = h._from_wire(cls.__name__, wire, raw, kind)
    return cls(**kwargs)


@pytest.mark.parametrize("cls", h.ALL_HEADERS, ids=lambda c: c.__name__)
def test_generated_header_codec_matches_the_field_loop(cls):
    rng = random.Random(cls.__name__)
    for _ in range(200):
        ext = {wire: rng.choice(["12", " 7 ", "x", "true", "TRUE", "false", "", "-3"])
               for _, wire, _, _ in cls._wire_fields() if rng.random() < 0.9}
        ext["unrelated"] = "1"
        try:
            expected: Any = _generic_from(cls, ext)
        except RemotingCommandError as exc:
            expected = str(exc)
        try:
            got: Any = cls.from_ext_fields(ext)
        except RemotingCommandError as exc:
            got = str(exc)
        assert got == expected
        if not isinstance(got, str):
            reference = {wire: h._to_wire(getattr(got, attr), kind)
                         for attr, wire, kind, _ in cls._wire_fields() if getattr(got, attr) is not None}
            assert list(got.to_ext_fields().items()) == list(reference.items())


# ---- guard-wrapped processors ----------------------------------------------------------------

@pytest.mark.parametrize("exc", [RequestError(ResponseCode.TOPIC_NOT_EXIST, "no topic"), ValueError("bad"), None])
async def test_table_answers_a_guarded_processor_like_the_guard(exc, caplog):
    async def processor(request: RemotingCommand, channel: Any) -> RemotingCommand:
        if exc is not None:
            raise exc
        return request.response_to(ResponseCode.SUCCESS, "fine")

    guarded = guard(RequestCode.SEND_MESSAGE, processor)
    table = ProcessorTable()
    table.register(RequestCode.SEND_MESSAGE, guarded)
    channel = Channel(table)
    channel.connection_made(_FakeTransport())
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE)
    caplog.set_level(logging.ERROR)
    via_guard = await guarded(request, channel)
    via_table = await table.dispatch(request, channel)
    assert via_table == via_guard
    if isinstance(exc, ValueError):
        assert caplog.text.count("processor for request code") == 2


def test_fields_number_parsing_unchanged():
    for raw in [" 12 ", "\x1c5\x1f", "1_0", "+5", "-0", "0x10", "", "９", "abc", 7, True, "2147483648"]:
        def parse(value: Any = raw) -> Any:
            try:
                return Fields({"x": value}).int("x")
            except RequestError as exc:
                return exc.remark
        expected: Any
        try:
            if isinstance(raw, bool):
                raise ValueError
            number = int(str(raw).strip(), 10) if raw != "" else None
            if number is None:
                expected = "the custom field <x> is null"
            elif not -(2**31) <= number <= 2**31 - 1:
                expected = f"the custom field <x> is out of range for int: {raw}"
            else:
                expected = number
        except ValueError:
            expected = f"the custom field <x> type is not int: {str(raw)[:64]!r}"
        assert parse() == expected
