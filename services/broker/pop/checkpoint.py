"""PopCheckPoint, AckMsg and BatchAckMsg: the JSON bodies POP writes into the revive log.

Field names are RocketMQ's short fastjson names ("so", "pt", "it", "bm", "n", "q", "t", "c",
"ro", "d", "bn", "rp", "ao", "aol"), so a revive log is readable by either implementation.
The long names are accepted on input as upstream's alternateNames are.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from .constants import ACK_TAG, BATCH_ACK_TAG, CK_TAG, SPLIT


class RevivePayloadError(ValueError):
    """A revive-log or batch-ack body that is not what it claims to be."""


def _get(d: dict[str, Any], short: str, long: str, kind: type, default: Any = None) -> Any:
    value = d.get(short, d.get(long, default))
    if value is None:
        if default is None:
            raise RevivePayloadError(f"missing field {short!r}")
        return default
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise RevivePayloadError(f"field {short!r} is not an integer")
        try:
            return int(value)
        except ValueError:
            raise RevivePayloadError(f"field {short!r} is not an integer") from None
    if kind is str:
        return str(value)
    return value


def _loads(body: bytes | str) -> dict[str, Any]:
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise RevivePayloadError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise RevivePayloadError("not a JSON object")
    return obj


# json.dumps with options builds a new encoder per call; one shared encoder writes the same text.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def _dumps(obj: dict[str, Any]) -> bytes:
    return _ENCODER.encode(obj).encode("utf-8")


@dataclass(slots=True)
class PopCheckPoint:
    """One popped batch of one queue: which offsets are out, since when, and until when."""

    start_offset: int
    pop_time: int
    invisible_time: int
    num: int
    queue_id: int
    topic: str
    cid: str
    broker_name: str = ""
    bit_map: int = 0
    revive_offset: int = 0
    queue_offset_diff: list[int] = field(default_factory=list)
    re_put_times: str | None = None

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    def add_diff(self, diff: int) -> None:
        self.queue_offset_diff.append(diff)

    def index_of_ack(self, ack_offset: int) -> int:
        """Index of a message offset in this batch, -1 when not part of it."""
        if ack_offset < self.start_offset:
            return -1
        diff = ack_offset - self.start_offset
        if not self.queue_offset_diff:
            return diff if diff < self.num else -1
        try:
            return self.queue_offset_diff.index(diff)
        except ValueError:
            return -1

    def ack_offset_by_index(self, index: int) -> int:
        if not self.queue_offset_diff:
            return self.start_offset + index
        return self.start_offset + self.queue_offset_diff[index]

    def unique_id(self) -> str:
        return SPLIT.join((self.topic, str(self.queue_id), str(self.start_offset), self.cid, str(self.pop_time),
                           self.broker_name, CK_TAG))

    def to_json(self) -> bytes:
        obj: dict[str, Any] = {"so": self.start_offset, "pt": self.pop_time, "it": self.invisible_time,
                               "bm": self.bit_map, "n": self.num, "q": self.queue_id, "t": self.topic,
                               "c": self.cid, "ro": self.revive_offset, "d": list(self.queue_offset_diff),
                               "bn": self.broker_name}
        if self.re_put_times is not None:
            obj["rp"] = self.re_put_times
        return _dumps(obj)

    @classmethod
    def from_json(cls, body: bytes | str) -> PopCheckPoint:
        d = _loads(body)
        diff = d.get("d", d.get("queueOffsetDiff")) or []
        if not isinstance(diff, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in diff):
            raise RevivePayloadError("field 'd' is not a list of integers")
        ck = cls(start_offset=_get(d, "so", "startOffset", int), pop_time=_get(d, "pt", "popTime", int),
                 invisible_time=_get(d, "it", "invisibleTime", int), num=_get(d, "n", "num", int),
                 queue_id=_get(d, "q", "queueId", int), topic=_get(d, "t", "topic", str),
                 cid=_get(d, "c", "cid", str), broker_name=_get(d, "bn", "brokerName", str, ""),
                 bit_map=_get(d, "bm", "bitMap", int, 0), revive_offset=_get(d, "ro", "reviveOffset", int, 0),
                 queue_offset_diff=list(diff), re_put_times=d.get("rp"))
        if ck.num < 0 or ck.num > 64 or (diff and len(diff) != ck.num):
            raise RevivePayloadError(f"checkpoint num {ck.num} does not match its offsets")
        return ck


@dataclass(slots=True)
class AckMsg:
    """An ack of one message (or, as BatchAckMsg, several) of a checkpoint's batch."""

    ack_offset: int
    start_offset: int
    consumer_group: str
    topic: str
    queue_id: int
    pop_time: int
    broker_name: str = ""

    tag = ACK_TAG

    def offsets(self) -> list[int]:
        return [self.ack_offset]

    def unique_id(self) -> str:
        return SPLIT.join((self.topic, str(self.queue_id), str(self.ack_offset), self.consumer_group,
                           str(self.pop_time), self.broker_name, ACK_TAG))

    def _base(self) -> dict[str, Any]:
        return {"so": self.start_offset, "c": self.consumer_group, "t": self.topic, "q": self.queue_id,
                "pt": self.pop_time, "bn": self.broker_name}

    def to_json(self) -> bytes:
        return _dumps({"ao": self.ack_offset, **self._base()})

    @classmethod
    def from_json(cls, body: bytes | str) -> AckMsg:
        d = _loads(body)
        return cls(ack_offset=_get(d, "ao", "ackOffset", int), **_common(d))


