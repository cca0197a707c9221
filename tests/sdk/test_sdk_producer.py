"""The SDK producer against `orbitmq local` and two proxies: single, many, async sends, batching
with per-message receipts and errors, FIFO order, delay, keys/tags/properties."""

from __future__ import annotations

import asyncio
import time

import pytest

from orbitmq import (
    AsyncProducer,
    AsyncSimpleConsumer,
    BadRequestError,
    ClientConfig,
    Message,
    Producer,
    ReceivedMessage,
    SendReceipt,
)
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from tests.interop.harness import unique
from tests.sdk.conftest import SdkEnv

Code = pb.Code


async def receive_all(config: ClientConfig, group: str, topic: str, expected: int, deadline_s: float = 20.0,
                      ack: bool = True) -> list[ReceivedMessage]:
    got: list[ReceivedMessage] = []
    async with AsyncSimpleConsumer(config, group, {topic: "*"}, long_polling_timeout=1) as consumer:
        end = time.monotonic() + deadline_s
        while len(got) < expected and time.monotonic() < end:
            batch = await consumer.receive(32, 20)
            got += batch
            if ack and batch:
                await consumer.ack_many(batch)
    return got


async def test_batching_sends_one_request_with_a_receipt_per_message(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("SdkBatch"), queues=1)
    group = env.cluster.create_group(unique("SdkBatchG"))
    config = ClientConfig(env.endpoints)
    async with AsyncProducer(config, [topic], linger=0.2, max_batch_messages=100) as producer:
        receipts = await asyncio.gather(*(producer.send(Message(topic, f"m{i}".encode(), keys=[f"k{i}"]))
                                          for i in range(50)))
        assert producer.requests_sent == 1 and producer.messages_sent == 50
    assert all(isinstance(r, SendReceipt) for r in receipts)
    assert len({r.message_id for r in receipts}) == 50
    # One SEND_BATCH on one queue: consecutive offsets in the callers' order.
    assert [r.offset for r in receipts] == list(range(receipts[0].offset, receipts[0].offset + 50))
    got = await receive_all(config, group, topic, 50)
    assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(50))
    by_id = {m.message_id: m for m in got}
    assert [by_id[r.message_id].keys for r in receipts] == [[f"k{i}"] for i in range(50)]


async def test_batch_limits_split_requests(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("SdkBatchLim"), queues=2)
    async with AsyncProducer(ClientConfig(env.endpoints), [topic], linger=5, max_batch_messages=10,
                             max_batch_bytes=64 * 1024) as producer:
        started = time.monotonic()
        await producer.send_many([Message(topic, b"x" * 100) for _ in range(30)])
        assert producer.requests_sent == 3  # full at 10 messages, long before the 5 s linger
        assert time.monotonic() - started < 4
        before = producer.requests_sent
        await producer.send_many([Message(topic, b"y" * 20_000) for _ in range(6)])
        assert producer.requests_sent - before == 2  # 3 x ~20 KB fit in 64 KiB, a 4th does not


async def test_one_bad_message_in_a_batch_fails_alone(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("SdkBatchBad"), queues=1)
    group = env.cluster.create_group(unique("SdkBatchBadG"))
    config = ClientConfig(env.endpoints)
    async with AsyncProducer(config, [topic], linger=0.2) as producer:
        results = await producer.send_many([
            Message(topic, b"good-1"),
            Message(topic, b"bad", properties={"TAGS": "reserved by the system"}),
            Message(topic, b"good-2")], return_exceptions=True)
    assert isinstance(results[0], SendReceipt) and isinstance(results[2], SendReceipt)
    assert isinstance(results[1], BadRequestError)
    assert results[1].code == Code.ILLEGAL_MESSAGE_PROPERTY_KEY and "TAGS" in results[1].message
    got = await receive_all(config, group, topic, 2)
    assert sorted(m.body for m in got) == [b"good-1", b"good-2"]
    assert {m.message_id for m in got} == {results[0].message_id, results[2].message_id}


