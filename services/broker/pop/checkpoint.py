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


# Topic, group and broker names repeat in every record: their JSON text is worth keeping.
_QUOTED: dict[str, str] = {}
_QUOTED_MAX = 4096


def _quote(text: str) -> str:
    """_ENCODER.encode(text) for a str (its JSON string literal), cached."""
    quoted = _QUOTED.get(text)
    if quoted is None:
        quoted = _ENCODER.encode(text)
        if len(_QUOTED) >= _QUOTED_MAX:
            _QUOTED.clear()
        _QUOTED[text] = quoted
    return quoted


def _int_list(values: list[int]) -> str:
    return "[" + ",".join(map(str, values)) + "]"


def _all_ints(values: list[Any]) -> bool:
    for v in values:
        if type(v) is not int:
            return False
    return True


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
        # What _json_generic writes, formatted directly when every field has its usual type
        # (json writes an int as str(int) and a list of ints as [a,b] with these separators).
        so, pt, it, bm, n, q = (self.start_offset, self.pop_time, self.invisible_time, self.bit_map, self.num,
                                self.queue_id)
        topic, cid, bn, ro, diff, rp = (self.topic, self.cid, self.broker_name, self.revive_offset,
                                        self.queue_offset_diff, self.re_put_times)
        if (type(so) is int and type(pt) is int and type(it) is int and type(bm) is int and type(n) is int
                and type(q) is int and type(ro) is int and type(topic) is str and type(cid) is str
                and type(bn) is str and type(diff) is list and (rp is None or type(rp) is str)
                and _all_ints(diff)):
            text = (f'{{"so":{so},"pt":{pt},"it":{it},"bm":{bm},"n":{n},"q":{q},"t":{_quote(topic)},'
                    f'"c":{_quote(cid)},"ro":{ro},"d":{_int_list(diff)},"bn":{_quote(bn)}')
            if rp is not None:
                text += f',"rp":{_ENCODER.encode(rp)}'
            return (text + "}").encode("utf-8")
        return self._json_generic()

    def _json_generic(self) -> bytes:
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
        if len(d) == 11 or (len(d) == 12 and "rp" in d):
            # Written by to_json (short names, exact types): what the general path gives, with
            # the checks it would make, without looking every field up under two names.
            try:
                so, pt, it, bm, n, q, t, c, ro, diff, bn = (d["so"], d["pt"], d["it"], d["bm"], d["n"], d["q"],
                                                            d["t"], d["c"], d["ro"], d["d"], d["bn"])
            except KeyError:
                pass
            else:
                if (type(so) is int and type(pt) is int and type(it) is int and type(bm) is int
                        and type(n) is int and type(q) is int and type(t) is str and type(c) is str
                        and type(ro) is int and type(bn) is str and type(diff) is list and _all_ints(diff)
                        and 0 <= n <= 64 and (not diff or len(diff) == n)):
                    return cls(so, pt, it, n, q, t, c, bn, bm, ro, diff, d.get("rp"))
        return cls._from_dict(d)

    @classmethod
    def _from_dict(cls, d: dict[str, Any]) -> PopCheckPoint:
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

    def _base_text(self) -> str | None:
        """The JSON text of _base() without its braces; None when a field has an unusual type."""
        so, c, t, q, pt, bn = (self.start_offset, self.consumer_group, self.topic, self.queue_id, self.pop_time,
                               self.broker_name)
        if (type(so) is int and type(c) is str and type(t) is str and type(q) is int and type(pt) is int
                and type(bn) is str):
            return f'"so":{so},"c":{_quote(c)},"t":{_quote(t)},"q":{q},"pt":{pt},"bn":{_quote(bn)}}}'
        return None

    def to_json(self) -> bytes:
        ao = self.ack_offset
        base = self._base_text()
        if base is not None and type(ao) is int:
            return f'{{"ao":{ao},{base}'.encode()
        return _dumps({"ao": self.ack_offset, **self._base()})

    @classmethod
    def from_json(cls, body: bytes | str) -> AckMsg:
        d = _loads(body)
        if len(d) == 7:
            common = _common_short(d)
            ao = d.get("ao")
            if common is not None and type(ao) is int:
                return cls(ao, *common)
        return cls(ack_offset=_get(d, "ao", "ackOffset", int), **_common(d))


def _common_short(d: dict[str, Any]) -> tuple[int, str, str, int, int, str] | None:
    """_common's values (positionally) when ``d`` has them under the short names with their exact
    types, as to_json writes them; None otherwise (then _common decides)."""
    try:
        so, c, t, q, pt, bn = d["so"], d["c"], d["t"], d["q"], d["pt"], d["bn"]
    except KeyError:
        return None
    if (type(so) is int and type(c) is str and type(t) is str and type(q) is int and type(pt) is int
            and type(bn) is str):
        return so, c, t, q, pt, bn
    return None


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
        offsets = self.ack_offset_list
        base = self._base_text()
        if base is not None and type(offsets) is list and _all_ints(offsets):
            return f'{{"aol":{_int_list(offsets)},"ao":-1,{base}'.encode()
        return _dumps({"aol": list(self.ack_offset_list), "ao": -1, **self._base()})

    @classmethod
    def from_json(cls, body: bytes | str) -> BatchAckMsg:
        d = _loads(body)
        if len(d) == 8 and "ao" in d:
            common = _common_short(d)
            offsets = d.get("aol")
            if common is not None and type(offsets) is list and _all_ints(offsets):
                return cls(-1, *common, offsets)
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
    return [i * 8 + bit for i, byte in enumerate(data) if byte for bit in _BITS[byte]]


# The set bit positions of each byte value, low bit first.
_BITS = tuple(tuple(bit for bit in range(8) if value & (1 << bit)) for value in range(256))


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
        if len(item) == 9:
            fast = _batch_ack_short(item)
            if fast is not None:
                acks.append(fast)
                continue
        acks.append(BatchAck(
            consumer_group=_get(item, "c", "consumerGroup", str), topic=_get(item, "t", "topic", str),
            retry=_get(item, "r", "retry", str, "0"), start_offset=_get(item, "so", "startOffset", int),
            queue_id=_get(item, "q", "queueId", int), revive_queue_id=_get(item, "rq", "reviveQueueId", int),
            pop_time=_get(item, "pt", "popTime", int), invisible_time=_get(item, "it", "invisibleTime", int),
            bits=decode_bitset(item.get("b", item.get("bitSet")))))
    broker_name = d.get("brokerName")
    return (None if broker_name is None else str(broker_name)), acks


def _batch_ack_short(item: dict[str, Any]) -> BatchAck | None:
    """The BatchAck the general parse gives for an entry with exactly the short names and their
    exact types (what clients send); None otherwise, and the general parse decides."""
    try:
        c, t, r, so, q, rq, pt, it, b = (item["c"], item["t"], item["r"], item["so"], item["q"], item["rq"],
                                         item["pt"], item["it"], item["b"])
    except KeyError:
        return None
    if not (type(c) is str and type(t) is str and type(r) is str and type(so) is int and type(q) is int
            and type(rq) is int and type(pt) is int and type(it) is int and type(b) is str):
        return None
    return BatchAck(c, t, r, so, q, rq, pt, it, decode_bitset(b))


def build_batch_ack_body(broker_name: str | None, acks: list[BatchAck]) -> bytes:
    obj: dict[str, Any] = {"acks": [a.to_json_dict() for a in acks]}
    if broker_name is not None:
        obj["brokerName"] = broker_name
    return _dumps(obj)
