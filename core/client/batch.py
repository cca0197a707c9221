"""The body of SEND_BATCH_MESSAGE (MessageDecoder.encodeMessages), written by the client side.

Per message: totalSize int32, magic int32, bodyCRC int32, flag int32, bodyLength int32, body,
propertiesLength int16, properties; all big-endian. Topic and queue travel in the header.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence

from orbitmq.common import speedups
from orbitmq.common.message import Message, properties_to_string

_HEAD = struct.Struct(">iiiii")
_SHORT = struct.Struct(">h")
_FIXED = _HEAD.size + _SHORT.size


def encode_messages(messages: Iterable[Message]) -> bytes:
    parts: list[bytes] = []
    crc32 = zlib.crc32
    for msg in messages:
        props = properties_to_string(msg.properties).encode("utf-8")
        body = msg.body or b""
        parts += (_HEAD.pack(_FIXED + len(body) + len(props), 0, crc32(body) & 0x7FFFFFFF, msg.flag, len(body)),
                  body, _SHORT.pack(len(props)), props)
    # One join copies each body once (a growing bytearray plus bytes() copied it twice).
    return b"".join(parts)


# Compiled twin: _speedups_batch.encode_batch (same bytes).
def encode_batch(bodies: Sequence[bytes], properties: Sequence[str]) -> bytes:
    """encode_messages for flag-0 messages whose properties are already encoded as strings.

    The proxy's send path: it builds each properties string straight from the gRPC message, so
    neither a Message nor a properties dict exists; the bytes are encode_messages' own.
    """
    parts: list[bytes] = []
    head = _HEAD.pack
    short = _SHORT.pack
    crc32 = zlib.crc32
    for body, text in zip(bodies, properties, strict=True):
        props = text.encode("utf-8")
        size = len(body)
        parts += (head(_FIXED + size + len(props), 0, crc32(body) & 0x7FFFFFFF, 0, size), body,
                  short(len(props)), props)
    return b"".join(parts)


_py_encode_batch = encode_batch

_fast = speedups.load("orbitmq.client._speedups_batch")  # None: the code above runs
if _fast is not None:
    encode_batch = _fast.encode_batch