async def test_local_checks_fail_only_the_caller(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("SdkLocalChk"), queues=1)
    async with AsyncProducer(ClientConfig(env.endpoints), [topic]) as producer:
        results = await producer.send_many([Message(topic, b"ok"), Message(topic, b""), Message(topic, b"ok", tag="a|b"),
                                            Message(topic, 42)], return_exceptions=True)  # type: ignore[arg-type]
        assert isinstance(results[0], SendReceipt)
        assert isinstance(results[1], BadRequestError) and results[1].code == Code.MESSAGE_BODY_EMPTY
        assert isinstance(results[2], BadRequestError) and results[2].code == Code.ILLEGAL_MESSAGE_TAG
        assert isinstance(results[3], TypeError) and "body must be bytes" in str(results[3])
        with pytest.raises(BadRequestError) as info:
            await producer.send(Message(topic, b"x" * (producer.max_body_size + 1)))
        assert info.value.code == Code.MESSAGE_BODY_TOO_LARGE


def test_sync_producer_send_many_and_async(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("SdkSync"), queues=2)
    group = env.cluster.create_group(unique("SdkSyncG"))
    config = ClientConfig(env.endpoints)
    with Producer(config, [topic], linger=0.05) as producer:
        one = producer.send(Message(topic, "text body", tag="T", keys="single-key", properties={"p": "1"}))
        many = producer.send_many([Message(topic, f"many-{i}".encode()) for i in range(10)])
        futures = [producer.send_async(Message(topic, f"async-{i}".encode())) for i in range(10)]
        asyncs = [f.result(10) for f in futures]
    ids = {one.message_id} | {r.message_id for r in many} | {r.message_id for r in asyncs}
    assert len(ids) == 21
    got = asyncio.run(receive_all(config, group, topic, 21))
    assert {m.message_id for m in got} == ids
    first = next(m for m in got if m.message_id == one.message_id)
    assert (first.body, first.tag, first.keys, first.properties) == (b"text body", "T", ["single-key"], {"p": "1"})
    assert first.born_timestamp and first.store_timestamp and first.queue_offset >= 0


async def test_fifo_batches_keep_each_group_in_order(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("SdkFifo"), queues=4, message_type="FIFO")
    group = env.cluster.create_group(unique("SdkFifoG"), orderly=True)
    config = ClientConfig(env.endpoints)
    groups = [f"order-{g}" for g in range(4)]
    async with AsyncProducer(config, [topic], linger=0.01, max_batch_messages=8) as producer:
        futures = [producer.send_nowait(Message(topic, f"{g}:{i}".encode(), message_group=g))
                   for i in range(40) for g in groups]
        receipts = await asyncio.gather(*futures)
        assert producer.requests_sent < len(futures)  # batched
    assert len(receipts) == 160
    got = await receive_all(config, group, topic, 160, deadline_s=40)
    for g in groups:
        mine = [m for m in got if m.message_group == g]
        # One queue per group, stored in send order: offsets and bodies both ascending.
        assert len({m.queue_id for m in mine}) == 1
        assert [m.body for m in sorted(mine, key=lambda m: m.queue_offset)] == [f"{g}:{i}".encode() for i in range(40)]


async def test_delay_message_arrives_after_its_delivery_timestamp(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("SdkDelay"), queues=1, message_type="DELAY")
    group = env.cluster.create_group(unique("SdkDelayG"))
    config = ClientConfig(env.endpoints)
    deliver_at = time.time() + 3
    async with AsyncProducer(config, [topic]) as producer:
        await producer.send(Message(topic, b"later", delivery_timestamp=deliver_at))
    got = await receive_all(config, group, topic, 1, deadline_s=20)
    assert [m.body for m in got] == [b"later"]
    assert time.time() >= deliver_at - 0.5  # not delivered before its time (timer precision aside)
