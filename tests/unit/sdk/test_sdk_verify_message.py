"""What SDK clients answer a relayed CONSUME_MESSAGE_DIRECTLY (VerifyMessageCommand): a push
consumer runs its listener (FIFO refuses), every other client NOT_IMPLEMENTED."""

from __future__ import annotations

import asyncio

from orbitmq import AsyncPushConsumer, AsyncSimpleConsumer, ClientConfig, ConsumeResult
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb

Code = pb.Code


def _message(body: bytes) -> pb.Message:
    return pb.Message(topic=pb.Resource(name="T"), body=body,
                      system_properties=pb.SystemProperties(message_id="ID1", body_encoding=pb.Encoding.IDENTITY))


async def test_push_consumer_runs_its_listener() -> None:
    seen: list[bytes] = []

    def listener(message) -> ConsumeResult:
        seen.append(message.body)
        return ConsumeResult.SUCCESS if message.body == b"good" else ConsumeResult.FAILURE

    consumer = AsyncPushConsumer(ClientConfig("127.0.0.1:1"), "G", {"T": "*"}, listener)
    consumer._slots = asyncio.Semaphore(1)  # what start() sets up; no server is needed here
    consumer._is_async = False
    consumer._executor = None
    assert (await consumer.on_verify_message(_message(b"good"))).code == Code.OK
    assert (await consumer.on_verify_message(_message(b"bad"))).code == Code.FAILED_TO_CONSUME_MESSAGE
    assert seen == [b"good", b"bad"]
    consumer.fifo = True
    assert (await consumer.on_verify_message(_message(b"good"))).code == Code.VERIFY_FIFO_MESSAGE_UNSUPPORTED
    assert seen == [b"good", b"bad"]


async def test_other_clients_do_not_implement_it() -> None:
    consumer = AsyncSimpleConsumer(ClientConfig("127.0.0.1:1"), "G", {"T": "*"})
    assert (await consumer.on_verify_message(_message(b"x"))).code == Code.NOT_IMPLEMENTED
