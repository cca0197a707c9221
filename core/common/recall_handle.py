"""The recall handle (RocketMQ's RecallMessageHandle, version 1).

A send of a timer message answers ``recallHandle`` = base64url, with padding, of
``"v1 <realTopic> <brokerName> <timestampMs> <UNIQ_KEY>"`` (single spaces), where timestampMs is
the slot time TIMER_OUT_MS + 1. The broker that stored the message and the proxy both decode it:
the proxy to find the broker, the broker to write the delete marker. Decoding follows Java's
``Base64.getUrlDecoder()`` (URL-safe alphabet only, padding optional) and ``String.split(" ")``
(trailing empty tokens dropped); the timestamp is kept as text, as upstream, and read by the
broker's own check.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

VERSION_1 = "v1"
SEPARATOR = " "
# A handle is a few topic/broker names long; anything far larger is not one (and is not decoded).
MAX_HANDLE_LENGTH = 4096
_URL_SAFE = re.compile(r"[A-Za-z0-9_-]*={0,2}")


class RecallHandleError(ValueError):
    """The text is not a recall handle (upstream's DecoderException, "recall handle is invalid")."""

    def __init__(self, message: str = "recall handle is invalid") -> None:
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class RecallHandle:
    topic: str
    broker_name: str
    timestamp: str  # text as issued; a non-number fails the broker's timestamp check
    message_id: str

    @property
    def timestamp_ms(self) -> int:
        """NumberUtils.toLong(timestamp, -1): -1 when it is not a Java long."""
        text = self.timestamp
        body = text[1:] if text[:1] in "+-" else text
        if not body or not body.isascii() or not body.isdigit():
            return -1
        value = int(text)
        return value if -(2**63) <= value < 2**63 else -1


def encode_recall_handle(topic: str, broker_name: str, timestamp_ms: int | str, message_id: str) -> str:
    """HandleV1.buildHandle: no checks of the parts, as upstream."""
    raw = SEPARATOR.join((VERSION_1, topic, broker_name, str(timestamp_ms), message_id))
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii")


def decode_recall_handle(text: str | None) -> RecallHandle:
    """RecallMessageHandle.decodeHandle; RecallHandleError when ``text`` is not a v1 handle."""
    if not text:
        raise RecallHandleError()
    if len(text) > MAX_HANDLE_LENGTH or not _URL_SAFE.fullmatch(text):
        raise RecallHandleError()
    data = text.rstrip("=")
    if len(data) % 4 == 1 or (len(text) - len(data) and len(text) % 4):
        raise RecallHandleError()  # no base64 length, or padding that does not complete a quantum
    try:
        raw = base64.b64decode(data + "=" * (-len(data) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise RecallHandleError() from None
    items = raw.decode("utf-8", errors="replace").split(SEPARATOR)
    while items and not items[-1]:
        items.pop()  # Java's split drops trailing empty strings
    if len(items) < 5 or items[0] != VERSION_1:
        raise RecallHandleError()
    return RecallHandle(items[1], items[2], items[3], items[4])


def delete_key(topic: str, message_id: str) -> str:
    """TIMER_DEL_UNIQKEY of the marker: what the timer wheel compares with REAL_TOPIC+UNIQ_KEY."""
    return f"{topic}+{message_id}"
