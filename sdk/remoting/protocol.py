"""RemotingCommand: the unit of every Remoting RPC, and its byte-exact frame codec.

Frame (big-endian):  int total length | int (serializeType << 24 | headerLength) | header | body.
The total length counts everything after itself. The header is either RocketMQ's fastjson
rendering of the command (SerializeType.JSON) or RocketMQSerializable's compact binary layout
(SerializeType.ROCKETMQ); a response is written in the serialization its request used.
"""

from __future__ import annotations

import itertools
import json
import struct
import threading
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

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
    """Process-wide request id, wrapping like Java's AtomicInteger so it always fits an int32."""

    def __init__(self) -> None:
        self._counter = itertools.count()
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            n = next(self._counter)
        return ((n + 2**31) % 2**32) - 2**31


_opaque = _OpaqueCounter()


def next_opaque() -> int:
    return _opaque.next()


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
        try:
            if self.serialize_type == SerializeType.JSON:
                return _json_header_encode(self)
            if self.serialize_type == SerializeType.ROCKETMQ:
                return _binary_header_encode(self)
        except (UnicodeEncodeError, ValueError, TypeError, struct.error) as exc:
            raise RemotingCommandError(f"cannot encode command code={self.code}: {exc}") from None
        raise RemotingCommandError(f"unknown serialize type {self.serialize_type!r}")

    def encode(self) -> bytes:
        """The whole frame, including the leading 4-byte total length."""
        header = self.encode_header()
        if len(header) > MAX_HEADER_LENGTH:
            raise RemotingCommandError(f"header too long: {len(header)} bytes")
        body = self.body or b""
        total = 4 + len(header) + len(body)
        if total > _INT32_MAX:
            raise RemotingCommandError(f"frame too long: {total} bytes")
        return b"".join((_INT32.pack(total), _INT32.pack((int(self.serialize_type) << 24) | len(header)),
                         header, body))

    @classmethod
    def decode(cls, frame: bytes | bytearray | memoryview) -> RemotingCommand:
        """Decode a frame WITHOUT its leading total-length field."""
        frame = bytes(frame)
        if len(frame) < 4:
            raise RemotingCommandError(f"frame too short: {len(frame)} bytes")
        (word,) = _INT32.unpack_from(frame, 0)
        header_length = word & HEADER_LENGTH_MASK
        type_byte = (word >> 24) & 0xFF
        if header_length > len(frame) - 4:
            raise RemotingCommandError(
                f"bad header length {header_length}, frame has {len(frame) - 4} bytes after it")
        try:
            serialize_type = SerializeType(type_byte)
        except ValueError:
            raise RemotingCommandError(f"unknown serialize type {type_byte}") from None
        header = frame[4:4 + header_length]
        if serialize_type == SerializeType.JSON:
            cmd = _json_header_decode(header)
        else:
            cmd = _binary_header_decode(header)
        cmd.serialize_type = serialize_type
        cmd.body = frame[4 + header_length:]
        return cmd


# ---- JSON header (fastjson's rendering: alphabetical keys, compact, nulls omitted) -------------

# One encoder for every header: json.dumps with options builds a new encoder per call.
_JSON_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_LANGUAGE_NAMES = {int(m): m.name for m in LanguageCode}
_SERIALIZE_NAMES = {int(m): m.name for m in SerializeType}


def _enum_name(names: dict[int, str], value: Any, what: str) -> str:
    try:
        return names[value]
    except (KeyError, TypeError):
        raise ValueError(f"{value!r} is not a valid {what}") from None


def _json_header_encode(cmd: RemotingCommand) -> bytes:
    obj: dict[str, Any] = {"code": int(cmd.code)}
    if cmd.ext_fields:
        obj["extFields"] = {str(k): str(v) for k, v in cmd.ext_fields.items()}
    obj["flag"] = int(cmd.flag)
    obj["language"] = _enum_name(_LANGUAGE_NAMES, cmd.language, "LanguageCode")
    obj["opaque"] = int(cmd.opaque)
    if cmd.remark is not None:
        obj["remark"] = cmd.remark
    obj["serializeTypeCurrentRPC"] = _enum_name(_SERIALIZE_NAMES, cmd.serialize_type, "SerializeType")
    obj["version"] = int(cmd.version)
    return _JSON_ENCODER.encode(obj).encode("utf-8")


def _as_int(obj: dict[str, Any], key: str, default: int) -> int:
    value = obj.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise RemotingCommandError(f"JSON header field {key!r} is not an int: {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise RemotingCommandError(f"JSON header field {key!r} is not an int: {value!r}") from None
    if not _INT32_MIN <= number <= _INT32_MAX:
        raise RemotingCommandError(f"JSON header field {key!r} out of int range: {number}")
    return number


def _json_header_decode(header: bytes) -> RemotingCommand:
    try:
        obj = json.loads(header.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise RemotingCommandError(f"invalid JSON header: {exc}") from None
    if not isinstance(obj, dict):
        raise RemotingCommandError("invalid JSON header: not an object")
    language_raw = obj.get("language", "JAVA")
    if isinstance(language_raw, str) and language_raw in LanguageCode.__members__:
        language = LanguageCode[language_raw]
    elif isinstance(language_raw, int) and not isinstance(language_raw, bool) and language_raw in set(LanguageCode):
        language = LanguageCode(language_raw)
    else:
        raise RemotingCommandError(f"unknown language {language_raw!r}")
    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise RemotingCommandError(f"JSON header remark is not a string: {remark!r}")
    raw_ext = obj.get("extFields") or {}
    if not isinstance(raw_ext, dict):
        raise RemotingCommandError("JSON header extFields is not an object")
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
    return RemotingCommand(code=_as_int(obj, "code", 0), language=language,
                           version=_as_int(obj, "version", 0), opaque=_as_int(obj, "opaque", 0),
                           flag=_as_int(obj, "flag", 0), remark=remark, ext_fields=ext)


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
