"""A store either broker can read (issue 24, part 2): OrbitMQ's broker and Apache RocketMQ 5.5.0's
(tests/support/apache.py) take turns on one store directory.

One store, one brokerName, four hand-overs, each hop a real process on 127.0.0.1:

    OrbitMQ --clean stop--> Apache --clean stop--> OrbitMQ --kill -9--> Apache --kill -9--> OrbitMQ

Every broker writes a generation of data before it goes: messages in several topics and queues
with keys, tags and a user property, a batch, a compressed body over 4 KiB (sysFlag
COMPRESSED|ZLIB), a topic and a subscription group of its own, consumer offsets, a delay-level
message and a timer message still due, and two transactional half messages, one committed and one
left open. The next broker, started on the same storePathRootDir (CommitLog, ConsumeQueue,
IndexFile, checkpoint, abort file, ``config/*.json``, timerwheel/timerlog/timercheck), must serve
every generation so far: each queue read back by offset (PULL_MESSAGE) exactly as written, each
key found (QUERY_MESSAGE), the topics, groups and offsets kept, the delayed and timer messages
delivered once, and the open half message committed by END_TRANSACTION to it.

Before a kill -9 the test waits until the broker has persisted what its periodic tasks persist
(consumerOffset.json, delayOffset.json every flushConsumerOffsetInterval/flushDelayOffsetInterval on
both kinds), then sends what is due and kills at once; the messages themselves need no wait
(ASYNC_FLUSH writes them to the page cache, which a kill does not lose).
"""

from __future__ import annotations

import asyncio
import os
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orbitmq.client import MQClientAPI
from orbitmq.common import fastjson
from orbitmq.common.message import Message
from orbitmq.common.message_id import decode_offset_message_id
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting import headers as h
from tests.support import ManagedProcess, ProcessRunner, running, start_broker
from tests.support.apache import Apache
from tests.support.pulling import pull_queue

BROKER_NAME = "broker-store"
# Both kinds with the same segment size: a CommitLog file's name is its start offset.
SEGMENT = 4 * 1024 * 1024
TOPIC_A, TOPIC_B = "StoreTopicA", "StoreTopicB"  # 4 and 2 queues, appended to by every broker
TOPIC_DELAY, TOPIC_TX = "StoreTopicDelay", "StoreTopicTx"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"  # TransactionalMessageUtil#buildOpTopic
READER = "StoreReader"  # the group the checks pull with
PRODUCER = "StorePG"
COMPRESSED_ZLIB = 0x1 | (3 << 8)  # MessageSysFlag.COMPRESSED_FLAG | CompressionType.ZLIB
HALF_PREPARED, COMMIT = 0x4, 0x8  # MessageSysFlag TRANSACTION_PREPARED_TYPE / COMMIT_TYPE
DELAY_LEVEL = 3  # 10 s: still due when the broker stops, delivered by the next one
DUE_IN_MS = 10_000
# timerPrecisionMs (both kinds' default): a timer message's slot is its deliver time rounded down
# to it, so it may come out this much before its TIMER_DELIVER_MS.
TIMER_PRECISION_MS = 1_000
DELAY_LEVEL_MS = 10_000  # messageDelayLevel's third level
# Apache writes the op messages that close half messages in batches, every
# transactionOpBatchInterval (3 s): shorter, so that a commit is on disk before the broker stops.
APACHE_KEYS = {"transactionOpBatchInterval": "100", "mappedFileSizeCommitLog": SEGMENT}
TIMEOUT = 5.0
# Hashed as Java does (UTF-16 code units, a surrogate pair for the emoji) by both kinds, for the
# ConsumeQueue's tagsCode and the IndexFile's key slots.
UNICODE_TAG = "tag-ü-\U0001f600"


