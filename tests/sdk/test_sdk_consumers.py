"""SDK consumers against `orbitmq local` and two proxies: SimpleConsumer (receive, ack, change
invisible duration), PushConsumer (listener, concurrency, retries by the server's policy, dead
letters, FIFO order per group), PullConsumer (assign/subscribe, seek, poll, commit, progress)."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from orbitmq import (
    AsyncProducer,
    AsyncPullConsumer,
    AsyncPushConsumer,
    AsyncSimpleConsumer,
    ClientConfig,
    ConsumeResult,
    Message,
    MessageQueue,
    OffsetOutOfRangeError,
    PullConsumer,
    PushConsumer,
    ReceivedMessage,
)
from tests.interop.harness import unique
from tests.sdk.conftest import SdkEnv


async def produce(config: ClientConfig, topic: str, bodies: list[bytes], **fields) -> list:
    async with AsyncProducer(config, [topic], linger=0.01) as producer:
        return await producer.send_many([Message(topic, b, **fields) for b in bodies])


async def wait_for(predicate, deadline_s: float = 20.0) -> None:
    end = time.monotonic() + deadline_s
    while not predicate():
        assert time.monotonic() < end, "condition not met in time"
        await asyncio.sleep(0.1)


async def test_simple_consumer_change_invisible_duration(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("SdkInvis"), queues=1)
    group = env.cluster.create_group(unique("SdkInvisG"))
    config = ClientConfig(env.endpoints)
    await produce(config, topic, [b"postponed"])
    async with AsyncSimpleConsumer(config, group, {topic: "*"}, long_polling_timeout=1) as consumer:
        got: list[ReceivedMessage] = []
        for _ in range(10):
            got = await consumer.receive(1, 20)
            if got:
                break
        assert [m.body for m in got] == [b"postponed"]
        first_handle = got[0].receipt_handle
        await consumer.change_invisible_duration(got[0], 1.0)
        assert got[0].receipt_handle != first_handle
        again: list[ReceivedMessage] = []
        end = time.monotonic() + 10
        while not again and time.monotonic() < end:
            again = await consumer.receive(1, 20)
        assert [m.message_id for m in again] == [got[0].message_id]
        assert again[0].delivery_attempt == 2
        await consumer.ack(again[0])
        assert await consumer.receive(1, 20) == []


async def test_push_consumer_concurrency_and_async_listener(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("SdkPush"), queues=2)
    group = env.cluster.create_group(unique("SdkPushG"))
    config = ClientConfig(env.endpoints)
    await produce(config, topic, [f"p{i}".encode() for i in range(40)])
    seen: list[bytes] = []
    running = 0
    peak = 0

    async def listener(message: ReceivedMessage) -> ConsumeResult:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        seen.append(message.body)
        running -= 1
        return ConsumeResult.SUCCESS

    async with AsyncPushConsumer(config, group, {topic: "*"}, listener, concurrency=8, long_polling_timeout=1):
        await wait_for(lambda: len(seen) >= 40)
    assert sorted(seen) == sorted(f"p{i}".encode() for i in range(40))
    assert 1 < peak <= 8


async def test_push_consumer_slow_listener_is_not_redelivered(env: SdkEnv) -> None:
    """Receipt handles auto-renewed (the default): a listener busy for longer than the proxy's
    invisible time (3 s here) still gets the message once, and its ack settles it. The contrast,
    a fixed invisible_duration of 1.5 s, shows the same listener getting it twice."""
    topic = env.cluster.create_topic(unique("SdkPushSlow"), queues=1)
    renewed_group = env.cluster.create_group(unique("SdkPushSlowG"))
    fixed_group = env.cluster.create_group(unique("SdkPushFixedG"))
    config = ClientConfig(env.endpoints)
    await produce(config, topic, [b"slow", b"quick"])
    deliveries: dict[str, list[tuple[bytes, int]]] = collections.defaultdict(list)

    def listener_of(group: str):
        async def listener(message: ReceivedMessage) -> ConsumeResult:
            deliveries[group].append((message.body, message.delivery_attempt))
            if message.body == b"slow" and message.delivery_attempt == 1:
                await asyncio.sleep(5)
            return ConsumeResult.SUCCESS
        return listener

    async with AsyncPushConsumer(config, renewed_group, {topic: "*"}, listener_of(renewed_group),
                                 long_polling_timeout=1), \
            AsyncPushConsumer(config, fixed_group, {topic: "*"}, listener_of(fixed_group), long_polling_timeout=1,
                              invisible_duration=1.5):
        await wait_for(lambda: len(deliveries[renewed_group]) >= 2 and len(deliveries[fixed_group]) >= 3)
        await asyncio.sleep(5 + 3)  # the slow one finishes; a lapsed handle would show as attempt 2
    assert sorted(deliveries[renewed_group]) == [(b"quick", 1), (b"slow", 1)]
    assert (b"slow", 2) in deliveries[fixed_group]
    for bad in (0, -1.0, "30", True):
        with pytest.raises(ValueError):
            AsyncPushConsumer(config, renewed_group, {topic: "*"}, listener_of(renewed_group), invisible_duration=bad)


async def test_push_consumer_retries_by_server_policy_then_dead_letters(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("SdkRetry"), queues=1)
    # Two retries (three attempts), 1 s apart: the server's Settings give the client this policy.
    group = env.cluster.create_group(unique("SdkRetryG"), retry_max_times=2, retry_next_ms=[1000, 1000, 1000])
    config = ClientConfig(env.endpoints)
    await produce(config, topic, [b"flaky", b"poison"])
    attempts: dict[bytes, list[int]] = collections.defaultdict(list)

    def listener(message: ReceivedMessage) -> bool:  # a sync listener runs in the worker threads
        attempts[message.body].append(message.delivery_attempt)
        if message.body == b"flaky":
            return message.delivery_attempt >= 2
        raise RuntimeError("cannot consume this one")

    consumer = AsyncPushConsumer(config, group, {topic: "*"}, listener, long_polling_timeout=1)
    async with consumer:
        assert consumer.max_delivery_attempts == 3
        await wait_for(lambda: len(attempts[b"poison"]) >= 3 and len(attempts[b"flaky"]) >= 2, 30)
        await asyncio.sleep(3)  # nothing more comes: acked / dead-lettered
    assert attempts[b"flaky"] == [1, 2]
    assert attempts[b"poison"] == [1, 2, 3]
    # The dead-letter topic is write-only (as in RocketMQ): count what it holds on the broker.
    dlq = f"%DLQ%{group}"
    assert env.cluster.api_call(lambda api: api.get_max_offset(env.cluster.broker, dlq, 0)) == 1


def test_sync_push_consumer_fifo_order_per_group(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("SdkPushFifo"), queues=2, message_type="FIFO")
    group = env.cluster.create_group(unique("SdkPushFifoG"), orderly=True, retry_max_times=3,
                                     retry_next_ms=[200, 200, 200])
    config = ClientConfig(env.endpoints)
    groups = ["ga", "gb", "gc"]

    async def send() -> None:
        async with AsyncProducer(config, [topic], linger=0.01) as producer:
            await asyncio.gather(*(producer.send_nowait(Message(topic, f"{g}:{i}".encode(), message_group=g))
                                   for i in range(20) for g in groups))

    asyncio.run(send())
    order: dict[str, list[int]] = collections.defaultdict(list)
    failed_once: set[bytes] = set()
    lock = threading.Lock()

    def listener(message: ReceivedMessage) -> ConsumeResult:
        with lock:
            if message.body.endswith(b":5") and message.body not in failed_once:
                failed_once.add(message.body)  # retried in place: order still holds
                return ConsumeResult.FAILURE
            order[message.message_group or ""].append(int(message.body.split(b":")[1]))
        return ConsumeResult.SUCCESS

    with PushConsumer(config, group, {topic: "*"}, listener, concurrency=4, long_polling_timeout=1) as consumer:
        assert consumer._c.fifo
        end = time.monotonic() + 40
        while sum(len(v) for v in order.values()) < 60 and time.monotonic() < end:
            time.sleep(0.2)
    for g in groups:
        assert order[g] == list(range(20)), (g, order[g])
    assert len(failed_once) == 3


async def test_pull_consumer_assign_seek_poll_commit(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("SdkPull"), queues=2)
    group = env.cluster.create_group(unique("SdkPullG"))
    config = ClientConfig(env.endpoints)
    first = await produce(config, topic, [f"a{i}".encode() for i in range(20)])
    await asyncio.sleep(1.1)
    middle = time.time()
    await asyncio.sleep(0.1)
    await produce(config, topic, [f"b{i}".encode() for i in range(10)])
    async with AsyncPullConsumer(config, group, batch_size=8, long_polling_timeout=1) as consumer:
        queues = await consumer.queues(topic)
        assert sorted(q.queue_id for q in queues) == [0, 1]
        await consumer.assign(queues)
        polled: list[ReceivedMessage] = []
        end = time.monotonic() + 20
        while len(polled) < 30 and time.monotonic() < end:
            polled += await consumer.poll(1.0, max_messages=7)
        assert sorted(m.body for m in polled) == sorted([f"a{i}".encode() for i in range(20)]
                                                        + [f"b{i}".encode() for i in range(10)])
        assert await consumer.poll(0.5) == []
        for q in queues:
            mine = [m.queue_offset for m in polled if m.queue_id == q.queue_id]
            assert mine == list(range(len(mine)))  # in order, from offset 0
            assert await consumer.position(q) == len(mine) == await consumer.max_offset(q)
            assert await consumer.committed(q) is None
        await consumer.commit()
        for q in queues:
            assert await consumer.committed(q) == await consumer.max_offset(q)
        # Seek: back to the beginning, to an offset, to a timestamp, to the end.
        await consumer.seek_to_beginning()
        again = await drain(consumer, 30)
        assert len(again) == 30
        q0 = queues[0]
        await consumer.seek(q0, 2)
        await consumer.seek_to_end([queues[1]])
        tail = await drain(consumer, (await consumer.max_offset(q0)) - 2)
        assert [m.queue_offset for m in tail] == list(range(2, await consumer.max_offset(q0)))
        await consumer.seek_to_timestamp(middle)
        later = await drain(consumer, 10)
        assert sorted(m.body for m in later) == sorted(f"b{i}".encode() for i in range(10))
        assert first[0].message_id in {m.message_id for m in polled}
        # Out of range: the position is reset per auto_offset_reset ("earliest" here).
        await consumer.seek(q0, 10_000)
        await consumer.seek_to_end([queues[1]])
        reset = await drain(consumer, await consumer.max_offset(q0))
        assert [m.queue_offset for m in reset] == list(range(await consumer.max_offset(q0)))
    progress = admin_json(env, "consumerProgress", "-g", group, "-t", topic)
    rows = {r["queueId"]: r for r in progress["offsets"]}
    for q in queues:
        assert rows[q.queue_id]["consumerOffset"] == rows[q.queue_id]["brokerOffset"]
    assert progress["diffTotal"] == 0


async def drain(consumer: AsyncPullConsumer, expected: int, deadline_s: float = 15) -> list[ReceivedMessage]:
    out: list[ReceivedMessage] = []
    end = time.monotonic() + deadline_s
    while len(out) < expected and time.monotonic() < end:
        out += await consumer.poll(1.0)
    return out


def admin_run(env: SdkEnv, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`orbitmq admin` against the env's NameServer; ``cwd`` where commands that write files
    (consumerStatus: <now>/<clientId>) put them."""
    env_vars = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    return subprocess.run([sys.executable, "-m", "orbitmq", "admin", *args, "-n", env.cluster.namesrv],
                          capture_output=True, text=True, timeout=60, env=env_vars, cwd=cwd)


