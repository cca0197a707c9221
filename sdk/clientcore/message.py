"""Messages as the SDK's users see them, and their apache.rocketmq.v2 wire form.

``Message`` is what a producer sends; ``ReceivedMessage`` adds what the server filled in (id,
queue, offset, timestamps, delivery attempt, receipt handle). Checks that need no server run
here, before anything is queued or sent, so a bad message fails on its own.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from orbitmq.clientcore.errors import BadRequestError, Code
from orbitmq.common.message_id import create_uniq_id
from orbitmq.common.protowire import varint as _varint
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb

_HOST = os.uname().nodename if hasattr(os, "uname") else "localhost"


def _to_ms(value: float | int | datetime) -> int:
    """Epoch milliseconds of a datetime or of epoch seconds (float/int)."""
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value * 1000)
    raise TypeError(f"delivery_timestamp must be a datetime or epoch seconds, not {type(value).__name__}")


_NORMAL, _FIFO, _DELAY = pb.MessageType.NORMAL, pb.MessageType.FIFO, pb.MessageType.DELAY
_IDENTITY = pb.Encoding.IDENTITY


def _field(tag: bytes, raw: bytes) -> bytes:
    """A length-delimited field: tag, length, bytes."""
    n = len(raw)
    return tag + (bytes((n,)) if n < 128 else _varint(n)) + raw


def _timestamp(ms: int) -> bytes:
    """google.protobuf.Timestamp{seconds, nanos} of epoch milliseconds >= 0."""
    seconds, millis = divmod(ms, 1000)
    out = b"\x08" + _varint(seconds)
    if millis:
        out += b"\x10" + _varint(millis * 1_000_000)
    return out


_HOST_FIELD = _field(b"\x42", _HOST.encode("utf-8"))  # SystemProperties.born_host = 8


@dataclass
class MessageQueue:
    """One queue of a topic on one broker set (what PullConsumer assigns and seeks)."""

    topic: str
    broker: str
    queue_id: int

    def to_proto(self) -> pb.MessageQueue:
        return pb.MessageQueue(topic=pb.Resource(name=self.topic), id=self.queue_id,
                               broker=pb.Broker(name=self.broker))

    @classmethod
    def of(cls, mq: pb.MessageQueue) -> MessageQueue:
        return cls(mq.topic.name, mq.broker.name, mq.id)

    def __hash__(self) -> int:
        return hash((self.topic, self.broker, self.queue_id))


@dataclass
class Message:
    """A message to send. ``message_group`` makes it FIFO, ``delivery_timestamp`` (datetime or epoch
    seconds) makes it a delay message; a message cannot be both."""

    topic: str
    body: bytes | bytearray | memoryview | str
    tag: str | None = None
    keys: list[str] | str | None = None
    properties: Mapping[str, str] | None = None
    message_group: str | None = None
    delivery_timestamp: float | datetime | None = None
    # The message id (UNIQ_KEY) to send instead of a fresh one: an id the caller derives
    # deterministically (the Spark sink's deterministicMessageIds) lets consumers drop resends.
    message_id: str | None = None

    def validate(self, max_body_size: int = 0) -> None:
        """The checks the official clients make before sending (raises BadRequestError / TypeError)."""
        if self.message_id is not None and (not isinstance(self.message_id, str) or not self.message_id.strip()):
            raise BadRequestError(Code.ILLEGAL_MESSAGE_ID, f"message id {self.message_id!r} must be a non-blank str")
        if not isinstance(self.topic, str):
            raise TypeError(f"topic must be a str, not {type(self.topic).__name__}")
        if not self.topic.strip():
            raise BadRequestError(Code.ILLEGAL_TOPIC, "topic cannot be blank")
        if not isinstance(self.body, (bytes, bytearray, memoryview, str)):
            raise TypeError(f"body must be bytes or str, not {type(self.body).__name__}")
        if len(self.body) == 0:
            raise BadRequestError(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
        if max_body_size > 0 and len(self.body_bytes()) > max_body_size:
            raise BadRequestError(Code.MESSAGE_BODY_TOO_LARGE,
                                  f"message body of {len(self.body_bytes())} bytes exceeds the max {max_body_size}")
        if self.tag is not None:
            if not isinstance(self.tag, str):
                raise TypeError(f"tag must be a str, not {type(self.tag).__name__}")
            if not self.tag.strip() or "|" in self.tag:
                raise BadRequestError(Code.ILLEGAL_MESSAGE_TAG, f"tag {self.tag!r} is blank or contains '|'")
        for key in self.key_list():
            if not isinstance(key, str) or not key.strip():
                raise BadRequestError(Code.ILLEGAL_MESSAGE_KEY, f"message key {key!r} must be a non-blank str")
        if self.properties is not None:
            if not isinstance(self.properties, Mapping):
                raise TypeError(f"properties must be a mapping of str to str, not {type(self.properties).__name__}")
            for k, v in self.properties.items():
                if not isinstance(k, str) or not isinstance(v, str):
                    raise TypeError(f"property {k!r}={v!r}: keys and values must be str")
        if self.message_group is not None:
            if not isinstance(self.message_group, str):
                raise TypeError(f"message_group must be a str, not {type(self.message_group).__name__}")
            if not self.message_group.strip():
                raise BadRequestError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be blank")
            if self.delivery_timestamp is not None:
                raise BadRequestError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                                      "a message cannot have both a message group and a delivery timestamp")
        if self.delivery_timestamp is not None:
            _to_ms(self.delivery_timestamp)

    def body_bytes(self) -> bytes:
        body = self.body
        if isinstance(body, str):
            return body.encode("utf-8")
        return bytes(body)

    def key_list(self) -> list[str]:
        if self.keys is None:
            return []
        if isinstance(self.keys, str):
            return [self.keys]
        return list(self.keys)

    @property
    def message_type(self) -> int:
        if self.message_group is not None:
            return pb.MessageType.FIFO
        if self.delivery_timestamp is not None:
            return pb.MessageType.DELAY
        return pb.MessageType.NORMAL

    def encode(self, namespace: str = "") -> tuple[bytes, str, int]:
        """(serialized apache.rocketmq.v2.Message, message id, message type), written directly in
        protobuf wire format: the same message to_proto builds, at a fraction of the cost per send."""
        message_id = self.message_id or create_uniq_id()
        group = self.message_group
        if group is not None:
            message_type = _FIFO
        elif self.delivery_timestamp is not None:
            message_type = _DELAY
        else:
            message_type = _NORMAL
        sysp = []
        if self.tag is not None:
            sysp.append(_field(b"\x0a", self.tag.encode("utf-8")))
        keys = self.keys
        if keys is not None:
            for key in ([keys] if isinstance(keys, str) else keys):
                sysp.append(_field(b"\x12", key.encode("utf-8")))
        sysp += (_field(b"\x1a", message_id.encode("ascii")), b"\x28", bytes((_IDENTITY,)), b"\x30",
                 bytes((message_type,)), _field(b"\x3a", _timestamp(int(time.time() * 1000))), _HOST_FIELD)
        if self.delivery_timestamp is not None:
            sysp.append(_field(b"\x5a", _timestamp(_to_ms(self.delivery_timestamp))))
        if group is not None:
            sysp.append(_field(b"\x8a\x01", group.encode("utf-8")))
        resource = _field(b"\x12", self.topic.encode("utf-8"))
        if namespace:
            resource = _field(b"\x0a", namespace.encode("utf-8")) + resource
        parts = [_field(b"\x0a", resource)]
        if self.properties:
            for k, v in self.properties.items():
                parts.append(_field(b"\x12", _field(b"\x0a", k.encode("utf-8")) + _field(b"\x12", v.encode("utf-8"))))
        parts += (_field(b"\x1a", b"".join(sysp)), _field(b"\x22", self.body_bytes()))
        return b"".join(parts), message_id, message_type

    def to_proto(self, namespace: str = "", message_type: int | None = None) -> pb.Message:
        """The wire message with a fresh message id (RocketMQ's UNIQ_KEY format)."""
        sysp = pb.SystemProperties(message_id=self.message_id or create_uniq_id(), body_encoding=pb.Encoding.IDENTITY,
                                   message_type=self.message_type if message_type is None else message_type,
                                   born_host=_HOST)
        sysp.born_timestamp.FromMilliseconds(int(time.time() * 1000))
        if self.tag is not None:
            sysp.tag = self.tag
        keys = self.key_list()
        if keys:
            sysp.keys.extend(keys)
        if self.message_group is not None:
            sysp.message_group = self.message_group
        if self.delivery_timestamp is not None:
            sysp.delivery_timestamp.FromMilliseconds(_to_ms(self.delivery_timestamp))
        return pb.Message(topic=pb.Resource(name=self.topic, resource_namespace=namespace), body=self.body_bytes(),
                          user_properties=dict(self.properties or {}), system_properties=sysp)


@dataclass
class ReceivedMessage:
    """A delivered message: what was sent plus where it is stored and how it was delivered."""

    topic: str
    body: bytes
    message_id: str
    tag: str | None = None
    keys: list[str] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    message_group: str | None = None
    delivery_timestamp: float | None = None
    born_timestamp: float | None = None
    store_timestamp: float | None = None
    born_host: str = ""
    broker: str = ""
    queue_id: int = -1
    queue_offset: int = -1
    delivery_attempt: int = 0
    receipt_handle: str | None = None
    message_type: int = pb.MessageType.NORMAL

    @property
    def queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker, self.queue_id)

    @classmethod
    def of(cls, m: pb.Message, broker: str = "") -> ReceivedMessage:
        sp = m.system_properties
        return cls(
            topic=m.topic.name, body=m.body, message_id=sp.message_id,
            tag=sp.tag if sp.HasField("tag") else None, keys=list(sp.keys), properties=dict(m.user_properties),
            message_group=sp.message_group if sp.HasField("message_group") else None,
            delivery_timestamp=sp.delivery_timestamp.ToMilliseconds() / 1000 if sp.HasField("delivery_timestamp")
            else None,
            born_timestamp=sp.born_timestamp.ToMilliseconds() / 1000 if sp.HasField("born_timestamp") else None,
            store_timestamp=sp.store_timestamp.ToMilliseconds() / 1000 if sp.HasField("store_timestamp") else None,
            born_host=sp.born_host, broker=broker, queue_id=sp.queue_id,
            queue_offset=sp.queue_offset if sp.HasField("queue_offset") else -1,
            delivery_attempt=sp.delivery_attempt if sp.HasField("delivery_attempt") else 0,
            receipt_handle=sp.receipt_handle if sp.HasField("receipt_handle") else None,
            message_type=sp.message_type)


@dataclass(frozen=True)
class SendReceipt:
    """The server's acknowledgement of one message: its id and queue offset."""

    message_id: str
    offset: int
    transaction_id: str = ""
    recall_handle: str = ""

