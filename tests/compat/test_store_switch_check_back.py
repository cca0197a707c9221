"""A live check-back after the store switch (issue 24, item 2): the broker that takes over a store
asks a live producer about the half message another kind of broker wrote there.

Each test is real processes on 127.0.0.1: an OrbitMQ NameServer, the writing broker (OrbitMQ or
Apache RocketMQ 5.5.0, tests/support/apache.py), and a Remoting TransactionMQProducer
(sdk/remoting_client) whose local transaction answers UNKNOW, so that its END_TRANSACTION leaves
the half message open. The writer never checks (transactionCheckInterval of ten minutes); it is
stopped cleanly or by kill -9, and the other kind starts on the same storePathRootDir under the
same brokerName with a short transactionCheckInterval and transactionTimeOut. The producer,
refreshing its route and heartbeating every second, registers its group with the new broker,
which finds the half message in the store (RMQ_SYS_TRANS_HALF_TOPIC from CID_RMQ_SYS_TRANS's
offset, no op in RMQ_SYS_TRANS_OP_HALF_TOPIC), sends CHECK_TRANSACTION_STATE
(TransactionalMessageCheckService / AbstractTransactionalMessageCheckListener#sendCheckMessage),
and commits on the producer's COMMIT answer: the message is then in the real topic exactly once,
and the check scan has passed every half message, so no later check can commit it again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from orbitmq.client import MQClientAPI
from orbitmq.common import fastjson
from orbitmq.common.message import Message, MessageConst, MessageExt
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting import headers as h
from orbitmq.remoting_client import RemotingClientConfig
from orbitmq.remoting_client.producer import AsyncTransactionMQProducer, LocalTransactionState
from tests.support import ManagedProcess, ProcessRunner, running, start_broker, start_namesrv
from tests.support.apache import Apache
from tests.support.net import free_port_pair
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(240)

BROKER_NAME = "broker-switch"
SEGMENT = 4 * 1024 * 1024  # both kinds: CommitLog files named by the same start offsets
TOPIC = "SwitchCheckTopic"
READER = "SwitchReader"
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"  # TransactionalMessageUtil#buildHalfTopic
CHECK_GROUP = "CID_RMQ_SYS_TRANS"  # TransactionalMessageUtil#buildConsumerGroup
# The writer: no check in the test's time (both kinds wait one interval before the first scan).
WRITER_KEYS = {"transactionCheckInterval": 600_000, "mappedFileSizeCommitLog": SEGMENT}
# The taker: a scan every 2 s of half messages older than 2 s; transactionCheckMax (15 scans,
# each counting even with no producer online yet) leaves 30 s for the producer to find it. Apache
# writes a commit's op message within transactionOpBatchInterval (3 s by default, longer than a
# scan): 100 ms, so that the next scan sees the half message closed.
TAKER_KEYS = {"transactionCheckInterval": 2000, "transactionTimeOut": 2000, "transactionCheckMax": 15,
              "mappedFileSizeCommitLog": SEGMENT}
APACHE_ONLY = {"transactionOpBatchInterval": 100}
TIMEOUT = 10.0


@dataclass
class Check:
    addr: str
    msg: MessageExt
    header: h.CheckTransactionStateRequestHeader


class RecordingProducer(AsyncTransactionMQProducer):
    """Remembers which broker checked back which message, then answers as upstream does."""

    checks: list[Check]

    async def check_transaction_state(self, addr: str, msg: MessageExt,
                                      header: h.CheckTransactionStateRequestHeader) -> None:
        self.checks.append(Check(addr, msg, header))
        await super().check_transaction_state(addr, msg, header)


class UnknownThenCommit:
    """The local transaction ends UNKNOW (the half stays open); a check-back learns COMMIT."""

    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


@dataclass
class Env:
    runner: ProcessRunner
    apache: Apache
    namesrv: str
    root: Path


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    with running(tmp_path) as runner:
        _, namesrv = start_namesrv(runner)
        yield Env(runner, Apache(runner), namesrv, tmp_path / "store")


def _start(e: Env, kind: str, name: str, keys: dict[str, object]) -> tuple[ManagedProcess, str]:
    if kind == "orbitmq":
        return start_broker(e.runner, e.runner.workdir, e.namesrv, name, port=free_port_pair(), store=e.root,
                            brokerName=BROKER_NAME, **keys)
    broker = e.apache.broker(e.namesrv, name, broker_name=BROKER_NAME, store=e.root, **keys, **APACHE_ONLY)
    return broker.process, broker.addr


def _stop(proc: ManagedProcess, kind: str, kill: bool, root: Path) -> None:
    if kill:
        proc.kill()
        assert (root / "abort").exists(), "a killed broker leaves its abort file"
        return
    # Apache's JVM exits 143 after its shutdown hook ran on SIGTERM.
    assert proc.stop(timeout=60) in ((0,) if kind == "orbitmq" else (0, 143)), proc.log_tail()


def _topics_json(root: Path) -> set[str]:
    try:
        return set(fastjson.loads((root / "config" / "topics.json").read_text())["topicConfigTable"])
    except (OSError, ValueError, KeyError):
        return set()


async def _topic_bodies(api: MQClientAPI, addr: str) -> list[bytes]:
    result = await api.pull_message(addr, h.PullMessageRequestHeader(
        consumer_group=READER, topic=TOPIC, queue_id=0, queue_offset=0, max_msg_nums=32, sys_flag=0x4,
        commit_offset=0, suspend_timeout_millis=0, subscription="*", sub_version=0, expression_type="TAG"))
    return [m.body for m in result.messages]


async def _routed_to(api: MQClientAPI, namesrv: str, addr: str) -> bool:
    route = await api.get_topic_route(namesrv, TOPIC)
    return any(b.broker_addrs.get(0) == addr for b in route.broker_datas)


async def _switch_and_check_back(e: Env, writer: str, taker: str, kill: bool) -> None:
    api = MQClientAPI(timeout=TIMEOUT)
    config = RemotingClientConfig(namesrv_addr=e.namesrv, client_ip="127.0.0.1", poll_name_server_interval=1.0,
                                  heartbeat_broker_interval=1.0)
    producer = RecordingProducer("SwitchTxPG", config, transaction_listener=UnknownThenCommit())
    producer.checks = []
    try:
        proc, writer_addr = await asyncio.to_thread(_start, e, writer, f"{writer}-writer", WRITER_KEYS)
        await api.create_topic(writer_addr, TopicConfig(topic_name=TOPIC, read_queue_nums=1, write_queue_nums=1))
        await wait_until(lambda: _routed_to(api, e.namesrv, writer_addr), "the topic routed to the writer", 30)
        await producer.start()
        body = f"half from {writer}".encode()
        sent = await producer.send_message_in_transaction(Message(TOPIC, body, properties={"KEYS": "switch-tx"}))
        assert sent.local_transaction_state == LocalTransactionState.UNKNOW
        uniq = sent.msg_id
        assert await _topic_bodies(api, writer_addr) == [], "an open half message is not in the real topic"
        if kill and writer == "orbitmq":
            # OrbitMQ journals a topic change (topics.json.journal, read by OrbitMQ alone) and
            # rewrites topics.json once no change came for 0.5 s (docs/compatibility.md, "Topic
            # and group metadata at scale"): a kill -9 before that hides the topic from Apache.
            async def snapshot_has_topic() -> bool:
                return TOPIC in await asyncio.to_thread(_topics_json, e.root)
            await wait_until(snapshot_has_topic, "the topic in topics.json", 10)
        await asyncio.to_thread(_stop, proc, writer, kill, e.root)
        assert producer.checks == [], f"the writer checked back: {producer.checks}"

        proc, taker_addr = await asyncio.to_thread(_start, e, taker, f"{taker}-taker", TAKER_KEYS)
        await wait_until(lambda: _routed_to(api, e.namesrv, taker_addr), "the topic routed to the taker", 30)

        async def checked() -> bool:
            return bool(producer.checks)
        await wait_until(checked, f"a check-back from {taker}", 40)
        check = producer.checks[0]
        assert check.addr == taker_addr, f"checked by {check.addr}, not the taker {taker_addr}"
        assert check.msg.topic == TOPIC and check.msg.body == body
        assert check.msg.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == uniq
        assert check.header.msg_id == uniq

        async def committed() -> list[bytes]:
            return await _topic_bodies(api, taker_addr)
        await wait_until(committed, "the checked message in the real topic", 20)

        async def scanned_past_all_halves() -> bool:
            # TransactionalMessageServiceImpl#check commits CID_RMQ_SYS_TRANS's offset up to the
            # first half message still open: at the queue's end, none is left to check.
            end = await api.get_max_offset(taker_addr, HALF_TOPIC, 0)
            return await api.query_consumer_offset(taker_addr, CHECK_GROUP, HALF_TOPIC, 0) == end
        await wait_until(scanned_past_all_halves, "the check scan past every half message", 30)
        assert await _topic_bodies(api, taker_addr) == [body], "committed exactly once"
        assert {c.addr for c in producer.checks} == {taker_addr}, "only the taker checks back"
    finally:
        await producer.shutdown()
        await api.close()


@pytest.mark.parametrize(("writer", "taker", "kill"), [
    ("orbitmq", "apache", False), ("orbitmq", "apache", True),
    ("apache", "orbitmq", False), ("apache", "orbitmq", True)],
    ids=["orbitmq-to-apache-clean", "orbitmq-to-apache-kill9", "apache-to-orbitmq-clean", "apache-to-orbitmq-kill9"])
def test_taker_checks_back_the_open_half_message(env: Env, writer: str, taker: str, kill: bool) -> None:
    asyncio.run(_switch_and_check_back(env, writer, taker, kill))