def admin_json(env: SdkEnv, *args: str, cwd: Path | None = None):
    done = admin_run(env, *args, "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_sync_pull_consumer_subscribe_and_offset_reset(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("SdkPullSub"), queues=2)
    group = env.cluster.create_group(unique("SdkPullSubG"))
    config = ClientConfig(env.endpoints)
    asyncio.run(produce(config, topic, [f"s{i}".encode() for i in range(12)]))
    with PullConsumer(config, group, auto_offset_reset="latest") as consumer:
        consumer.subscribe(topic)
        assert len(consumer.assignment()) == 2
        assert consumer.poll(1.0) == []  # latest: only what comes next
        asyncio.run(produce(config, topic, [b"after"]))
        got: list[ReceivedMessage] = []
        end = time.monotonic() + 10
        while not got and time.monotonic() < end:
            got = consumer.poll(1.0)
        assert [m.body for m in got] == [b"after"]
        consumer.commit()
    with PullConsumer(config, group, auto_offset_reset="none") as strict:
        strict.subscribe(topic)
        # Committed offsets are where a new consumer of the group starts.
        assert strict.poll(1.0) == []
        q = MessageQueue(topic, got[0].broker, got[0].queue_id)
        assert strict.committed(q) == got[0].queue_offset + 1
        strict.seek(q, 10_000)
        try:
            strict.poll(2.0)
        except OffsetOutOfRangeError as exc:
            assert exc.queue == q and exc.offset == 10_000
        else:
            raise AssertionError("an offset past the end should raise with auto_offset_reset='none'")
        # A stateless pull of a fixed offset range (what a Spark task does).
        msgs, nxt = strict.pull(q, 0, 32)
        assert [m.queue_offset for m in msgs] == list(range(nxt))


async def test_pull_subscription_picks_up_new_queues(env: SdkEnv, monkeypatch) -> None:
    from orbitmq.consumer import pull

    monkeypatch.setattr(pull, "ASSIGNMENT_REFRESH_S", 0.5)
    topic = env.cluster.create_topic(unique("SdkPullGrow"), queues=1)
    group = env.cluster.create_group(unique("SdkPullGrowG"))
    config = ClientConfig(env.endpoints)
    async with AsyncPullConsumer(config, group, long_polling_timeout=1) as consumer:
        await consumer.subscribe(topic)
        assert [q.queue_id for q in consumer.assignment()] == [0]
        env.cluster.create_topic(topic, queues=3)  # the topic grows to three queues
        # The proxy refreshes its routes every topicRouteServiceCacheRefreshSeconds (2 s in these clusters).
        end = time.monotonic() + 40
        while len(consumer.assignment()) < 3 and time.monotonic() < end:
            consumer.invalidate_route(topic)
            await consumer.poll(1.0)
        assert sorted(q.queue_id for q in consumer.assignment()) == [0, 1, 2]
        async with AsyncProducer(config, [topic], max_batch_messages=1) as producer:  # round robin over queues
            for i in range(12):
                await producer.send(Message(topic, f"g{i}".encode()))
        got = await drain(consumer, 12)
    assert sorted(m.body for m in got) == sorted(f"g{i}".encode() for i in range(12))
    assert {m.queue_id for m in got} == {0, 1, 2}


async def test_consumer_status_and_consume_directly_reach_a_push_consumer(env: SdkEnv, tmp_path: Path) -> None:
    """`consumerStatus` and `queryMsgById -g -d` for a gRPC client: the broker asks the proxy, which
    answers the running info itself and relays jstack / the message over the Telemetry stream."""
    topic = env.cluster.create_topic(unique("SdkStatus"), queues=1)
    group = env.cluster.create_group(unique("SdkStatusG"))
    config = ClientConfig(env.endpoints)
    (receipt,) = await produce(config, topic, [b"status"], tag="TagA")
    consumed: list[tuple[bytes, str]] = []

    async def listener(message: ReceivedMessage) -> ConsumeResult:
        consumed.append((message.body, message.message_id))
        return ConsumeResult.SUCCESS

    async with AsyncPushConsumer(config, group, {topic: "TagA || TagB"}, listener, long_polling_timeout=1) as consumer:
        await wait_for(lambda: len(consumed) == 1)  # received and acked: the group is online
        client_id = consumer.client_id
        # The admin CLI blocks; run it on a thread so this loop keeps answering Telemetry.
        listing = await asyncio.to_thread(admin_json, env, "consumerStatus", "-g", group, cwd=tmp_path)
        # one connection per proxy the client talks to (two in the two-proxy cluster), one client
        assert {c["clientId"] for c in listing["clients"]} == {client_id}
        info = listing["runningInfo"][client_id]
        assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        assert info["properties"]["consumerGroup"] == group
        assert [(s["topic"], s["subString"], s["tagsSet"]) for s in info["subscriptionSet"]] == [
            (topic, "TagA || TagB", ["TagA", "TagB"])]
        detail = await asyncio.to_thread(admin_run, env, "consumerStatus", "-g", group, "-i", client_id, "-s")
        assert detail.returncode == 0, detail.stderr
        assert "#Consumer jstack#" in detail.stdout and "_receive_loop" in detail.stdout  # the client's own tasks
        direct = await asyncio.to_thread(admin_run, env, "queryMsgById", "-i", receipt.message_id, "-t", topic,
                                         "-g", group, "-d", client_id)
        assert direct.returncode == 0, direct.stderr
        assert "consumeResult=CR_SUCCESS" in direct.stdout
        assert consumed == [(b"status", receipt.message_id)] * 2  # the listener saw it once more
        # getConsumerStatus: a gRPC client keeps no queue offsets of its own; its proxy says so at once
        status = await asyncio.to_thread(admin_json, env, "getConsumerStatus", "-g", group, "-t", topic)
        assert status == []
        gone = await asyncio.to_thread(admin_run, env, "consumerStatus", "-g", group, "-i", "127.0.0.1@nobody")
        assert gone.returncode != 0 and "not online" in gone.stderr + gone.stdout
