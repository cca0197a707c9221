"""Decoding of a SEND_BATCH_MESSAGE body (MessageDecoder.encodeMessages' layout).

Each message in the body is: totalSize int32, magic int32, bodyCRC int32, flag int32,
bodyLength int32, body, propertiesLength int16, properties (name\\x01value\\x02…), all
big-endian. Topic and queue come from the request header, so they are not repeated here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_HEAD = struct.Struct(">iiiii")
_SHORT = struct.Struct(">h")


class BatchDecodeError(ValueError):
    pass


@dataclass(slots=True)
class BatchItem:
    flag: int
    body: bytes
    properties: str


def decode_batch(data: bytes) -> list[BatchItem]:
    items: list[BatchItem] = []
    view = memoryview(data)
    pos = 0
    while pos < len(view):
        if len(view) - pos < _HEAD.size:
            raise BatchDecodeError(f"truncated batch message header at byte {pos}")
        total, _magic, _crc, flag, body_len = _HEAD.unpack_from(view, pos)
        if total < _HEAD.size + _SHORT.size or pos + total > len(view):
            raise BatchDecodeError(f"bad batch message size {total} at byte {pos}")
        cursor = pos + _HEAD.size
        if body_len < 0 or cursor + body_len + _SHORT.size > pos + total:
            raise BatchDecodeError(f"bad batch message body length {body_len} at byte {pos}")
        body = bytes(view[cursor:cursor + body_len])
        cursor += body_len
        (props_len,) = _SHORT.unpack_from(view, cursor)
        cursor += _SHORT.size
        if props_len < 0 or cursor + props_len != pos + total:
            raise BatchDecodeError(f"bad batch message properties length {props_len} at byte {pos}")
        try:
            properties = bytes(view[cursor:cursor + props_len]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BatchDecodeError(f"batch message properties are not UTF-8: {exc}") from None
        items.append(BatchItem(flag, body, properties))
        pos += total
    if not items:
        raise BatchDecodeError("batch body holds no message")
    return items


def encode_batch(items: list[BatchItem]) -> bytes:
    """The client side of the layout; used by tests and the SDK's batch send."""
    out = bytearray()
    for item in items:
        props = item.properties.encode("utf-8")
        total = _HEAD.size + len(item.body) + _SHORT.size + len(props)
        out += _HEAD.pack(total, 0, 0, item.flag, len(item.body))
        out += item.body
        out += _SHORT.pack(len(props))
        out += props
    return bytes(out)