@dataclass
class Written:
    """What the brokers so far wrote, as the next one must serve it."""

    queues: dict[tuple[str, int], list[tuple[bytes, str, str | None, str | None, int]]] = field(default_factory=dict)
    topics: set[str] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)  # (group, topic, queue) -> offset
    delayed: list[bytes] = field(default_factory=list)  # due: delivered by the next broker
    delivered: list[bytes] = field(default_factory=list)  # to TOPIC_DELAY so far
    due_ms: dict[bytes, int] = field(default_factory=dict)  # when each delayed/timer message may come due
    killed_at_ms: int = 0  # when the last broker was killed with kill -9 (0: stopped cleanly)
    # Due before a kill -9: delivered at least once, so perhaps twice (both kinds flush their delay
    # and timer progress periodically; what was delivered after the last flush comes again).
    may_repeat: set[bytes] = field(default_factory=set)
    committed: list[bytes] = field(default_factory=list)  # to TOPIC_TX so far
    open_half: tuple[str, int, int, bytes] | None = None  # (msg id, queue offset, CommitLog offset, body)
    generation: int = 0


@dataclass
class Store:
    runner: ProcessRunner
    apache: Apache
    root: Path
    written: Written
    broker: ManagedProcess | None = None
    addr: str = ""
    kind: str = ""
    hops: list[str] = field(default_factory=list)
    broken: str = ""  # the hop that failed: the later ones cannot run on what it left

    def start(self, kind: str) -> None:
        name = f"{kind}-{len(self.hops)}"
        if kind == "orbitmq":
            self.broker, self.addr = start_broker(self.runner, self.runner.workdir, "", name, store=self.root,
                                                  brokerName=BROKER_NAME, mappedFileSizeCommitLog=SEGMENT)
        else:
            broker = self.apache.broker("", name, broker_name=BROKER_NAME, store=self.root, **APACHE_KEYS)
            self.broker, self.addr = broker.process, broker.addr
        self.kind = kind
        self.hops.append(name)

    def stop(self, kill: bool) -> None:
        assert self.broker is not None
        if kill:
            self.written.killed_at_ms = int(time.time() * 1000)
            self.broker.kill()
            assert (self.root / "abort").exists(), "a killed broker leaves its abort file"
        else:
            self.written.killed_at_ms = 0
            # Apache's JVM exits 143 after its shutdown hook ran on SIGTERM.
            codes = (0,) if self.kind == "orbitmq" else (0, 143)
            assert self.broker.stop(timeout=60) in codes, self.broker.log_tail()
            assert not (self.root / "abort").exists(), f"{self.kind} left the abort file after a clean stop"
        self.broker = None


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    workdir = tmp_path_factory.mktemp("store-interchange")
    with running(workdir) as runner:
        yield Store(runner, Apache(runner), workdir / "store", Written())


# ---- writing ------------------------------------------------------------------------------------

