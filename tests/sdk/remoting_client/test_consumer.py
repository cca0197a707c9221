"""The push consumer against a NameServer and two broker groups (real processes).

One cluster for the module (``remoting_cluster``); short rebalance and persist intervals in the
client config keep each test within seconds.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from orbitmq.client.api import MessageQueueRef
from orbitmq.client.errors import MQClientError
from orbitmq.common.message import Message, MessageExt
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.consumer import (
    AsyncDefaultLitePullConsumer,
    AsyncDefaultMQPushConsumer,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    DefaultLitePullConsumer,
    push_consumer,
)
from orbitmq.remoting_client.consumer.hooks import CONSUME_CONTEXT_TYPE, ConsumeMessageContext
from orbitmq.remoting_client.consumer.offset_store import decode_offset_table
from orbitmq.remoting_client.producer.producer import AsyncDefaultMQProducer
from tests.sdk.remoting_client.cluster import RemotingCluster, unique


def client_config(cluster: RemotingCluster, **keys: object) -> RemotingClientConfig:
    return RemotingClientConfig(namesrv_addr=cluster.namesrv, client_ip="127.0.0.1", rebalance_interval=1.0,
                                persist_consumer_offset_interval=1.0, heartbeat_broker_interval=2.0, **keys)


async def send(cluster: RemotingCluster, topic: str, bodies: list[bytes], tags: Callable[[int], str] | None = None,
               props: Callable[[int], dict[str, str]] | None = None,
               queue: Callable[[int], MessageQueueRef] | None = None) -> list[str]:
    """Send with rproducer's producer: tags, user properties and a target queue per index."""
    producer = AsyncDefaultMQProducer(unique("PG"), client_config(cluster))
    await producer.start()
    ids = []
    try:
        for i, body in enumerate(bodies):
            msg = Message(topic, body)
            if tags:
                msg.tags = tags(i)
            for k, v in (props(i) if props else {}).items():
                msg.put_user_property(k, v)
            if queue is not None:
                ids.append((await producer.send_to_queue(msg, queue(i))).msg_id)
            else:
                ids.append((await producer.send(msg)).msg_id)
    finally:
        await producer.shutdown()
    return ids


