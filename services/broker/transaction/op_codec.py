"""Op-message bodies of RMQ_SYS_TRANS_OP_HALF_TOPIC.

Before RocketMQ 5.1 an op body is one decimal half-queue offset ("1234"); since 5.1 (RIP-50)
it is offsets each followed by a comma ("12,13,17,"). Both are read the way upstream's
``fillOpRemoveMap`` reads them: split on commas, empty pieces dropped, an unparsable piece
becomes -1. OrbitMQ writes the 5.1+ form only.
"""

from __future__ import annotations

import re

# What Java's Long.parseLong accepts (no blanks), within a long's range.
_LONG = re.compile(r"[+-]?[0-9]+")
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1

# Tag of every op message; ops with any other tag are ignored.
REMOVE_TAG = "d"
OP_SEPARATOR = ","


def encode_op_body(half_offsets: list[int]) -> bytes:
    """5.1+ batched body: ``"<offset>,"`` per finished half message."""
    return "".join(f"{offset}{OP_SEPARATOR}" for offset in half_offsets).encode("utf-8")


def decode_op_body(body: bytes | str) -> list[int]:
    """Half-queue offsets an op body names, in either form; -1 for an unparsable piece."""
    text = body.decode("utf-8", errors="replace") if isinstance(body, (bytes, bytearray, memoryview)) else body
    offsets: list[int] = []
    for piece in text.split(OP_SEPARATOR):
        if not piece:
            continue
        value = int(piece, 10) if _LONG.fullmatch(piece) else -1
        offsets.append(value if _LONG_MIN <= value <= _LONG_MAX else -1)
    return offsets