async def _write_generation(api: MQClientAPI, addr: str, w: Written, first: bool, root: Path, kill: bool) -> None:
    """One broker's generation g: see the module docstring. Before a kill, what is due is sent
    only once the periodic flushes hold everything else, and the kill follows at once: a due
    message delivered between the last flush of delayOffset.json and the kill would be delivered
    again (at least once, on both kinds)."""
    g = w.generation = w.generation + 1
    if first:
        for topic, queues in ((TOPIC_A, 4), (TOPIC_B, 2), (TOPIC_DELAY, 1), (TOPIC_TX, 1)):
            await api.create_topic(addr, TopicConfig(topic_name=topic, read_queue_nums=queues, write_queue_nums=queues))
            w.topics.add(topic)
        await api.create_subscription_group(addr, SubscriptionGroupConfig(group_name=READER))
        w.groups.add(READER)
    own_topic, own_group = f"StoreTopicG{g}", f"StoreGroupG{g}"
    await api.create_topic(addr, TopicConfig(topic_name=own_topic, read_queue_nums=1, write_queue_nums=1))
    await api.create_subscription_group(addr, SubscriptionGroupConfig(group_name=own_group))
    w.topics.add(own_topic)
    w.groups.add(own_group)

    def expect(topic: str, queue: int, body: bytes, keys: str, tags: str | None, prop: str | None,
               sys_flag: int = 0) -> None:
        w.queues.setdefault((topic, queue), []).append((body, keys, tags, prop, sys_flag))

    for j in range(8):
        topic, queue = (TOPIC_A, j % 4) if j % 2 else (TOPIC_B, j % 2)
        body, keys, tags = f"g{g}-m{j}".encode(), f"g{g}-key{j} g{g}-alt{j}", f"tag{j % 3}"
        props = {"KEYS": keys, "TAGS": tags, "storeProp": f"{g}.{j}"}
        result = await api.send_message(addr, BROKER_NAME, Message(topic=topic, body=body, properties=props),
                                        PRODUCER, queue)
        assert result.queue_offset == len(w.queues.get((topic, queue), []))
        expect(topic, queue, body, keys, tags, f"{g}.{j}")
    batch = [Message(topic=TOPIC_B, body=f"g{g}-batch{i}".encode(), properties={"KEYS": f"g{g}-bkey{i}"})
             for i in range(4)]
    await api.send_batch(addr, BROKER_NAME, batch, PRODUCER, 1)
    for m in batch:
        expect(TOPIC_B, 1, m.body, m.properties["KEYS"], None, None)
    big = zlib.compress(b"compressible " * 1000 + os.urandom(6000))
    assert len(big) > 4096
    await api.send_message(addr, BROKER_NAME, Message(topic=TOPIC_A, body=big, properties={
        "KEYS": f"g{g}-big", "TAGS": "big"}), PRODUCER, 0, sys_flag=COMPRESSED_ZLIB)
    expect(TOPIC_A, 0, big, f"g{g}-big", "big", None, COMPRESSED_ZLIB)
    for j, tags in enumerate((UNICODE_TAG, "plain", UNICODE_TAG)):  # queue 2 of TOPIC_A
        body, keys = f"g{g}-u{j}".encode(), f"g{g}-ключ{j}-\U0001f511"
        await api.send_message(addr, BROKER_NAME, Message(topic=TOPIC_A, body=body, properties={
            "KEYS": keys, "TAGS": tags}), PRODUCER, 2)
        expect(TOPIC_A, 2, body, keys, tags, None)
    await api.send_message(addr, BROKER_NAME, Message(topic=own_topic, body=b"own", properties={"KEYS": f"g{g}-own"}),
                           PRODUCER, 0)
    expect(own_topic, 0, b"own", f"g{g}-own", None, None)

    for queue in range(4):  # the group's committed offsets: how far each queue was consumed
        offset = len(w.queues.get((TOPIC_A, queue), [])) - queue % 2
        await api.update_consumer_offset(addr, own_group, TOPIC_A, queue, offset)
        w.offsets[(own_group, TOPIC_A, queue)] = offset
    if kill:
        await _persisted(root, w)

    now = int(time.time() * 1000)
    for body, props in ((f"g{g}-delayed".encode(), {"DELAY": str(DELAY_LEVEL)}),
                        (f"g{g}-timer".encode(), {"TIMER_DELIVER_MS": str(now + DUE_IN_MS)})):
        await api.send_message(addr, BROKER_NAME, Message(topic=TOPIC_DELAY, body=body, properties={
            "KEYS": body.decode(), **props}), PRODUCER, 0)
        w.delayed.append(body)
        # the earliest moment either broker may deliver it
        w.due_ms[body] = now + (DUE_IN_MS - TIMER_PRECISION_MS if "TIMER_DELIVER_MS" in props else DELAY_LEVEL_MS)

    halves = []
    for i in range(2):
        body = f"g{g}-tx{i}".encode()
        uniq = f"{g:08X}{i:024X}"
        result = await api.send_message(addr, BROKER_NAME, Message(topic=TOPIC_TX, body=body, properties={
            "KEYS": body.decode(), "TRAN_MSG": "true", "PGROUP": PRODUCER, "UNIQ_KEY": uniq}),
            PRODUCER, 0, sys_flag=HALF_PREPARED)
        halves.append((result.msg_id, result.queue_offset, decode_offset_message_id(result.offset_msg_id)[2], body))
    await _commit(api, addr, halves[0], w)
    w.open_half = halves[1]


