"""The Python Remoting client (orbitmq.remoting_client) and Apache's Java one (rocketmq-client 5.5.0)
side by side on OrbitMQ's NameServer and brokers (issue 25's interop items): a Java producer read by
a Python push consumer, a Python producer read by a Java push consumer, and a Python and a Java push
consumer sharing one group's queues.

One JVM for the module (orbitmq.remoting.MixedGroup in tests/interop/java/remoting4, driven over
stdin, one line a command, answering with lines prefixed by the client's id), one cluster for the
module (a NameServer, broker-a and broker-b).
"""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orbitmq.client.api import MessageQueueRef
from orbitmq.common.allocate import AllocateMessageQueueAveragely
from orbitmq.common.message import Message, MessageExt
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.consumer import (
    AsyncDefaultMQPushConsumer,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
)
from orbitmq.remoting_client.producer.producer import AsyncDefaultMQProducer
from tests.sdk.remoting_client.cluster import RemotingCluster, serve_cluster, start_remoting_cluster, unique
from tests.support import jvm

pytestmark = pytest.mark.timeout(300)


class JavaClients:
    """The MixedGroup JVM: commands in on stdin, every output line kept (a reader thread)."""

    def __init__(self, workdir: Path) -> None:
        logs = workdir / "java-client-logs"
        flags = ["-Drocketmq.client.rebalance.waitInterval=1000", f"-Drocketmq.client.logRoot={logs}",
                 "-Drocketmq.client.logLevel=WARN", f"-Duser.home={logs}"]
        self.stderr_path = workdir / "mixed-group.err"
        command = jvm.suite("remoting5").command("orbitmq.remoting.MixedGroup", jvm_flags=flags)
        with open(self.stderr_path, "wb") as err:
            self.popen = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                          text=True, bufsize=1)
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for raw in self.popen.stdout:
            with self._lock:
                self.lines.append(raw.rstrip("\n"))

    def rows(self, cid: str, kind: str) -> list[list[str]]:
        """The fields after ``<cid> <kind>`` of every such line so far."""
        with self._lock:
            lines = list(self.lines)
        return [line.split(" ")[2:] for line in lines if line.split(" ", 2)[:2] == [cid, kind]]

    def context(self) -> str:
        with self._lock:
            out = "\n".join(self.lines[-60:])
        return out + "\n--- JVM stderr ---\n" + self.stderr_path.read_text(errors="replace")[-3000:]

    async def call(self, cid: str, *command: str, timeout: float = 60.0) -> None:  # noqa: ASYNC109
        """Send ``command`` (the client id second) and wait for its DONE without blocking the loop."""
        assert self.popen.stdin is not None and self.popen.poll() is None, self.context()
        done_before = len(self.rows(cid, "DONE"))
        self.popen.stdin.write(" ".join([command[0], cid, *command[1:]]) + "\n")
        self.popen.stdin.flush()
        await wait_for(lambda: len(self.rows(cid, "DONE")) > done_before or bool(self.rows(cid, "ERROR")),
                       timeout, f"{command[0]} {cid}", self.context)
        assert not self.rows(cid, "ERROR"), self.context()

    def close(self) -> None:
        try:
            if self.popen.poll() is None and self.popen.stdin is not None:
                self.popen.stdin.write("quit\n")
                self.popen.stdin.flush()
            self.popen.wait(30)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            if self.popen.poll() is None:
                self.popen.kill()
                self.popen.wait()
            self.reader.join(10)


async def wait_for(predicate: Callable[[], bool], timeout: float = 60.0, what: str = "condition",  # noqa: ASYNC109
                   context: Callable[[], str] = lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{context()}")
        await asyncio.sleep(0.05)


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemotingCluster]:
    cluster = start_remoting_cluster(tmp_path_factory.mktemp("java-python-remoting"))
    yield from serve_cluster(request, cluster, "cluster")


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaClients]:
    clients = JavaClients(tmp_path_factory.mktemp("mixed-group-jvm"))
    try:
        yield clients
    finally:
        clients.close()


def config(cluster: RemotingCluster, **keys: object) -> RemotingClientConfig:
    return RemotingClientConfig(namesrv_addr=cluster.namesrv, client_ip="127.0.0.1", rebalance_interval=1.0,
                                persist_consumer_offset_interval=1.0, heartbeat_broker_interval=2.0, **keys)


