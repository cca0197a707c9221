"""RemotingCommand: the unit of every Remoting RPC, and its byte-exact frame codec.

Frame (big-endian):  int total length | int (serializeType << 24 | headerLength) | header | body.
The total length counts everything after itself. The header is either RocketMQ's fastjson
rendering of the command (SerializeType.JSON) or RocketMQSerializable's compact binary layout
(SerializeType.ROCKETMQ); a response is written in the serialization its request used.
"""

from __future__ import annotations

import itertools
import json
import json.encoder as json_encoder
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from orbitmq.common import speedups
from orbitmq.remoting.errors import RemotingCommandError

RPC_TYPE_RESPONSE = 0x1  # flag bit 0: 1 = response, 0 = request
RPC_ONEWAY = 0x2  # flag bit 1: no response expected

# MQVersion.CURRENT_VERSION of the RocketMQ release we speak (Version.V5_3_3.ordinal()); brokers
# gate some header semantics (e.g. maxReconsumeTimes) on the caller's version.
DEFAULT_VERSION = 479

HEADER_LENGTH_MASK = 0xFFFFFF
MAX_HEADER_LENGTH = HEADER_LENGTH_MASK

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


class LanguageCode(IntEnum):
    """Caller language; JSON headers carry the name, binary headers the byte."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13


class SerializeType(IntEnum):
    """Header serialization, stored in the high byte of the header-length word."""

    JSON = 0
    ROCKETMQ = 1


class _OpaqueCounter:
    """Process-wide request id, wrapping like Java's AtomicInteger so it always fits an int32.

    ``next()`` of an itertools.count is a single C call, atomic under the GIL: no lock needed.
    """

    def __init__(self) -> None:
        self._counter = itertools.count()

    def next(self) -> int:
        return ((next(self._counter) + 2**31) & 0xFFFFFFFF) - 2**31


_opaque = _OpaqueCounter()
next_opaque = _opaque.next


@dataclass(eq=True)
class RemotingCommand:
    code: int
    language: LanguageCode = LanguageCode.JAVA
    version: int = DEFAULT_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    serialize_type: SerializeType = SerializeType.JSON

    # ---- construction -----------------------------------------------------------------------

    @classmethod
    def request(cls, code: int, ext_fields: dict[str, str] | None = None, body: bytes = b"", *,
                serialize_type: SerializeType = SerializeType.JSON,
                language: LanguageCode = LanguageCode.JAVA) -> RemotingCommand:
        """A new request with a fresh opaque (request id)."""
        return cls(code=int(code), language=language, opaque=next_opaque(),
                   ext_fields=dict(ext_fields or {}), body=body, serialize_type=serialize_type)

    @classmethod
    def response(cls, code: int, remark: str | None = None, ext_fields: dict[str, str] | None = None,
                 body: bytes = b"", opaque: int = 0, *,
                 serialize_type: SerializeType = SerializeType.JSON) -> RemotingCommand:
        return cls(code=int(code), opaque=opaque, flag=RPC_TYPE_RESPONSE, remark=remark,
                   ext_fields=dict(ext_fields or {}), body=body, serialize_type=serialize_type)

    def response_to(self, code: int, remark: str | None = None, ext_fields: dict[str, str] | None = None,
                    body: bytes = b"") -> RemotingCommand:
        """A response for this request: same opaque, same header serialization."""
        return RemotingCommand.response(code, remark, ext_fields, body, self.opaque,
                                        serialize_type=self.serialize_type)

    # ---- flags --------------------------------------------------------------------------------

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_TYPE_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    def mark_response(self) -> None:
        self.flag |= RPC_TYPE_RESPONSE

    def mark_oneway(self) -> None:
        self.flag |= RPC_ONEWAY

    # ---- encoding -----------------------------------------------------------------------------

    def encode_header(self) -> bytes:
        return _encode_header(self, _json_header_encode)

    def encode(self) -> bytes:
        """The whole frame, including the leading 4-byte total length."""
        return _encode_command(self)

    @classmethod
    def decode(cls, frame: bytes | bytearray | memoryview) -> RemotingCommand:
        """Decode a frame WITHOUT its leading total-length field."""
        if type(frame) is not bytes:
            frame = bytes(frame)
        return decode_command(frame, 0, len(frame))


_JSON = SerializeType.JSON
_ROCKETMQ = SerializeType.ROCKETMQ
_SERIALIZE_TYPES = {int(m): m for m in SerializeType}
_PREFIX = struct.Struct(">ii")


def _encode_header(cmd: RemotingCommand, json_header_encode: Callable[[RemotingCommand], bytes]) -> bytes:
    try:
        serialize_type = cmd.serialize_type
        if serialize_type == _JSON:
            return json_header_encode(cmd)
        if serialize_type == _ROCKETMQ:
            return _binary_header_encode(cmd)
    except (UnicodeEncodeError, ValueError, TypeError, struct.error) as exc:
        raise RemotingCommandError(f"cannot encode command code={cmd.code}: {exc}") from None
    raise RemotingCommandError(f"unknown serialize type {cmd.serialize_type!r}")


# Compiled twin: _speedups_protocol.encode_command (same bytes).
def _encode_command(cmd: RemotingCommand) -> bytes:
    """RemotingCommand.encode; the pure-Python one throughout (it is the accelerator's oracle)."""
    header = _encode_header(cmd, _py_json_header_encode)
    header_length = len(header)
    if header_length > MAX_HEADER_LENGTH:
        raise RemotingCommandError(f"header too long: {header_length} bytes")
    body = cmd.body or b""
    total = 4 + header_length + len(body)
    if total > _INT32_MAX:
        raise RemotingCommandError(f"frame too long: {total} bytes")
    return b"".join((_PREFIX.pack(total, (int(cmd.serialize_type) << 24) | header_length), header, body))


# Compiled twin: _speedups_protocol.decode_command (same command, same errors).
def decode_command(data: bytes, start: int, stop: int) -> RemotingCommand:
    """Decode the frame in ``data[start:stop]`` (WITHOUT its total-length field), copying
    only the header and the body out of ``data``."""
    if stop - start < 4:
        raise RemotingCommandError(f"frame too short: {stop - start} bytes")
    (word,) = _INT32.unpack_from(data, start)
    header_length = word & HEADER_LENGTH_MASK
    type_byte = (word >> 24) & 0xFF
    header_start = start + 4
    if header_length > stop - header_start:
        raise RemotingCommandError(
            f"bad header length {header_length}, frame has {stop - header_start} bytes after it")
    serialize_type = _SERIALIZE_TYPES.get(type_byte)
    if serialize_type is None:
        raise RemotingCommandError(f"unknown serialize type {type_byte}")
    body_start = header_start + header_length
    header = data[header_start:body_start]
    if serialize_type is _JSON:
        cmd = _json_header_decode(header)
    else:
        cmd = _binary_header_decode(header)
    cmd.serialize_type = serialize_type
    cmd.body = data[body_start:stop]
    return cmd


_py_decode_command = decode_command


# ---- JSON header (fastjson's rendering: alphabetical keys, compact, nulls omitted) -------------

# One encoder for every header: json.dumps with options builds a new encoder per call.
_JSON_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
# The C encoder JSONEncoder.encode would build on every call, built once. No circular check:
# it only ever sees a flat dict of strings. Same output as _JSON_ENCODER.encode.
_encode_ext = json_encoder.c_make_encoder(
    None, _JSON_ENCODER.default, json_encoder.encode_basestring, None, ":", ",", False, False, True) \
    if json_encoder.c_make_encoder is not None else None
_encode_str = json_encoder.encode_basestring  # what the encoder uses for strings (ensure_ascii=False)
_LANGUAGE_NAMES = {int(m): m.name for m in LanguageCode}
_LANGUAGE_BY_NAME = dict(LanguageCode.__members__)
_LANGUAGE_BY_NUMBER = {int(m): m for m in LanguageCode}
_SERIALIZE_NAMES = {int(m): m.name for m in SerializeType}
_DECODER = json.JSONDecoder()
_scan_once = _DECODER.scan_once


def _enum_name(names: dict[int, str], value: Any, what: str) -> str:
    try:
        return names[value]
    except (KeyError, TypeError):
        raise ValueError(f"{value!r} is not a valid {what}") from None


# Compiled twin: _speedups_protocol.json_header_encode (same bytes).
def _json_header_encode(cmd: RemotingCommand) -> bytes:
    # Written by hand in fastjson's key order (code, extFields, flag, language, opaque, remark,
    # serializeTypeCurrentRPC, version): what _JSON_ENCODER.encode of the equivalent dict writes,
    # without building that dict or the encoder per call.
    ext = cmd.ext_fields
    if ext:
        ext = {str(k): str(v) for k, v in ext.items()}
        ext_json = "".join(_encode_ext(ext, 0)) if _encode_ext is not None else _JSON_ENCODER.encode(ext)
        head = f'{{"code":{int(cmd.code)!r},"extFields":{ext_json},"flag":{int(cmd.flag)!r},"language":'
    else:
        head = f'{{"code":{int(cmd.code)!r},"flag":{int(cmd.flag)!r},"language":'
    language = _encode_str(_enum_name(_LANGUAGE_NAMES, cmd.language, "LanguageCode"))
    serialize = _encode_str(_enum_name(_SERIALIZE_NAMES, cmd.serialize_type, "SerializeType"))
    remark = cmd.remark
    if remark is not None:
        if not isinstance(remark, str):
            # let the generic encoder render (or refuse) what a str remark never is
            remark_json = _JSON_ENCODER.encode(remark)
        else:
            remark_json = _encode_str(remark)
        text = (f'{head}{language},"opaque":{int(cmd.opaque)!r},"remark":{remark_json},'
                f'"serializeTypeCurrentRPC":{serialize},"version":{int(cmd.version)!r}}}')
    else:
        text = (f'{head}{language},"opaque":{int(cmd.opaque)!r},'
                f'"serializeTypeCurrentRPC":{serialize},"version":{int(cmd.version)!r}}}')
    return text.encode("utf-8")


_py_json_header_encode = _json_header_encode


def _as_int(obj: dict[str, Any], key: str, default: int) -> int:
    value = obj.get(key, default)
    if value is None:
        return default
    if value.__class__ is int and _INT32_MIN <= value <= _INT32_MAX:
        return value
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise RemotingCommandError(f"JSON header field {key!r} is not an int: {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise RemotingCommandError(f"JSON header field {key!r} is not an int: {value!r}") from None
    if not _INT32_MIN <= number <= _INT32_MAX:
        raise RemotingCommandError(f"JSON header field {key!r} out of int range: {number}")
    return number


def _json_loads(header: bytes) -> Any:
    text = header.decode("utf-8")
    try:
        # the C scanner straight away; anything it does not take whole (surrounding whitespace,
        # errors) goes through json.loads for the same result or error as before
        obj, end = _scan_once(text, 0)
        if end == len(text):
            return obj
    except StopIteration:
        pass
    return json.loads(text)


def _json_header_decode(header: bytes) -> RemotingCommand:
    try:
        obj = _json_loads(header)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise RemotingCommandError(f"invalid JSON header: {exc}") from None
    if not isinstance(obj, dict):
        raise RemotingCommandError("invalid JSON header: not an object")
    language_raw = obj.get("language", "JAVA")
    language = _LANGUAGE_BY_NAME.get(language_raw) if isinstance(language_raw, str) else None
    if language is None:
        if isinstance(language_raw, int) and not isinstance(language_raw, bool) \
                and language_raw in _LANGUAGE_BY_NUMBER:
            language = _LANGUAGE_BY_NUMBER[language_raw]
        else:
            raise RemotingCommandError(f"unknown language {language_raw!r}")
    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise RemotingCommandError(f"JSON header remark is not a string: {remark!r}")
    raw_ext = obj.get("extFields") or {}
    if not isinstance(raw_ext, dict):
        raise RemotingCommandError("JSON header extFields is not an object")
    ext: dict[str, str] = raw_ext
    for v in raw_ext.values():
        if v.__class__ is not str:
            ext = _ext_to_strings(raw_ext)  # only what a Java encoder never writes gets here
            break
    return RemotingCommand(code=_as_int(obj, "code", 0), language=language,
                           version=_as_int(obj, "version", 0), opaque=_as_int(obj, "opaque", 0),
                           flag=_as_int(obj, "flag", 0), remark=remark, ext_fields=ext)


def _ext_to_strings(raw_ext: dict[str, Any]) -> dict[str, str]:
    ext: dict[str, str] = {}
    for k, v in raw_ext.items():
        if v is None:
            continue
        if isinstance(v, bool):
            ext[k] = "true" if v else "false"
        elif isinstance(v, str | int | float):
            ext[k] = str(v)
        else:
            raise RemotingCommandError(f"extFields[{k!r}] is not a scalar")
    return ext


# ---- ROCKETMQ binary header (RocketMQSerializable) ---------------------------------------------

def _binary_header_encode(cmd: RemotingCommand) -> bytes:
    if not -32768 <= cmd.code <= 32767:
        raise RemotingCommandError(f"code {cmd.code} does not fit the ROCKETMQ header's short field")
    if not -32768 <= cmd.version <= 32767:
        raise RemotingCommandError(f"version {cmd.version} does not fit the ROCKETMQ header's short field")
    parts = [_FIXED.pack(cmd.code, int(cmd.language), cmd.version, cmd.opaque, cmd.flag)]
    if cmd.remark:
        remark = cmd.remark.encode("utf-8")
        parts += [_INT32.pack(len(remark)), remark]
    else:
        parts.append(_INT32.pack(0))
    ext_parts: list[bytes] = []
    for k, v in cmd.ext_fields.items():
        if k is None or v is None:
            continue
        kb, vb = str(k).encode("utf-8"), str(v).encode("utf-8")
        if len(kb) > 32767:
            raise RemotingCommandError(f"extFields key too long: {len(kb)} bytes")
        ext_parts += [_INT16.pack(len(kb)), kb, _INT32.pack(len(vb)), vb]
    ext = b"".join(ext_parts)
    parts += [_INT32.pack(len(ext)), ext]
    return b"".join(parts)


class _Reader:
    """Bounds-checked cursor over a binary header, so garbage raises instead of misreading."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RemotingCommandError(
                f"ROCKETMQ header truncated reading {what}: need {n} bytes at {self.pos}, have {len(self.data)}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int16(self, what: str) -> int:
        return _INT16.unpack(self.take(2, what))[0]

    def int32(self, what: str) -> int:
        return _INT32.unpack(self.take(4, what))[0]

    def string(self, length: int, what: str) -> str:
        try:
            return self.take(length, what).decode("utf-8")
        except UnicodeDecodeError:
            raise RemotingCommandError(f"ROCKETMQ header {what} is not valid UTF-8") from None


def _binary_header_decode(header: bytes) -> RemotingCommand:
    r = _Reader(header)
    code, language_byte, version, opaque, flag = _FIXED.unpack(r.take(_FIXED.size, "fixed fields"))
    try:
        language = LanguageCode(language_byte)
    except ValueError:
        raise RemotingCommandError(f"unknown language code {language_byte}") from None
    remark_len = r.int32("remark length")
    if remark_len < 0 or remark_len > len(header):
        raise RemotingCommandError(f"bad remark length {remark_len} (header is {len(header)} bytes)")
    remark = r.string(remark_len, "remark") if remark_len else None
    ext_len = r.int32("extFields length")
    if ext_len < 0 or ext_len > len(header) - r.pos:
        raise RemotingCommandError(f"bad extFields length {ext_len} (header is {len(header)} bytes)")
    ext: dict[str, str] = {}
    end = r.pos + ext_len
    while r.pos < end:
        key_len = r.int16("extFields key length")
        if key_len < 0 or r.pos + key_len > end:
            raise RemotingCommandError(f"bad extFields key length {key_len}")
        key = r.string(key_len, "extFields key")
        val_len = r.int32("extFields value length")
        if val_len < 0 or r.pos + val_len > end:
            raise RemotingCommandError(f"bad extFields value length {val_len}")
        ext[key] = r.string(val_len, "extFields value")
    return RemotingCommand(code=code, language=language, version=version, opaque=opaque, flag=flag,
                           remark=remark, ext_fields=ext)


_py_encode_command = _encode_command

_fast = speedups.load("orbitmq.remoting._speedups_protocol")  # None: the code above runs
if _fast is not None:
    decode_command = _fast.decode_command
    _encode_command = _fast.encode_command
    _json_header_encode = _fast.json_header_encode