async def _commit(api: MQClientAPI, addr: str, half: tuple[str, int, int, bytes], w: Written) -> None:
    """END_TRANSACTION (one-way) commit, returned once both the message and the op message that
    closes the half message are in the store: a broker stopped before would not have written them."""
    msg_id, queue_offset, commit_log_offset, body = half
    ops = len(await _pull_all(api, addr, OP_TOPIC, 0))
    await api.end_transaction(addr, h.EndTransactionRequestHeader(
        producer_group=PRODUCER, tran_state_table_offset=queue_offset, commit_log_offset=commit_log_offset,
        commit_or_rollback=COMMIT, msg_id=msg_id, topic=TOPIC_TX, transaction_id=msg_id))
    w.committed.append(body)
    got = sorted(await _bodies_soon(api, addr, TOPIC_TX, len(w.committed), 10))
    assert got == sorted(w.committed), "transactional messages"
    deadline = time.monotonic() + 10
    while len(await _pull_all(api, addr, OP_TOPIC, 0)) == ops:
        assert time.monotonic() < deadline, "no op message for the committed half message in 10 s"
        await asyncio.sleep(0.1)


# ---- reading ------------------------------------------------------------------------------------

async def _pull_all(api: MQClientAPI, addr: str, topic: str, queue: int, tags: str = "*") -> list:
    return await pull_queue(api, addr, READER, topic, queue, tags=tags)


async def _bodies_soon(api: MQClientAPI, addr: str, topic: str, want: int, timeout: float) -> list[bytes]:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while True:
        bodies = [m.body for m in await _pull_all(api, addr, topic, 0)]
        if len(bodies) >= want or time.monotonic() > deadline:
            return bodies
        await asyncio.sleep(0.5)


async def _check_everything(api: MQClientAPI, addr: str, w: Written, kind: str) -> None:
    for (topic, queue), expected in sorted(w.queues.items()):
        got = [(m.body, m.properties.get("KEYS"), m.properties.get("TAGS"), m.properties.get("storeProp"),
                m.sys_flag) for m in await _pull_all(api, addr, topic, queue)]
        assert got == expected, f"{kind}: {topic}:{queue} read by offset differs"
        for body, keys, *_ in expected:
            for key in keys.split(" "):
                found = await api.query_message(addr, topic, key, 32, 0, int(time.time() * 1000) + 60_000)
                assert [m.body for m in found] == [body], f"{kind}: QUERY_MESSAGE {topic} key {key}"
    tagged = [m.body for m in await _pull_all(api, addr, TOPIC_A, 2, f"{UNICODE_TAG} || nothing")]
    assert tagged == [b for b, _, t, _, _ in w.queues[(TOPIC_A, 2)] if t == UNICODE_TAG], (
        f"{kind}: tag filter over another broker's tagsCode (String.hashCode of a non-BMP tag)")
    big = [b for (t, _), msgs in w.queues.items() for b, _, _, _, f in msgs if f == COMPRESSED_ZLIB]
    assert all(zlib.decompress(b).startswith(b"compressible ") for b in big)

    topics = set(await api.get_all_topic_config(addr))
    assert w.topics <= topics, f"{kind}: topics lost: {w.topics - topics}"
    assert (await api.get_topic_config(addr, TOPIC_A)).read_queue_nums == 4
    groups = set(await api.get_all_subscription_group_config(addr))
    assert w.groups <= groups, f"{kind}: groups lost: {w.groups - groups}"
    for (group, topic, queue), offset in sorted(w.offsets.items()):
        assert await api.query_consumer_offset(addr, group, topic, queue) == offset, (
            f"{kind}: {group}'s offset of {topic}:{queue}")

    # The delayed and timer messages the previous broker left due: delivered, each once (after a
    # kill -9, one that came due before the kill at least once: Written.may_repeat).
    if w.killed_at_ms:
        w.may_repeat |= {b for b in w.delayed if w.due_ms[b] <= w.killed_at_ms}
    want = sorted(w.delivered + w.delayed)
    deadline = time.monotonic() + 45
    while True:
        got = sorted(m.body for m in await _pull_all(api, addr, TOPIC_DELAY, 0))
        if _delay_topic_holds(got, want, w.may_repeat) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert _delay_topic_holds(got, want, w.may_repeat), f"{kind}: delayed/timer messages {got} != {want}"
    w.delivered, w.delayed = want, []
    # The half message left open: END_TRANSACTION to this broker finds it in the store and commits.
    assert w.open_half is not None
    committed = sorted(await _bodies_soon(api, addr, TOPIC_TX, len(w.committed), 10))
    assert committed == sorted(w.committed), f"{kind}: transactional messages"
    await _commit(api, addr, w.open_half, w)
    w.open_half = None