def _common(d: dict[str, Any]) -> dict[str, Any]:
    return {"start_offset": _get(d, "so", "startOffset", int), "consumer_group": _get(d, "c", "consumerGroup", str),
            "topic": _get(d, "t", "topic", str), "queue_id": _get(d, "q", "queueId", int),
            "pop_time": _get(d, "pt", "popTime", int), "broker_name": _get(d, "bn", "brokerName", str, "")}


@dataclass(slots=True)
class BatchAckMsg(AckMsg):
    ack_offset_list: list[int] = field(default_factory=list)

    tag = BATCH_ACK_TAG

    def offsets(self) -> list[int]:
        return list(self.ack_offset_list)

    def unique_id(self) -> str:
        offsets = "[" + ", ".join(map(str, self.ack_offset_list)) + "]"
        return SPLIT.join((self.topic, str(self.queue_id), offsets, self.consumer_group, str(self.pop_time),
                           BATCH_ACK_TAG))

    def to_json(self) -> bytes:
        return _dumps({"aol": list(self.ack_offset_list), "ao": -1, **self._base()})

    @classmethod
    def from_json(cls, body: bytes | str) -> BatchAckMsg:
        d = _loads(body)
        offsets = d.get("aol", d.get("ackOffsetList"))
        if not isinstance(offsets, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in offsets):
            raise RevivePayloadError("field 'aol' is not a list of integers")
        return cls(ack_offset=-1, ack_offset_list=list(offsets), **_common(d))


# ---- BATCH_ACK_MESSAGE request body ----------------------------------------------------------

@dataclass(slots=True)
class BatchAck:
    """One entry of BatchAckMessageRequestBody: the acked offsets of one checkpoint as a bit set."""

    consumer_group: str
    topic: str
    retry: str
    start_offset: int
    queue_id: int
    revive_queue_id: int
    pop_time: int
    invisible_time: int
    bits: list[int]  # indexes set in the BitSet: offset = start_offset + index

    def to_json_dict(self) -> dict[str, Any]:
        return {"c": self.consumer_group, "t": self.topic, "r": self.retry, "so": self.start_offset,
                "q": self.queue_id, "rq": self.revive_queue_id, "pt": self.pop_time, "it": self.invisible_time,
                "b": encode_bitset(self.bits)}


MAX_BITSET_BYTES = 4096


def encode_bitset(indexes: list[int]) -> str:
    """java.util.BitSet.toByteArray (little-endian bits) as fastjson writes a byte[]: base64."""
    if not indexes:
        return ""
    data = bytearray(max(indexes) // 8 + 1)
    for i in indexes:
        data[i // 8] |= 1 << (i % 8)
    return base64.b64encode(bytes(data)).decode("ascii")


def decode_bitset(raw: Any) -> list[int]:
    if raw is None or raw == "":
        return []
    if isinstance(raw, list):  # a JSON array of byte values
        try:
            data = bytes(b & 0xFF for b in raw)
        except TypeError:
            raise RevivePayloadError("bit set array is not bytes") from None
    elif isinstance(raw, str):
        try:
            data = base64.b64decode(raw, validate=True)
        except ValueError:
            raise RevivePayloadError("bit set is not base64") from None
    else:
        raise RevivePayloadError("bit set is neither base64 nor a byte array")
    if len(data) > MAX_BITSET_BYTES:
        raise RevivePayloadError("bit set is too large")
    return [i * 8 + bit for i, byte in enumerate(data) for bit in range(8) if byte & (1 << bit)]


def parse_batch_ack_body(body: bytes | None) -> tuple[str | None, list[BatchAck]]:
    """BatchAckMessageRequestBody: {"brokerName": ..., "acks": [BatchAck...]}."""
    if not body:
        return None, []
    d = _loads(body)
    acks_raw = d.get("acks")
    if acks_raw is None:
        return d.get("brokerName"), []
    if not isinstance(acks_raw, list):
        raise RevivePayloadError("'acks' is not a list")
    acks: list[BatchAck] = []
    for item in acks_raw:
        if not isinstance(item, dict):
            raise RevivePayloadError("an ack entry is not an object")
        acks.append(BatchAck(
            consumer_group=_get(item, "c", "consumerGroup", str), topic=_get(item, "t", "topic", str),
            retry=_get(item, "r", "retry", str, "0"), start_offset=_get(item, "so", "startOffset", int),
            queue_id=_get(item, "q", "queueId", int), revive_queue_id=_get(item, "rq", "reviveQueueId", int),
            pop_time=_get(item, "pt", "popTime", int), invisible_time=_get(item, "it", "invisibleTime", int),
            bits=decode_bitset(item.get("b", item.get("bitSet")))))
    broker_name = d.get("brokerName")
    return (None if broker_name is None else str(broker_name)), acks


def build_batch_ack_body(broker_name: str | None, acks: list[BatchAck]) -> bytes:
    obj: dict[str, Any] = {"acks": [a.to_json_dict() for a in acks]}
    if broker_name is not None:
        obj["brokerName"] = broker_name
    return _dumps(obj)
