"""Raw apache.rocketmq.v2 calls, the way a client without local checks would make them."""

from __future__ import annotations

import uuid

from orbitmq.common.message_id import create_uniq_id
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.pool import Duration

Code = pb.Code


def metadata(client_id: str | None = None) -> list[tuple[str, str]]:
    md = [("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"), ("x-mq-protocol", "v2")]
    if client_id != "":
        md.append(("x-mq-client-id", client_id or f"raw-{uuid.uuid4().hex[:12]}"))
    return md


def duration(ms: int) -> Duration:
    d = Duration()
    d.FromMilliseconds(ms)
    return d


def message(topic: str, body: bytes = b"x", tag: str | None = None, keys: list[str] | None = None,
            props: dict[str, str] | None = None, group: str | None = None, message_id: str | None = None,
            message_type: int = pb.MessageType.NORMAL) -> pb.Message:
    sysp = pb.SystemProperties(message_id=create_uniq_id() if message_id is None else message_id,
                               message_type=message_type, body_encoding=pb.Encoding.IDENTITY)
    if tag is not None:
        sysp.tag = tag
    if keys:
        sysp.keys.extend(keys)
    if group is not None:
        sysp.message_group = group
    return pb.Message(topic=pb.Resource(name=topic), body=body, user_properties=props or {}, system_properties=sysp)


def send(stub, *messages: pb.Message, md=None) -> spb.SendMessageResponse:
    return stub.SendMessage(spb.SendMessageRequest(messages=list(messages)), metadata=md or metadata(), timeout=10)


def receive(stub, topic: str, group: str, batch: int = 32, invisible_ms: int = 30_000, polling_ms: int = 5_000,
            expression: str = "*", filter_type: int = pb.FilterType.TAG, md=None, broker: str = "",
            timeout: float = 15, auto_renew: bool = False,
            ) -> tuple[pb.Status | None, list[pb.Message], list[spb.ReceiveMessageResponse]]:
    """(status, messages, every response) of one ReceiveMessage stream."""
    request = spb.ReceiveMessageRequest(
        group=pb.Resource(name=group),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1, broker=pb.Broker(name=broker)),
        filter_expression=pb.FilterExpression(type=filter_type, expression=expression),
        batch_size=batch, long_polling_timeout=duration(polling_ms), auto_renew=auto_renew)
    if not auto_renew:
        request.invisible_duration.CopyFrom(duration(invisible_ms))
    responses = list(stub.ReceiveMessage(request, metadata=md or metadata(), timeout=timeout))
    status = next((r.status for r in responses if r.HasField("status")), None)
    messages = [r.message for r in responses if r.HasField("message")]
    return status, messages, responses


def ack(stub, topic: str, group: str, *msgs: pb.Message, md=None) -> spb.AckMessageResponse:
    entries = [spb.AckMessageEntry(message_id=m.system_properties.message_id,
                                   receipt_handle=m.system_properties.receipt_handle) for m in msgs]
    return stub.AckMessage(spb.AckMessageRequest(group=pb.Resource(name=group), topic=pb.Resource(name=topic),
                                                 entries=entries), metadata=md or metadata(), timeout=10)


def queue(topic: str, queue_id: int, broker: str = "broker-a") -> pb.MessageQueue:
    return pb.MessageQueue(topic=pb.Resource(name=topic), id=queue_id, broker=pb.Broker(name=broker))


def pull(stub, topic: str, group: str, queue_id: int, offset: int, batch: int = 32, polling_ms: int = 0,
         expression: str = "*") -> tuple[pb.Status, list[pb.Message], int]:
    request = spb.PullMessageRequest(group=pb.Resource(name=group), message_queue=queue(topic, queue_id),
                                     offset=offset, batch_size=batch,
                                     filter_expression=pb.FilterExpression(type=pb.FilterType.TAG,
                                                                           expression=expression),
                                     long_polling_timeout=duration(polling_ms))
    responses = list(stub.PullMessage(request, metadata=metadata(), timeout=30))
    status = next(r.status for r in responses if r.HasField("status"))
    msgs = [r.message for r in responses if r.HasField("message")]
    next_offsets = [r.next_offset for r in responses if r.WhichOneof("content") == "next_offset"]
    return status, msgs, next_offsets[0] if next_offsets else -1


def pull_all(stub, topic: str, group: str, queues: int, expected: int, deadline_s: float = 10.0) -> list[pb.Message]:
    """Every message of every queue from offset 0 (waits until ``expected`` are there)."""
    import time

    end = time.monotonic() + deadline_s
    while True:
        found: list[pb.Message] = []
        for qid in range(queues):
            offset = 0
            while True:
                status, msgs, nxt = pull(stub, topic, group, qid, offset)
                found.extend(msgs)
                if status.code != Code.OK or nxt <= offset:
                    break
                offset = nxt
        if len(found) >= expected or time.monotonic() > end:
            return found
        time.sleep(0.2)
