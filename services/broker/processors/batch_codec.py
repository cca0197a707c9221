"""Decoding of a SEND_BATCH_MESSAGE body (MessageDecoder.encodeMessages' layout).

Each message in the body is: totalSize int32, magic int32, bodyCRC int32, flag int32,
bodyLength int32, body, propertiesLength int16, properties (name\\x01value\\x02…), all
big-endian. Topic and queue come from the request header, so they are not repeated here.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from orbitmq.common import speedups

_HEAD = struct.Struct(">iiiii")
_SHORT = struct.Struct(">h")


class BatchDecodeError(ValueError):
    pass


class BatchItem(NamedTuple):
    flag: int
    body: bytes
    properties: str


# Compiled twin: _speedups_batch.decode_batch (same tuples, same errors).
def decode_batch(data: bytes) -> list[tuple[int, bytes, str]]:
    """The (flag, body, properties) of each message, as plain tuples (equal to the BatchItems
    they were encoded from): the broker only unpacks them, and a tuple is the cheapest to build."""
    # Slices of the bytes object itself: one copy per body, no memoryview round trips.
    if not isinstance(data, bytes):
        data = bytes(data)
    # A well-formed body with all bounds checked at once per message; anything wrong is
    # decoded again by _decode_checked, which names the first problem as it always did.
    items: list[tuple[int, bytes, str]] = []
    append = items.append
    unpack_head = _HEAD.unpack_from
    unpack_short = _SHORT.unpack_from
    size = len(data)
    pos = 0
    try:
        while pos < size:
            total, _magic, _crc, flag, body_len = unpack_head(data, pos)
            end = pos + total
            cursor = pos + 20 + body_len  # _HEAD.size
            if (total < 22 or end > size or body_len < 0 or cursor + 2 > end
                    or unpack_short(data, cursor)[0] != end - cursor - 2):
                return _decode_checked(data)
            append((flag, data[pos + 20:cursor], data[cursor + 2:end].decode("utf-8")))
            pos = end
    except (struct.error, UnicodeDecodeError):
        return _decode_checked(data)
    if not items:
        raise BatchDecodeError("batch body holds no message")
    return items


_py_decode_batch = decode_batch


def _decode_checked(data: bytes) -> list[tuple[int, bytes, str]]:
    """decode_batch checking one field at a time: the precise error for a malformed body."""
    items: list[tuple[int, bytes, str]] = []
    append = items.append
    unpack_head = _HEAD.unpack_from
    unpack_short = _SHORT.unpack_from
    head_size = _HEAD.size
    size = len(data)
    pos = 0
    while pos < size:
        if size - pos < head_size:
            raise BatchDecodeError(f"truncated batch message header at byte {pos}")
        total, _magic, _crc, flag, body_len = unpack_head(data, pos)
        end = pos + total
        if total < head_size + 2 or end > size:
            raise BatchDecodeError(f"bad batch message size {total} at byte {pos}")
        cursor = pos + head_size
        if body_len < 0 or cursor + body_len + 2 > end:
            raise BatchDecodeError(f"bad batch message body length {body_len} at byte {pos}")
        body = data[cursor:cursor + body_len]
        cursor += body_len
        (props_len,) = unpack_short(data, cursor)
        cursor += 2
        if props_len < 0 or cursor + props_len != end:
            raise BatchDecodeError(f"bad batch message properties length {props_len} at byte {pos}")
        try:
            properties = data[cursor:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BatchDecodeError(f"batch message properties are not UTF-8: {exc}") from None
        append((flag, body, properties))
        pos = end
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


_fast = speedups.load("orbitmq.broker.processors._speedups_batch")  # None: the code above runs
if _fast is not None:
    decode_batch = _fast.decode_batch
