"""The body of SEND_BATCH_MESSAGE (MessageDecoder.encodeMessages), written by the client side.

Per message: totalSize int32, magic int32, bodyCRC int32, flag int32, bodyLength int32, body,
propertiesLength int16, properties; all big-endian. Topic and queue travel in the header.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable

from orbitmq.common.message import Message, properties_to_string

_HEAD = struct.Struct(">iiiii")
_SHORT = struct.Struct(">h")


def encode_messages(messages: Iterable[Message]) -> bytes:
    out = bytearray()
    for msg in messages:
        props = properties_to_string(msg.properties).encode("utf-8")
        body = msg.body or b""
        crc = zlib.crc32(body) & 0x7FFFFFFF
        total = _HEAD.size + len(body) + _SHORT.size + len(props)
        out += _HEAD.pack(total, 0, crc, msg.flag, len(body))
        out += body
        out += _SHORT.pack(len(props))
        out += props
    return bytes(out)