async def _persisted(root: Path, w: Written) -> None:
    """Until consumerOffset.json has every committed offset and delayOffset.json every delivered
    delay-level message; then the timer checkpoint's next flush (every second)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            offsets = fastjson.loads((root / "config" / "consumerOffset.json").read_text())["offsetTable"]
            delays = fastjson.loads((root / "config" / "delayOffset.json").read_text())["offsetTable"]
            persisted = (all(offsets.get(f"{t}@{g}", {}).get(str(q)) == o for (g, t, q), o in w.offsets.items())
                         and int(delays.get(str(DELAY_LEVEL), 0)) == len(w.delivered) // 2)
        except (OSError, ValueError, KeyError):
            persisted = False
        if persisted:
            break
        assert time.monotonic() < deadline, "consumerOffset.json/delayOffset.json not persisted in 30 s"
        await asyncio.sleep(0.5)
    await asyncio.sleep(2)


def _delay_topic_holds(got: list[bytes], want: list[bytes], may_repeat: set[bytes]) -> bool:
    """Every wanted message, and beyond them at most one more copy of a ``may_repeat`` one."""
    extra = Counter(got) - Counter(want)
    return Counter(got) >= Counter(want) and set(extra) <= may_repeat and all(n == 1 for n in extra.values())


async def _nothing_due_delivered(api: MQClientAPI, addr: str, w: Written) -> None:
    got = sorted(m.body for m in await _pull_all(api, addr, TOPIC_DELAY, 0))
    assert _delay_topic_holds(got, sorted(w.delivered), w.may_repeat) and not set(got) & set(w.delayed), (
        "a delayed message was delivered before its time")


def _hop(store: Store, kind: str, kill_this: bool | None) -> None:
    """Start ``kind`` on the store, check every generation so far, then (unless ``kill_this`` is
    None: the last hop) write one more and stop it, cleanly or by kill -9."""
    assert not store.broken, f"hop {store.broken} failed: nothing to hand over"
    try:
        _run_hop(store, kind, kill_this)
    except BaseException:
        store.broken = store.hops[-1] if store.hops else kind
        if store.broker is not None:
            store.broker.kill()  # never two brokers on one store
        raise


def _run_hop(store: Store, kind: str, kill_this: bool | None) -> None:
    store.start(kind)

    async def body() -> None:
        api = MQClientAPI(timeout=TIMEOUT)
        try:
            if store.written.generation:
                await _check_everything(api, store.addr, store.written, f"{kind} after {store.hops[-2]}")
            if kill_this is not None:
                await _write_generation(api, store.addr, store.written, not store.written.generation, store.root,
                                        kill_this)
                await _nothing_due_delivered(api, store.addr, store.written)
        finally:
            await api.close()

    run(body())
    if kill_this is not None:
        store.stop(kill_this)


# The hops run in this order, each on what the previous left (tests/compat runs in one process).
def test_orbitmq_writes_and_stops_cleanly(store: Store) -> None:
    _hop(store, "orbitmq", kill_this=False)


def test_apache_reads_orbitmq_store_after_clean_stop(store: Store) -> None:
    assert store.hops == ["orbitmq-0"], "runs after test_orbitmq_writes_and_stops_cleanly"
    _hop(store, "apache", kill_this=False)


def test_orbitmq_reads_apache_store_after_clean_stop(store: Store) -> None:
    assert store.hops == ["orbitmq-0", "apache-1"], "runs after the previous hops"
    _hop(store, "orbitmq", kill_this=True)


def test_apache_reads_orbitmq_store_after_kill9(store: Store) -> None:
    assert store.hops[-1] == "orbitmq-2", "runs after the previous hops"
    _hop(store, "apache", kill_this=True)


def test_orbitmq_reads_apache_store_after_kill9(store: Store) -> None:
    assert store.hops[-1] == "apache-3", "runs after the previous hops"
    _hop(store, "orbitmq", kill_this=None)  # the module's runner stops it
    assert store.written.generation == 4