def big_body(prefix: str) -> bytes:
    """MixedGroup#big: message 0's body, over 4 KiB so that either client compresses it."""
    unit = f"{prefix}-big-"
    return (unit * (10240 // len(unit) + 1)).encode()


def body_of(prefix: str, i: int) -> bytes:
    return big_body(prefix) if i == 0 else f"{prefix}{i}".encode()


async def test_java_producer_python_consumer(cluster: RemotingCluster, java: JavaClients) -> None:
    """What rocketmq-client sends (tags, keys, user properties, a zlib-compressed body, its unique
    ids) reaches a Python push consumer intact, and the Python group commits its offsets."""
    topic = cluster.create_topic(unique("JtoP"))
    group = cluster.create_group(unique("JtoPG"))
    got: dict[str, MessageExt] = {}

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            got[m.uniq_id_or_msg_id] = m
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = AsyncDefaultMQPushConsumer(group, config(cluster), consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    await consumer.start()
    try:
        await java.call("jprod", "produce", cluster.namesrv, unique("JPG"), topic, "30", "jp")
        sent = {msg_id: key for msg_id, key in java.rows("jprod", "SENT")}
        assert len(sent) == 30
        await wait_for(lambda: set(got) >= set(sent), what="the 30 Java messages", context=java.context)
        assert set(got) == set(sent)
        for msg_id, key in sent.items():
            m, i = got[msg_id], int(key[2:])
            assert (m.topic, m.tags, m.keys, m.get_user_property("n")) == (topic, f"Tag{i % 3}", [key], str(i))
            assert m.body == body_of("jp", i), key
        await java.call("jprod", "stop")

        async def committed(api: object) -> int:
            total = 0
            for addr in cluster.brokers.values():
                for q in range(4):
                    total += max(0, await api.query_consumer_offset(addr, group, topic, q))  # type: ignore[attr-defined]
            return total
        await wait_for(lambda: cluster.api_call(committed) == 30, what="30 committed by the Python group")
    finally:
        await consumer.shutdown()


async def test_python_producer_java_consumer(cluster: RemotingCluster, java: JavaClients) -> None:
    """What the Python producer sends (compressed above 4 KiB, tags, keys, properties, unique ids
    built as MessageClientIDSetter does) is what a Java push consumer receives."""
    topic = cluster.create_topic(unique("PtoJ"))
    group = cluster.create_group(unique("PtoJG"))
    await java.call("jcons", "consume", cluster.namesrv, group, topic, "jcons")
    producer = AsyncDefaultMQProducer(unique("PPG"), config(cluster))
    await producer.start()
    sent: dict[str, int] = {}
    try:
        for i in range(30):
            msg = Message(topic, body_of("pp", i))
            msg.tags, msg.keys = f"Tag{i % 3}", f"pp{i}"
            msg.put_user_property("n", str(i))
            sent[(await producer.send(msg)).msg_id] = i
    finally:
        await producer.shutdown()
    try:
        await wait_for(lambda: {r[0] for r in java.rows("jcons", "GOT")} >= set(sent), what="the Java consumer",
                       context=java.context)
        rows = java.rows("jcons", "GOT")
        assert len(rows) == 30, java.context()  # each once
        for msg_id, broker, queue, reconsume, tags, keys, n, length, sha in rows:
            i = sent[msg_id]
            body = body_of("pp", i)
            assert broker in cluster.brokers and 0 <= int(queue) < 4
            assert (reconsume, tags, keys, n) == ("0", f"Tag{i % 3}", f"pp{i}", str(i))
            assert (int(length), sha) == (len(body), hashlib.sha256(body).hexdigest())
    finally:
        await java.call("jcons", "stop")


@pytest.mark.parametrize("compress_type", ["LZ4", "ZSTD"])
async def test_lz4_and_zstd_bodies_both_ways(cluster: RemotingCluster, java: JavaClients, compress_type: str) -> None:
    """rocketmq.message.compressType: a Java producer's LZ4 or ZSTD body (lz4-java's frame stream,
    zstd-jni's) is inflated by the Python consumer, and the Python producer's by the Java one; both
    set COMPRESSED_FLAG and the type's sysFlag bits, so each side picks the right codec."""
    from orbitmq.common import sysflag
    from orbitmq.common.compression import CompressionType

    topic = cluster.create_topic(unique(f"Zip{compress_type}"))
    got: dict[str, MessageExt] = {}

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            got[m.uniq_id_or_msg_id] = m
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = AsyncDefaultMQPushConsumer(cluster.create_group(unique("ZipPG")), config(cluster),
                                          consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    await consumer.start()
    try:
        cid = f"jzip{compress_type.lower()}"
        await java.call(cid, "produce", cluster.namesrv, unique("ZipJG"), topic, "3", "jz", compress_type)
        sent = {msg_id: key for msg_id, key in java.rows(cid, "SENT")}
        await wait_for(lambda: set(got) >= set(sent), what="the Java messages", context=java.context)
        await java.call(cid, "stop")
        for msg_id, key in sent.items():
            assert got[msg_id].body == body_of("jz", int(key[2:])), key
            assert not got[msg_id].sys_flag & sysflag.COMPRESSED_FLAG  # inflated, flag cleared
    finally:
        await consumer.shutdown()

    # the other way: the Python producer compresses, the Java consumer inflates
    group = cluster.create_group(unique("ZipJCG"))
    jcid = f"jzipc{compress_type.lower()}"
    await java.call(jcid, "consume", cluster.namesrv, group, topic, jcid)
    producer = AsyncDefaultMQProducer(unique("ZipPPG"), config(cluster), compress_type=compress_type)
    assert producer.compress_type is CompressionType.of(compress_type)
    await producer.start()
    try:
        ours = {(await producer.send(Message(topic, big_body(f"pz{i}")))).msg_id: big_body(f"pz{i}")
                for i in range(2)}
    finally:
        await producer.shutdown()
    try:
        await wait_for(lambda: {r[0] for r in java.rows(jcid, "GOT")} >= set(ours), what="the Java consumer",
                       context=java.context)
        rows = {r[0]: r for r in java.rows(jcid, "GOT")}
        for msg_id, body in ours.items():
            length, sha = rows[msg_id][7], rows[msg_id][8]
            assert (int(length), sha) == (len(body), hashlib.sha256(body).hexdigest())
    finally:
        await java.call(jcid, "stop")


async def test_python_and_java_push_consumers_share_a_group(cluster: RemotingCluster, java: JavaClients) -> None:
    """One group, one Python and one Java push consumer: both run AllocateMessageQueueAveragely over
    the same sorted client ids and queues, so their shares are disjoint and cover the 8 queues; each
    message is consumed once, by the owner of its queue; when the Java consumer leaves, the Python
    one takes every queue."""
    topic = cluster.create_topic(unique("Mixed"))
    group = cluster.create_group(unique("MixedG"))
    all_queues = sorted((MessageQueueRef(topic, b, q) for b in cluster.brokers for q in range(4)),
                        key=lambda mq: (mq.topic, mq.broker_name, mq.queue_id))  # MessageQueue#compareTo
    got: dict[bytes, MessageQueueRef] = {}  # body -> the queue it came from

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            assert m.body not in got
            got[m.body] = ctx.message_queue
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    py = AsyncDefaultMQPushConsumer(group, config(cluster, instance_name="py-mixed"),
                                    consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    py.subscribe(topic)
    py.register_message_listener(listener)
    await py.start()
    java_stopped = False
    try:
        await java.call("jmix", "consume", cluster.namesrv, group, topic, "java-mixed")

        def python_share() -> set[MessageQueueRef]:
            return {mq for mq in py.rebalance.process_queue_table if mq.topic == topic}

        def java_alloc() -> list[str]:
            rows = java.rows("jmix", "ALLOC")
            return rows[-1] if rows else []

        def settled() -> bool:
            alloc = java_alloc()
            return (len(alloc) == 3 and len(alloc[1].split(",")) == 2 and len(python_share()) == 4
                    and len(alloc[2].split(",")) == 4)
        await wait_for(settled, what="both consumers holding 4 queues", context=java.context)
        java_cid, cid_all, java_share_text = java_alloc()
        py_cid = py.instance.client_id
        assert cid_all.split(",") == sorted([py_cid, java_cid]), (cid_all, py_cid)
        java_share = {MessageQueueRef(topic, b, int(q)) for b, q in (s.split(":") for s in java_share_text.split(","))}
        assert not java_share & python_share() and java_share | python_share() == set(all_queues)
        avg = AllocateMessageQueueAveragely()  # the same inputs give Python's strategy Java's answer
        assert set(avg.allocate(group, java_cid, all_queues, cid_all.split(","))) == java_share
        assert set(avg.allocate(group, py_cid, all_queues, cid_all.split(","))) == python_share()

        producer = AsyncDefaultMQProducer(unique("PPG"), config(cluster))
        await producer.start()
        try:
            bodies = [f"mx{i}".encode() for i in range(80)]
            for i, body in enumerate(bodies[:40]):
                await producer.send_to_queue(Message(topic, body), all_queues[i % 8])

            def java_got() -> dict[bytes, tuple[str, int]]:
                return {hashes[r[8]]: (r[1], int(r[2])) for r in java.rows("jmix", "GOT") if r[8] in hashes}
            hashes = {hashlib.sha256(b).hexdigest(): b for b in bodies}
            await wait_for(lambda: len(got) + len(java_got()) == 40, what="the first 40", context=java.context)
            assert not set(got) & set(java_got())
            assert len(java.rows("jmix", "GOT")) == len(java_got())  # none twice
            assert set(got.values()) <= python_share()
            assert all(MessageQueueRef(topic, b, q) in java_share for b, q in java_got().values())

            await java.call("jmix", "stop")  # persists its offsets and unregisters: Python takes every queue
            java_stopped = True
            await wait_for(lambda: len(python_share()) == 8, what="the Python consumer owning all 8")
            for i, body in enumerate(bodies[40:]):
                await producer.send_to_queue(Message(topic, body), all_queues[i % 8])
        finally:
            await producer.shutdown()
        await wait_for(lambda: set(got) | set(java_got()) == set(bodies), what="all 80", context=java.context)
        assert set(bodies[40:]) <= set(got)
        assert not set(got) & set(java_got())  # the Java consumer's commits were honoured: nothing twice
    finally:
        if not java_stopped:
            await java.call("jmix", "stop")
        await py.shutdown()


async def test_orderly_python_and_java_consumers_share_a_group(cluster: RemotingCluster, java: JavaClients) -> None:
    """One orderly group, a Python and a Java MessageListenerOrderly consumer: each holds the broker
    locks of its share (LOCK_BATCH_MQ), each queue's messages are consumed in order by its owner;
    when the Java consumer leaves (offsets persisted, UNLOCK_BATCH_MQ), the Python one locks its
    queues and goes on from where it stopped: per queue, every message once, in order, across the
    handover."""
    from orbitmq.remoting_client.consumer import ConsumeOrderlyContext, ConsumeOrderlyStatus

    topic = cluster.create_topic(unique("MixedOrder"))
    group = cluster.create_group(unique("MixedOrderG"), orderly=True)
    all_queues = sorted((MessageQueueRef(topic, b, q) for b in cluster.brokers for q in range(4)),
                        key=lambda mq: (mq.topic, mq.broker_name, mq.queue_id))
    py_seen: dict[MessageQueueRef, list[int]] = {}

    async def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        for m in msgs:
            py_seen.setdefault(ctx.message_queue, []).append(int(m.get_user_property("n")))
        await asyncio.sleep(0.005)
        return ConsumeOrderlyStatus.SUCCESS

    py = AsyncDefaultMQPushConsumer(group, config(cluster, instance_name="py-mixed-orderly"),
                                    consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    py.subscribe(topic)
    py.register_message_listener(listener, orderly=True)
    await py.start()
    java_stopped = False

    def java_seen() -> dict[MessageQueueRef, list[int]]:
        seen: dict[MessageQueueRef, list[int]] = {}
        for r in java.rows("jord", "GOT"):
            if r[5].startswith("ord-"):  # keys ord-<queue index>-<n>
                seen.setdefault(MessageQueueRef(topic, r[1], int(r[2])), []).append(int(r[6]))
        return seen

    def python_locked() -> set[MessageQueueRef]:
        return {mq for mq, pq in py.rebalance.process_queue_table.items() if mq.topic == topic and pq.locked}

    async def send_range(start: int, stop: int) -> None:
        producer = AsyncDefaultMQProducer(unique("OrdPG"), config(cluster))
        await producer.start()
        try:
            for n in range(start, stop):
                for qi, mq in enumerate(all_queues):
                    msg = Message(topic, f"{qi}:{n}".encode())
                    msg.keys = f"ord-{qi}-{n}"
                    msg.put_user_property("n", str(n))
                    await producer.send_to_queue(msg, mq)
        finally:
            await producer.shutdown()

    try:
        await java.call("jord", "consume-orderly", cluster.namesrv, group, topic, "java-mixed-orderly")

        def settled() -> bool:
            rows = java.rows("jord", "ALLOC")
            return bool(rows) and len(rows[-1][1].split(",")) == 2 and len(python_locked()) == 4
        await wait_for(settled, what="both consumers holding and locking 4 queues", context=java.context)
        java_share = {MessageQueueRef(topic, b, int(q))
                      for b, q in (x.split(":") for x in java.rows("jord", "ALLOC")[-1][2].split(","))}
        assert not java_share & python_locked() and java_share | python_locked() == set(all_queues)

        await send_range(0, 15)
        await wait_for(lambda: sum(map(len, py_seen.values())) + sum(map(len, java_seen().values())) == 15 * 8,
                       what="the first 15 of each queue", context=java.context)
        for mq in all_queues:
            owner = java_seen() if mq in java_share else py_seen
            assert owner.get(mq) == list(range(15)), (mq, owner.get(mq))

        await java.call("jord", "stop")
        java_stopped = True
        await wait_for(lambda: len(python_locked()) == 8, what="the Python consumer locking all 8")
        await send_range(15, 30)
        await wait_for(lambda: all(len(py_seen.get(mq, [])) == (15 if mq in java_share else 30)
                                   for mq in all_queues), what="the rest, in Python", context=java.context)
        await asyncio.sleep(0.5)
        for mq in all_queues:
            if mq in java_share:  # Java had 0..14, Python goes on at 15: nothing again, nothing skipped
                assert java_seen()[mq] == list(range(15)) and py_seen[mq] == list(range(15, 30)), mq
            else:
                assert py_seen[mq] == list(range(30)), mq
    finally:
        if not java_stopped:
            await java.call("jord", "stop")
        await py.shutdown()
