"""The SDK and the official Python client read each other's messages; SDK transactions: commit,
rollback and a checker answering the server's check-back."""

from __future__ import annotations

import asyncio
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression
from rocketmq import Message as OfficialMessage
from rocketmq import Producer as OfficialProducer
from rocketmq import SimpleConsumer as OfficialSimpleConsumer

from orbitmq import (
    AsyncProducer,
    AsyncSimpleConsumer,
    ClientConfig,
    Message,
    Producer,
    ReceivedMessage,
    TransactionResolution,
)
from tests.interop.harness import unique
from tests.sdk.conftest import SdkEnv


def test_official_client_reads_what_the_sdk_wrote(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("SdkToOfficial"), queues=2)
    group = env.cluster.create_group(unique("SdkToOfficialG"))
    config = ClientConfig(env.endpoints)
    with Producer(config, [topic], linger=0.05) as producer:
        sent = producer.send_many([Message(topic, f"sdk-{i}".encode(), tag=f"T{i % 2}", keys=[f"key-{i}"],
                                           properties={"index": str(i)}) for i in range(20)])
    consumer = OfficialSimpleConsumer(ClientConfiguration(env.cluster.proxies[-1], Credentials(), request_timeout=10),
                                      group, {topic: FilterExpression()}, await_duration=3)
    consumer.startup()
    got = {}
    try:
        end = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < end:
            for m in consumer.receive(32, 20):
                got[m.message_id] = m
                consumer.ack(m)
    finally:
        consumer.shutdown()
    assert set(got) == {r.message_id for r in sent}
    for i, receipt in enumerate(sent):
        m = got[receipt.message_id]
        assert (m.body, m.tag, list(m.keys), m.properties["index"]) == (f"sdk-{i}".encode(), f"T{i % 2}",
                                                                        [f"key-{i}"], str(i))


def test_sdk_reads_what_the_official_client_wrote(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("OfficialToSdk"), queues=2)
    group = env.cluster.create_group(unique("OfficialToSdkG"))
    producer = OfficialProducer(ClientConfiguration(env.cluster.proxy, Credentials(), request_timeout=10), (topic,))
    producer.startup()
    sent = {}
    try:
        for i in range(10):
            m = OfficialMessage()
            m.topic = topic
            m.body = f"official-{i}".encode()
            m.tag = "OT"
            m.keys = f"ok-{i}"
            m.add_property("n", str(i))
            sent[producer.send(m).message_id] = i
    finally:
        producer.shutdown()

    async def read() -> list[ReceivedMessage]:
        got: list[ReceivedMessage] = []
        async with AsyncSimpleConsumer(ClientConfig(env.endpoints), group, {topic: "OT"},
                                       long_polling_timeout=1) as consumer:
            end = time.monotonic() + 20
            while len(got) < 10 and time.monotonic() < end:
                batch = await consumer.receive(16, 20)
                got += batch
                if batch:
                    await consumer.ack_many(batch)
        return got

    got = asyncio.run(read())
    assert {m.message_id for m in got} == set(sent)
    for m in got:
        i = sent[m.message_id]
        assert (m.body, m.tag, m.keys, m.properties) == (f"official-{i}".encode(), "OT", [f"ok-{i}"], {"n": str(i)})


async def receive_bodies(config: ClientConfig, group: str, topic: str, expected: int, deadline_s: float) -> list[bytes]:
    got: list[bytes] = []
    async with AsyncSimpleConsumer(config, group, {topic: "*"}, long_polling_timeout=1) as consumer:
        end = time.monotonic() + deadline_s
        while len(got) < expected and time.monotonic() < end:
            batch = await consumer.receive(16, 20)
            got += [m.body for m in batch]
            if batch:
                await consumer.ack_many(batch)
    return got


async def test_transactions_commit_rollback_and_check_back(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("SdkTx"), queues=2, message_type="TRANSACTION")
    group = env.cluster.create_group(unique("SdkTxG"))
    config = ClientConfig(env.endpoints)
    checked: list[ReceivedMessage] = []

    def checker(message: ReceivedMessage) -> TransactionResolution:
        checked.append(message)
        return TransactionResolution.COMMIT if message.body == b"orphan-commit" else TransactionResolution.ROLLBACK

    async with AsyncProducer(config, [topic], transaction_checker=checker) as producer:
        committed = producer.begin_transaction()
        receipt = await committed.send(Message(topic, b"committed", keys=["tx-1"]))
        assert receipt.transaction_id
        await committed.commit()
        rolled_back = producer.begin_transaction()
        await rolled_back.send(Message(topic, b"rolled-back"))
        await rolled_back.rollback()
        # Left unresolved: the server checks back through Telemetry and the checker decides.
        orphan_commit = producer.begin_transaction()
        await orphan_commit.send(Message(topic, b"orphan-commit"))
        orphan_rollback = producer.begin_transaction()
        await orphan_rollback.send(Message(topic, b"orphan-rollback"))
        end = time.monotonic() + 30
        for _ in range(150):
            if {m.body for m in checked} == {b"orphan-commit", b"orphan-rollback"} or time.monotonic() > end:
                break
            await asyncio.sleep(0.2)
        got = await receive_bodies(config, group, topic, 2, 20)
    assert {m.body for m in checked} == {b"orphan-commit", b"orphan-rollback"}
    assert sorted(got) == [b"committed", b"orphan-commit"]


def test_sync_transaction_commit(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("SdkTxSync"), queues=1, message_type="TRANSACTION")
    group = env.cluster.create_group(unique("SdkTxSyncG"))
    config = ClientConfig(env.endpoints)
    with Producer(config, [topic], transaction_checker=lambda m: TransactionResolution.ROLLBACK) as producer:
        tx = producer.begin_transaction()
        receipt = tx.send(Message(topic, b"sync-tx"))
        tx.commit()
    assert receipt.transaction_id
    assert asyncio.run(receive_bodies(config, group, topic, 1, 15)) == [b"sync-tx"]
