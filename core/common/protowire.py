"""Protobuf wire-format pieces for the hand-built messages on hot paths (the proxy's
SendMessageResponse, the SDK's SendMessageRequest): cheaper than building message objects,
and checked against the generated classes by the tests of those paths."""

from __future__ import annotations


def varint(value: int) -> bytes:
    """Base-128 varint of a non-negative int."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