async def wait_for(predicate: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def test_concurrent_push_consumer_receives_everything(remoting_cluster: RemotingCluster) -> None:
    topic = remoting_cluster.create_topic(unique("PushAll"))
    group = remoting_cluster.create_group(unique("CG"))
    got: dict[bytes, int] = {}

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            got[m.body] = got.get(m.body, 0) + 1
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = AsyncDefaultMQPushConsumer(group, client_config(remoting_cluster),
                                          consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                                          consume_message_batch_max_size=4)
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    bodies = [f"m{i}".encode() for i in range(200)]
    await send(remoting_cluster, topic, bodies[:100])
    await consumer.start()
    try:
        await send(remoting_cluster, topic, bodies[100:])
        await wait_for(lambda: len(got) == 200, what="200 messages")
        assert set(got) == set(bodies)
        assert sum(mq.topic == topic for mq in consumer.rebalance.process_queue_table) == 8  # 4 on each broker
        assert consumer.rebalance.subscription_inner.keys() == {topic, "%RETRY%" + group}
    finally:
        await consumer.shutdown()


async def test_compressed_bodies_arrive_inflated(remoting_cluster: RemotingCluster) -> None:
    """A body the producer compressed (4 KiB and more, COMPRESSED_FLAG | ZLIB type) reaches the push
    and the lite pull consumer's listener inflated, the flag cleared (MessageDecoder#decode)."""
    topic = remoting_cluster.create_topic(unique("Inflate"), queues=1, brokers=["broker-a"])
    group = remoting_cluster.create_group(unique("CG"))
    bodies = [b"small", bytes(range(256)) * 40]  # the second is compressed by the producer
    await send(remoting_cluster, topic, bodies)
    got: list[MessageExt] = []

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        got.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    push = AsyncDefaultMQPushConsumer(group, client_config(remoting_cluster),
                                      consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    push.subscribe(topic)
    push.register_message_listener(listener)
    await push.start()
    try:
        await wait_for(lambda: len(got) == 2, what="both messages")
    finally:
        await push.shutdown()
    lite = AsyncDefaultLitePullConsumer(remoting_cluster.create_group(unique("CG")), client_config(remoting_cluster),
                                        consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    lite.assign([MessageQueueRef(topic, "broker-a", 0)])
    await lite.start()
    try:
        polled = await _poll_until(lite, 2)
    finally:
        await lite.shutdown()
    for msgs in (got, polled):
        assert sorted(m.body for m in msgs) == sorted(bodies)
        assert not any(m.sys_flag & 1 for m in msgs)  # COMPRESSED_FLAG cleared


def _counting_listener(got: dict[bytes, int], status: ConsumeConcurrentlyStatus = ConsumeConcurrentlyStatus.CONSUME_SUCCESS):
    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            got[m.body] = got.get(m.body, 0) + 1
        return status
    return listener


async def test_two_instances_share_queues_and_take_over(remoting_cluster: RemotingCluster) -> None:
    topic = remoting_cluster.create_topic(unique("Share"))
    group = remoting_cluster.create_group(unique("CG"))
    got_a: dict[bytes, int] = {}
    got_b: dict[bytes, int] = {}
    consumers = []
    for got in (got_a, got_b):
        c = AsyncDefaultMQPushConsumer(group, client_config(remoting_cluster),
                                       consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        c.subscribe(topic)
        c.register_message_listener(_counting_listener(got))
        consumers.append(c)
    a, b = consumers
    await a.start()
    await b.start()
    try:
        def mine(c: AsyncDefaultMQPushConsumer) -> set[object]:
            return {mq for mq in c.rebalance.process_queue_table if mq.topic == topic}
        await wait_for(lambda: len(mine(a)) == 4 and len(mine(b)) == 4, what="an even split")
        assert not mine(a) & mine(b)
        bodies = [f"s{i}".encode() for i in range(80)]
        await send(remoting_cluster, topic, bodies[:40])
        await wait_for(lambda: len(got_a) + len(got_b) == 40, what="the first 40")
        assert got_a and got_b and not set(got_a) & set(got_b)
        await a.shutdown()  # persists its offsets and unregisters: b is told and takes every queue
        await wait_for(lambda: len(mine(b)) == 8, what="b owning all queues")
        await send(remoting_cluster, topic, bodies[40:])
        await wait_for(lambda: set(got_a) | set(got_b) == set(bodies), what="all 80")
        assert all(n == 1 for n in got_b.values()) and all(n == 1 for n in got_a.values())
    finally:
        await a.shutdown()
        await b.shutdown()


async def _dlq_count(cluster: RemotingCluster, group: str) -> int:
    async def go(api: object) -> int:
        total = 0
        for addr in cluster.brokers.values():
            try:
                total += await api.get_max_offset(addr, "%DLQ%" + group, 0)  # type: ignore[attr-defined]
            except Exception:
                pass
        return total
    return cluster.api_call(go)


async def test_reconsume_later_retries_then_dead_letter(remoting_cluster: RemotingCluster) -> None:
    topic = remoting_cluster.create_topic(unique("Retry"))
    group = remoting_cluster.create_group(unique("CG"))
    attempts: list[int] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        attempts.extend(m.reconsume_times for m in msgs)
        assert all(m.topic == topic for m in msgs)  # the retry topic is hidden from the listener
        ctx.delay_level_when_next_consume = 1  # 1 s between tries instead of level 3 + n
        return ConsumeConcurrentlyStatus.RECONSUME_LATER

    consumer = AsyncDefaultMQPushConsumer(group, client_config(remoting_cluster), max_reconsume_times=2,
                                          consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    await consumer.start()
    try:
        await send(remoting_cluster, topic, [b"poison"])
        await wait_for(lambda: len(attempts) >= 3, timeout=30, what="three deliveries")
        deadline = time.monotonic() + 15
        while await _dlq_count(remoting_cluster, group) < 1:
            assert time.monotonic() < deadline, f"the message never reached the DLQ; deliveries {attempts}"
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.5)
        # First delivery, two retries, then %DLQ%group.
        assert attempts == [0, 1, 2], f"reconsume times of the deliveries: {attempts}"
    finally:
        await consumer.shutdown()


async def test_orderly_keeps_queue_order_under_broker_locks(remoting_cluster: RemotingCluster) -> None:
    topic = remoting_cluster.create_topic(unique("Order"), queues=2)
    group = remoting_cluster.create_group(unique("CG"), orderly=True)
    queues = [MessageQueueRef(topic, b, q) for b in sorted(remoting_cluster.brokers) for q in range(2)]
    seen: dict[MessageQueueRef, list[int]] = {}
    failed_once: set[bytes] = set()

    async def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        for m in msgs:
            if m.body.endswith(b":7") and m.body not in failed_once:
                failed_once.add(m.body)  # a failed batch is retried in place, order unbroken
                ctx.suspend_current_queue_time_millis = 100
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            seen.setdefault(ctx.message_queue, []).append(int(m.body.split(b":")[1]))
        await asyncio.sleep(0.001)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = AsyncDefaultMQPushConsumer(group, client_config(remoting_cluster), consume_thread_min=4,
                                          consume_thread_max=4, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic)
    consumer.register_message_listener(listener, orderly=True)
    await consumer.start()
    try:
        n = 30
        await send(remoting_cluster, topic, [f"{i % 4}:{i // 4}".encode() for i in range(4 * n)],
                   queue=lambda i: queues[i % 4])
        await wait_for(lambda: sum(len(v) for k, v in seen.items() if k.topic == topic) == 4 * n, what="all ordered")
        for mq in queues:
            assert seen[mq] == list(range(n)), mq
        for mq in queues:
            assert consumer.rebalance.process_queue_table[mq].locked
        # the broker holds the locks for this client: another client id gets none of them
        locked = remoting_cluster.api_call(lambda api: api.lock_batch_mq(
            remoting_cluster.brokers["broker-a"], group, "10.0.0.9@other", queues[:2]))
        assert locked == set()
    finally:
        await consumer.shutdown()
    # shutdown released them (UNLOCK_BATCH_MQ): now the other client gets them
    locked = remoting_cluster.api_call(lambda api: api.lock_batch_mq(
        remoting_cluster.brokers["broker-a"], group, "10.0.0.9@other", queues[:2]))
    assert locked == set(queues[:2])


class HookRecorder:
    """A ConsumeMessageHook writing (before|after, body, success, status, ConsumeReturnType) of
    each message into ``seen``."""

    def __init__(self, seen: list[tuple[str, bytes, bool, str, str]]) -> None:
        self.seen = seen

    def hook_name(self) -> str:
        return "recorder"

    def consume_message_before(self, context: ConsumeMessageContext) -> None:
        self.seen.extend(("before", m.body, context.success, context.status, "") for m in context.msg_list)

    def consume_message_after(self, context: ConsumeMessageContext) -> None:
        self.seen.extend(("after", m.body, context.success, context.status, context.props[CONSUME_CONTEXT_TYPE])
                         for m in context.msg_list)


async def test_orderly_consume_hooks_see_each_outcome(remoting_cluster: RemotingCluster) -> None:
    """ConsumeMessageOrderlyService's hooks: the status, success flag and ConsumeReturnType of a
    suspended batch, one the listener returned nothing for, one that raised, then the in-place
    retries that succeed, in queue order."""

    topic = remoting_cluster.create_topic(unique("OrderHook"), queues=1, brokers=["broker-a"])
    group = remoting_cluster.create_group(unique("CG"), orderly=True)
    seen: list[tuple[str, bytes, bool, str, str]] = []
    tried: set[bytes] = set()

    def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus | None:
        ctx.suspend_current_queue_time_millis = 100
        body = msgs[0].body
        first = body not in tried
        tried.add(body)
        if first and body == b"suspend":
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        if first and body == b"null":
            return None
        if first and body == b"raise":
            raise RuntimeError("listener failure")
        return ConsumeOrderlyStatus.SUCCESS

    consumer = AsyncDefaultMQPushConsumer(group, client_config(remoting_cluster),
                                          consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic)
    consumer.register_message_listener(listener, orderly=True)
    consumer.register_consume_message_hook(HookRecorder(seen))
    await consumer.start()
    try:
        await send(remoting_cluster, topic, [b"suspend", b"null", b"raise", b"ok"])
        await wait_for(lambda: sum(1 for s in seen if s[0] == "after") == 7, timeout=30, what="seven tries")
    finally:
        await consumer.shutdown()
    retried = [("before", b"", False, "", ""), ("after", b"", True, "SUCCESS", "SUCCESS")]

    def tries(body: bytes, first_after: tuple[bool, str, str]) -> list[tuple[str, bytes, bool, str, str]]:
        return [("before", body, False, "", ""), ("after", body, *first_after),
                *[(kind, body, *rest) for kind, _, *rest in retried]]

    assert seen == [*tries(b"suspend", (False, "SUSPEND_CURRENT_QUEUE_A_MOMENT", "FAILED")),
                    *tries(b"null", (False, "SUSPEND_CURRENT_QUEUE_A_MOMENT", "RETURNNULL")),
                    *tries(b"raise", (False, "SUSPEND_CURRENT_QUEUE_A_MOMENT", "EXCEPTION")),
                    ("before", b"ok", False, "", ""), ("after", b"ok", True, "SUCCESS", "SUCCESS")]


async def test_broadcasting_local_offsets_resume(remoting_cluster: RemotingCluster, tmp_path: Path) -> None:
    topic = remoting_cluster.create_topic(unique("Bcast"))
    group = remoting_cluster.create_group(unique("CG"))

    def make(name: str, got: dict[bytes, int]) -> AsyncDefaultMQPushConsumer:
        c = AsyncDefaultMQPushConsumer(group, client_config(remoting_cluster, instance_name=name),
                                       message_model="BROADCASTING", consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                                       local_offset_store_dir=tmp_path)
        c.subscribe(topic)
        c.register_message_listener(_counting_listener(got))
        return c

    got1: dict[bytes, int] = {}
    got2: dict[bytes, int] = {}
    c1, c2 = make("bc1", got1), make("bc2", got2)
    await c1.start()
    await c2.start()
    first = [f"b{i}".encode() for i in range(20)]
    try:
        await send(remoting_cluster, topic, first)
        await wait_for(lambda: len(got1) == 20 and len(got2) == 20, what="both get all")
    finally:
        await c1.shutdown()
        await c2.shutdown()
    path = tmp_path / "127.0.0.1@bc1" / group / "offsets.json"
    table = decode_offset_table(path.read_text("utf-8"))
    assert sum(off for mq, off in table.items() if mq.topic == topic) == 20
    assert path.read_text("utf-8").startswith('{"offsetTable":{{"brokerName":')
    more = [f"c{i}".encode() for i in range(10)]
    await send(remoting_cluster, topic, more)
    again: dict[bytes, int] = {}
    c1 = make("bc1", again)
    await c1.start()
    try:
        await wait_for(lambda: len(again) == 10, what="the 10 new ones")
        await asyncio.sleep(0.5)
        assert set(again) == set(more)  # resumed from offsets.json, not from the first offset
    finally:
        await c1.shutdown()


async def test_consume_from_first_last_timestamp(remoting_cluster: RemotingCluster, tmp_path: Path) -> None:
    """ConsumeFromWhere applies when the offset store has nothing (readOffset -1): BROADCASTING
    consumers with empty offset files show FIRST / LAST / TIMESTAMP. A CLUSTERING group's broker
    store answers offset 0 instead while the queue's first message is still in memory
    (ConsumerManageProcessor#queryConsumerOffset), so that LAST consumer starts at the beginning,
    as an upstream client against an upstream broker does."""
    topic = remoting_cluster.create_topic(unique("From"), queues=2)
    batch_a = [f"a{i}".encode() for i in range(6)]
    batch_b = [f"b{i}".encode() for i in range(6)]
    batch_c = [f"c{i}".encode() for i in range(6)]
    await send(remoting_cluster, topic, batch_a)
    await asyncio.sleep(1.2)
    stamp = datetime.now().strftime("%Y%m%d%H%M%S")
    await asyncio.sleep(1.2)
    await send(remoting_cluster, topic, batch_b)
    got: dict[str, dict[bytes, int]] = {k: {} for k in ("FIRST", "LAST", "TIMESTAMP", "CLUSTERING_LAST")}
    consumers = []
    for kind, table in got.items():
        where = {"FIRST": "CONSUME_FROM_FIRST_OFFSET", "TIMESTAMP": "CONSUME_FROM_TIMESTAMP"}.get(
            kind, "CONSUME_FROM_LAST_OFFSET")
        model = "CLUSTERING" if kind.startswith("CLUSTERING") else "BROADCASTING"
        c = AsyncDefaultMQPushConsumer(remoting_cluster.create_group(unique("CG")),
                                       client_config(remoting_cluster, instance_name=unique("from")),
                                       consume_from_where=where, consume_timestamp=stamp, message_model=model,
                                       local_offset_store_dir=tmp_path)
        c.subscribe(topic)
        c.register_message_listener(_counting_listener(table))
        consumers.append(c)
    for c in consumers:
        await c.start()
    try:
        await wait_for(lambda: all(sum(mq.topic == topic for mq in c.rebalance.process_queue_table) == 4
                                   for c in consumers), what="assignments")
        await asyncio.sleep(1.0)  # the first pulls went out (500 ms after the rebalance)
        await send(remoting_cluster, topic, batch_c)
        await wait_for(lambda: set(got["FIRST"]) == set(batch_a + batch_b + batch_c), what=f"FIRST {got}")
        await wait_for(lambda: set(got["TIMESTAMP"]) == set(batch_b + batch_c), what=f"TIMESTAMP {got}")
        await wait_for(lambda: set(got["LAST"]) == set(batch_c), what=f"LAST {got}")
        await wait_for(lambda: set(got["CLUSTERING_LAST"]) == set(batch_a + batch_b + batch_c), what=f"CL {got}")
    finally:
        for c in consumers:
            await c.shutdown()


async def test_tag_and_sql92_subscriptions(remoting_cluster: RemotingCluster) -> None:
    topic = remoting_cluster.create_topic(unique("Filter"))
    tag_got: dict[bytes, int] = {}
    sql_got: dict[bytes, int] = {}
    tag_c = AsyncDefaultMQPushConsumer(remoting_cluster.create_group(unique("CG")), client_config(remoting_cluster),
                                       consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    tag_c.subscribe(topic, "TagA || TagC")
    tag_c.register_message_listener(_counting_listener(tag_got))
    sql_c = AsyncDefaultMQPushConsumer(remoting_cluster.create_group(unique("CG")), client_config(remoting_cluster),
                                       consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    sql_c.subscribe(topic, "n >= 5 AND n < 8", "SQL92")
    sql_c.register_message_listener(_counting_listener(sql_got))
    with pytest.raises(MQClientError, match="subscription exception"):
        sql_c.subscribe(topic, "", "SQL92")
    with pytest.raises(MQClientError, match="TAG or SQL92"):
        sql_c.subscribe(topic, "x", "CLASS")
    bodies = [f"f{i}".encode() for i in range(12)]
    await tag_c.start()
    await sql_c.start()
    try:
        await send(remoting_cluster, topic, bodies, tags=lambda i: f"Tag{'ABC'[i % 3]}",
                   props=lambda i: {"n": str(i)})
        await wait_for(lambda: len(tag_got) == 8 and len(sql_got) == 3, what="filtered deliveries")
        await asyncio.sleep(0.5)
        assert set(tag_got) == {bodies[i] for i in range(12) if i % 3 != 1}
        assert set(sql_got) == {b"f5", b"f6", b"f7"}
    finally:
        await tag_c.shutdown()
        await sql_c.shutdown()


async def test_heartbeat_v2_fingerprints_and_a_subscription_change(remoting_cluster: RemotingCluster,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """useHeartbeatV2: once the broker answers IS_SUPPORT_HEART_BEAT_V2, unchanged heartbeats carry
    the fingerprint only; a new subscription changes the fingerprint, goes in full, and the broker
    filters by it."""
    from orbitmq.client.api import MQClientAPI

    topic = remoting_cluster.create_topic(unique("HbV2"))
    group = remoting_cluster.create_group(unique("CG"))
    sent: list[tuple[int, bool, list[str]]] = []  # (fingerprint, without_sub, subscribed expressions)
    original = MQClientAPI.heartbeat

    async def recording(self, addr, client_id, producers=(), consumers=(), client_properties=None, *,
                        fingerprint=0, without_sub=False):
        consumers = list(consumers)
        if any(c.group_name == group for c in consumers):
            sent.append((fingerprint, without_sub,
                         [s.sub_string for c in consumers if c.group_name == group for s in c.subscriptions]))
        return await original(self, addr, client_id, producers, consumers, client_properties,
                              fingerprint=fingerprint, without_sub=without_sub)

    monkeypatch.setattr(MQClientAPI, "heartbeat", recording)
    got: dict[bytes, int] = {}
    consumer = AsyncDefaultMQPushConsumer(group, client_config(remoting_cluster, use_heartbeat_v2=True),
                                          consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic, "TagA")
    consumer.register_message_listener(_counting_listener(got))
    await consumer.start()
    try:
        await send(remoting_cluster, topic, [b"a1", b"b1"], tags=lambda i: "TagA" if i == 0 else "TagB")
        await wait_for(lambda: b"a1" in got, what="the TagA message")
        await wait_for(lambda: any(without for _, without, _ in sent), what="a fingerprint-only heartbeat")
        assert all(fp != 0 for fp, _, _ in sent), "every V2 heartbeat carries a fingerprint"
        first = {fp for fp, _, _ in sent}
        assert len(first) == 1, f"one subscription, one fingerprint: {first}"
        count = len(sent)
        consumer.subscribe(topic, "TagB")
        await wait_for(lambda: any("TagB" in subs and not without for _, without, subs in sent[count:]),
                       what="a full heartbeat with the new subscription")
        changed = [fp for fp, without, subs in sent[count:] if "TagB" in subs and not without]
        assert changed[0] not in first, "a new subscription, a new fingerprint"
        await send(remoting_cluster, topic, [b"a2", b"b2"], tags=lambda i: "TagA" if i == 0 else "TagB")
        await wait_for(lambda: b"b2" in got, what="the TagB message after the change")
        await asyncio.sleep(0.5)
        assert b"a2" not in got, "the broker filters by the new subscription"
    finally:
        await consumer.shutdown()


async def test_offset_illegal_is_corrected(remoting_cluster: RemotingCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """A committed offset past the queue's end (OFFSET_ILLEGAL) is replaced by the broker's
    nextBeginOffset (the queue's max offset, DefaultMessageStore#getMessage's correction of
    OFFSET_OVERFLOW_BADLY, also while the queue starts at 0), the queue is dropped, taken again, and
    consumed from there: the two old messages are skipped, not read again."""
    monkeypatch.setattr(push_consumer, "OFFSET_ILLEGAL_DELAY", 0.5)  # upstream waits 10 s before fixing
    topic = remoting_cluster.create_topic(unique("Illegal"), queues=1, brokers=["broker-a"])
    group = remoting_cluster.create_group(unique("CG"))
    await send(remoting_cluster, topic, [b"old0", b"old1"])
    addr = remoting_cluster.brokers["broker-a"]
    remoting_cluster.api_call(lambda api: api.update_consumer_offset(addr, group, topic, 0, 1000))
    got: dict[bytes, int] = {}
    consumer = AsyncDefaultMQPushConsumer(group, client_config(remoting_cluster))
    consumer.subscribe(topic)
    consumer.register_message_listener(_counting_listener(got))
    await consumer.start()
    try:
        mq = MessageQueueRef(topic, "broker-a", 0)
        await wait_for(lambda: mq in consumer.rebalance.process_queue_table, what="assignment")
        first_pq = consumer.rebalance.process_queue_table[mq]
        await wait_for(lambda: first_pq.dropped, what="the OFFSET_ILLEGAL drop")
        await wait_for(lambda: consumer.rebalance.process_queue_table.get(mq) not in (None, first_pq),
                       timeout=20, what="the queue taken again")
        await send(remoting_cluster, topic, [b"new"])
        await wait_for(lambda: b"new" in got, what="the new message")
        await asyncio.sleep(0.5)
        assert set(got) == {b"new"}  # consumed from offset 2 on
        await wait_for(lambda: remoting_cluster.api_call(
            lambda api: api.query_consumer_offset(addr, group, topic, 0)) == 3, what="offset 3 committed")
    finally:
        await consumer.shutdown()


# ---- lite pull consumer ------------------------------------------------------------------------


async def _poll_until(consumer: AsyncDefaultLitePullConsumer, want: int, timeout: float = 20.0) -> list[MessageExt]:  # noqa: ASYNC109
    out: list[MessageExt] = []
    deadline = time.monotonic() + timeout
    while len(out) < want:
        assert time.monotonic() < deadline, f"polled {len(out)} of {want}"
        out += await consumer.poll(0.5)
    return out


async def test_lite_pull_subscribe_poll_and_commit(remoting_cluster: RemotingCluster) -> None:
    topic = remoting_cluster.create_topic(unique("Lite"), queues=2)
    group = remoting_cluster.create_group(unique("CG"))
    bodies = [f"l{i}".encode() for i in range(20)]
    await send(remoting_cluster, topic, bodies)
    consumer = AsyncDefaultLitePullConsumer(group, client_config(remoting_cluster), auto_commit=False,
                                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic, "*")
    with pytest.raises(MQClientError, match="mutually exclusive"):
        consumer.assign([MessageQueueRef(topic, "broker-a", 0)])
    await consumer.start()
    try:
        got = await _poll_until(consumer, 20)
        assert sorted(m.body for m in got) == sorted(bodies)
        assert len(consumer.assignment()) == 4
        mqs = sorted(consumer.assignment(), key=lambda q: (q.broker_name, q.queue_id))
        assert all(off in (-1, 0) for off in [await consumer.committed(mq) for mq in mqs])  # manual: none yet
        await consumer.commit_sync()
        assert sum([await consumer.committed(mq) for mq in mqs]) == 20
    finally:
        await consumer.shutdown()


async def test_lite_pull_assign_seek_and_auto_commit(remoting_cluster: RemotingCluster) -> None:
    topic = remoting_cluster.create_topic(unique("Assign"), queues=2)
    group = remoting_cluster.create_group(unique("CG"))
    mq0, mq1 = MessageQueueRef(topic, "broker-a", 0), MessageQueueRef(topic, "broker-a", 1)
    await send(remoting_cluster, topic, [f"x{i}".encode() for i in range(10)], queue=lambda i: mq0)
    await asyncio.sleep(1.1)
    middle = int(time.time() * 1000)
    await send(remoting_cluster, topic, [f"y{i}".encode() for i in range(5)], queue=lambda i: mq0)
    await send(remoting_cluster, topic, [b"other"], queue=lambda i: MessageQueueRef(topic, "broker-b", 0))
    consumer = AsyncDefaultLitePullConsumer(group, client_config(remoting_cluster), auto_commit_interval_millis=1000,
                                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.assign([mq0, mq1])
    await consumer.start()
    try:
        got = await _poll_until(consumer, 15)
        assert [m.body for m in got] == [f"x{i}".encode() for i in range(10)] + [f"y{i}".encode() for i in range(5)]
        assert await consumer.poll(0.3) == []  # broker-b's queue is not assigned
        await consumer.seek(mq0, 12)
        assert [m.body for m in await _poll_until(consumer, 3)] == [b"y2", b"y3", b"y4"]
        await consumer.seek_to_begin(mq0)
        assert (await _poll_until(consumer, 1))[0].body == b"x0"
        ts_offset = await consumer.offset_for_timestamp(mq0, middle)
        assert ts_offset == 10
        await consumer.seek_to_end(mq0)
        await asyncio.sleep(0.3)
        assert [m for m in await consumer.poll(0.3) if m.queue_id == 0] == []
        with pytest.raises(MQClientError, match="Seek offset illegal"):
            await consumer.seek(mq0, 999)
        with pytest.raises(MQClientError, match="not in assigned list"):
            await consumer.seek(MessageQueueRef(topic, "broker-b", 0), 0)
        await asyncio.sleep(1.1)
        await consumer.poll(0.1)  # auto commit happens inside poll once the interval passed
        await consumer.persist_consumer_offset()
        assert await consumer.committed(mq0) == 15
    finally:
        await consumer.shutdown()


VICTIM = r"""
import sys, time
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.consumer import DefaultMQPushConsumer, ConsumeConcurrentlyStatus
namesrv, group, topic, out = sys.argv[1:5]
log = open(out, "a", buffering=1)
def listener(msgs, ctx):
    for m in msgs:
        time.sleep(0.02)
        log.write(f"{m.body.decode()} {time.time():.3f}\n")
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
cfg = RemotingClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", rebalance_interval=1.0,
                           persist_consumer_offset_interval=1.0, heartbeat_broker_interval=2.0)
c = DefaultMQPushConsumer(group, cfg, consume_thread_min=1, consume_thread_max=1, pull_batch_size=8,
                          consume_from_where="CONSUME_FROM_FIRST_OFFSET")
c.subscribe(topic)
c.register_message_listener(listener)
c.start()
log.write("STARTED 0\n")
while True:
    time.sleep(1)
"""


async def test_killed_consumer_queues_move_nothing_lost(remoting_cluster: RemotingCluster, tmp_path: Path) -> None:
    """kill -9 of one instance mid-batch: the broker drops its channel, the survivor takes its
    queues; every message is consumed, and the only duplicates are messages the victim consumed in
    its last persist interval (offsets not yet committed)."""
    topic = remoting_cluster.create_topic(unique("Kill"))
    group = remoting_cluster.create_group(unique("CG"))
    out = tmp_path / "victim.log"
    victim = await asyncio.create_subprocess_exec(
        sys.executable, "-c", VICTIM, remoting_cluster.namesrv, group, topic, str(out),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    got: dict[bytes, int] = {}
    survivor = AsyncDefaultMQPushConsumer(group, client_config(remoting_cluster),
                                          consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    survivor.subscribe(topic)
    survivor.register_message_listener(_counting_listener(got))
    try:
        await wait_for(lambda: out.exists() and "STARTED" in out.read_text(), what="the victim")
        await survivor.start()
        await wait_for(lambda: sum(mq.topic == topic for mq in survivor.rebalance.process_queue_table) == 4,
                       what="an even split")
        bodies = [f"k{i}".encode() for i in range(300)]
        await send(remoting_cluster, topic, bodies)

        def victim_lines() -> list[tuple[bytes, float]]:
            lines = [ln.split() for ln in out.read_text().splitlines() if not ln.startswith("STARTED")]
            return [(a.encode(), float(b)) for a, b in lines if b]
        await wait_for(lambda: len(victim_lines()) >= 40, what="the victim consuming")
        victim.send_signal(signal.SIGKILL)
        await asyncio.wait_for(victim.wait(), 10)
        killed_at = time.time()
        await wait_for(lambda: sum(mq.topic == topic for mq in survivor.rebalance.process_queue_table) == 8,
                       timeout=30, what="the survivor taking every queue")
        consumed_by_victim = victim_lines()
        victim_set = {b for b, _ in consumed_by_victim}
        await wait_for(lambda: set(got) | victim_set == set(bodies), timeout=30, what="every message consumed")
        duplicates = set(got) & victim_set
        window = {b for b, t in consumed_by_victim if t > killed_at - 2.5}  # persist interval 1 s + slack
        assert duplicates <= window, sorted(duplicates - window)[:10]
        assert all(n == 1 for n in got.values())
    finally:
        if victim.returncode is None:
            victim.kill()
            await asyncio.wait_for(victim.wait(), 10)
        await survivor.shutdown()


async def test_sync_lite_pull_wrapper(remoting_cluster: RemotingCluster) -> None:
    """The thread-facing DefaultLitePullConsumer over the shared background loop."""
    topic = remoting_cluster.create_topic(unique("SyncLite"), queues=1, brokers=["broker-b"])
    group = remoting_cluster.create_group(unique("CG"))
    await send(remoting_cluster, topic, [b"s0", b"s1", b"s2"])
    mq = MessageQueueRef(topic, "broker-b", 0)

    def run() -> list[bytes]:
        consumer = DefaultLitePullConsumer(group, client_config(remoting_cluster), auto_commit=False,
                                           consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        consumer.assign([mq])
        consumer.start()
        try:
            got: list[bytes] = []
            deadline = time.monotonic() + 15
            while len(got) < 3 and time.monotonic() < deadline:
                got += [m.body for m in consumer.poll(0.5)]
            consumer.commit_sync({mq: 2})
            assert consumer.committed(mq) == 2
            consumer.seek(mq, 2)
            got += [m.body for m in consumer.poll(5.0)]
            return got
        finally:
            consumer.shutdown()

    assert await asyncio.to_thread(run) == [b"s0", b"s1", b"s2", b"s2"]


async def test_consumer_started_before_its_topic_exists(remoting_cluster: RemotingCluster) -> None:
    """No route yet is no start failure (as upstream): once the topic is created, the next
    rebalance finds its route and consumption begins."""
    topic = unique("Later")
    group = remoting_cluster.create_group(unique("CG"))
    got: dict[bytes, int] = {}
    consumer = AsyncDefaultMQPushConsumer(group, client_config(remoting_cluster),
                                          consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic)
    consumer.register_message_listener(_counting_listener(got))
    await consumer.start()
    try:
        assert not any(mq.topic == topic for mq in consumer.rebalance.process_queue_table)
        remoting_cluster.create_topic(topic, queues=1)
        await send(remoting_cluster, topic, [b"late"])
        await wait_for(lambda: b"late" in got, what="the message of the late topic")
    finally:
        await consumer.shutdown()


async def test_consume_hooks_and_consumption_trace(remoting_cluster: RemotingCluster) -> None:
    """ConsumeMessageHook around each listener call, and enableMsgTrace's SubBefore/SubAfter records
    (ConsumeMessageTraceHookImpl) with the outcome of each try, findable by message id."""
    from orbitmq.common.constants import RMQ_SYS_TRACE_TOPIC
    from orbitmq.common.trace_codec import ContextCode, TraceType, decode
    from tests.sdk.remoting_client.test_producer import pull_all

    topic = remoting_cluster.create_topic(unique("TraceC"), queues=1, brokers=["broker-a"])
    group = unique("TraceCG")
    failed_once: set[bytes] = set()
    seen: list[tuple[str, bytes, bool, str, str]] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            if m.body == b"later" and m.body not in failed_once:
                failed_once.add(m.body)
                ctx.delay_level_when_next_consume = 1
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = AsyncDefaultMQPushConsumer(group, client_config(remoting_cluster), enable_msg_trace=True,
                                          consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    consumer.register_consume_message_hook(HookRecorder(seen))
    await consumer.start()
    try:
        ok_id, later_id = await send(remoting_cluster, topic, [b"ok", b"later"])
        await wait_for(lambda: sum(1 for s in seen if s[0] == "after") == 3, timeout=30, what="three tries")
    finally:
        await consumer.shutdown()  # writes the queued trace records
    assert [s for s in seen if s[1] == b"ok"] == [("before", b"ok", False, "", ""),
                                                  ("after", b"ok", True, "CONSUME_SUCCESS", "SUCCESS")]
    assert [s for s in seen if s[1] == b"later"] == [
        ("before", b"later", False, "", ""), ("after", b"later", False, "RECONSUME_LATER", "FAILED"),
        ("before", b"later", False, "", ""), ("after", b"later", True, "CONSUME_SUCCESS", "SUCCESS")]

    def records() -> list:
        return [r for t in traces for r in decode(t.body.decode())
                if r.msg_id in (ok_id, later_id) and r.type in (TraceType.SUB_BEFORE, TraceType.SUB_AFTER)]
    deadline = time.monotonic() + 20
    while True:
        traces = await pull_all(remoting_cluster, RMQ_SYS_TRACE_TOPIC, 1)
        if len(records()) >= 6 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.3)
    got = records()
    assert len(got) == 6, got
    assert all(r.group == group for r in got)
    ok = [r for r in got if r.msg_id == ok_id]
    later = [r for r in got if r.msg_id == later_id]
    assert sorted(r.type for r in ok) == sorted([TraceType.SUB_BEFORE, TraceType.SUB_AFTER])
    befores = sorted((r for r in later if r.type == TraceType.SUB_BEFORE), key=lambda r: r.retry_times)
    assert [r.retry_times for r in befores] == [0, 1]
    afters = [r for r in later if r.type == TraceType.SUB_AFTER]
    assert sorted((r.success, r.context_code) for r in afters) == [(False, ContextCode.FAILED),
                                                                   (True, ContextCode.SUCCESS)]
    # each SubAfter answers its SubBefore's request id
    assert {r.request_id for r in afters} == {r.request_id for r in befores} and len(befores[0].request_id) > 0
