"""Light Message Queue (RIP-28) beside Apache RocketMQ 5.5.0's broker (tests/support/apache.py).

The same sends (a normal topic, INNER_MULTI_DISPATCH naming two LMQs) go to each kind with
enableLmq and enableMultiDispatch on: both answer the same pulls of each LMQ (bodies, the stored
INNER_MULTI_QUEUE_OFFSET, queue bounds) and the same LMQ group offset. Then Apache's broker
starts on the store OrbitMQ left: it serves OrbitMQ's LMQ queues, reloads
lmqConsumerOffset.json, and gives the next multi-dispatch message the offsets that follow.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from orbitmq.common.message import MessageConst, properties_to_string
from orbitmq.common.message_codec import decode_records
from orbitmq.common.sysflag import build_pull_sys_flag
from orbitmq.remoting import RemotingClient, RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.support import ManagedProcess, ProcessRunner, running, start_broker
from tests.support.apache import Apache

BROKER_NAME = "broker-lmq"
TOPIC = "LmqCompatTopic"
GROUP = "%LMQ%compatGroup"
MULTI = MessageConst.INNER_MULTI_DISPATCH
OFFSETS = MessageConst.INNER_MULTI_QUEUE_OFFSET
# Both kinds with the same CommitLog segment size: a segment's name is its start offset.
LMQ_KEYS = {"enableLmq": "true", "enableMultiDispatch": "true", "mappedFileSizeCommitLog": str(4 * 1024 * 1024)}
SENDS = [(b"m0", "%LMQ%a,%LMQ%b"), (b"m1", "%LMQ%a,%LMQ%b"), (b"only-b", "%LMQ%b"), (b"m3", "%LMQ%a,%LMQ%b")]


@dataclass
class Kinds:
    runner: ProcessRunner
    apache: Apache
    workdir: Path


@pytest.fixture(scope="module")
def kinds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kinds]:
    workdir = tmp_path_factory.mktemp("lmq-compat")
    with running(workdir) as runner:
        yield Kinds(runner, Apache(runner), workdir)


def start(kinds: Kinds, kind: str, name: str, store: Path) -> tuple[ManagedProcess, str]:
    if kind == "orbitmq":
        return start_broker(kinds.runner, kinds.workdir, "", name, store=store, brokerName=BROKER_NAME, **LMQ_KEYS)
    broker = kinds.apache.broker("", name, broker_name=BROKER_NAME, store=store, **LMQ_KEYS)
    return broker.process, broker.addr


def stop(kind: str, proc: ManagedProcess) -> None:
    # Apache's JVM exits 143 after its shutdown hook ran on SIGTERM.
    assert proc.stop(timeout=60) in ((0,) if kind == "orbitmq" else (0, 143)), proc.log_tail()


async def invoke(client: RemotingClient, addr: str, code: int, fields: dict[str, str],
                 body: bytes | None = None) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, fields, body), 10)


async def send(client: RemotingClient, addr: str, body: bytes, lmq: str) -> RemotingCommand:
    props = {"UNIQ_KEY": f"{time.time_ns():032X}", "TAGS": "t", MULTI: lmq}
    return await invoke(client, addr, RequestCode.SEND_MESSAGE_V2, {
        "a": "PG_LMQ", "b": TOPIC, "c": "TBW102", "d": "1", "e": "0", "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string(props), "j": "0",
        "k": "false", "m": "false"}, body)


async def observe(client: RemotingClient, addr: str) -> dict[str, object]:
    """What a reader sees of each LMQ: its bounds and every message's body and offsets."""
    seen: dict[str, object] = {}
    for lmq in ("%LMQ%a", "%LMQ%b"):
        bounds = []
        for code in (RequestCode.GET_MIN_OFFSET, RequestCode.GET_MAX_OFFSET):
            response = await invoke(client, addr, code, {"topic": lmq, "queueId": "0"})
            assert response.code == ResponseCode.SUCCESS, response.remark
            bounds.append(int(response.ext_fields["offset"]))
        sys_flag = build_pull_sys_flag(commit_offset=False, suspend=False, subscription=True, class_filter=False)
        response = await invoke(client, addr, RequestCode.PULL_MESSAGE, {
            "consumerGroup": GROUP, "topic": lmq, "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
            "sysFlag": str(sys_flag), "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*",
            "subVersion": "0", "expressionType": "TAG"})
        assert response.code == ResponseCode.SUCCESS, (lmq, response.code, response.remark)
        seen[lmq] = (bounds, [(m.body, m.properties.get(MULTI), m.properties.get(OFFSETS))
                              for m in decode_records(response.body)])
    response = await invoke(client, addr, RequestCode.QUERY_CONSUMER_OFFSET,
                            {"consumerGroup": GROUP, "topic": "%LMQ%a", "queueId": "0"})
    seen["groupOffset"] = (response.code, response.ext_fields.get("offset"))
    return seen


async def write_and_observe(addr: str) -> dict[str, object]:
    async with RemotingClient() as client:
        response = await invoke(client, addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
            "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
        assert response.code == ResponseCode.SUCCESS, response.remark
        for body, lmq in SENDS:
            response = await send(client, addr, body, lmq)
            assert response.code == ResponseCode.SUCCESS, response.remark
        response = await invoke(client, addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                                {"consumerGroup": GROUP, "topic": "%LMQ%a", "queueId": "0", "commitOffset": "2"})
        assert response.code == ResponseCode.SUCCESS, response.remark
        for _ in range(200):  # dispatch is asynchronous on both kinds
            seen = await observe(client, addr)
            if seen["%LMQ%b"][0][1] == 4:
                return seen
            await asyncio.sleep(0.05)
        return seen


EXPECTED = {
    "%LMQ%a": ([0, 3], [(b"m0", "%LMQ%a,%LMQ%b", "0,0"), (b"m1", "%LMQ%a,%LMQ%b", "1,1"),
                        (b"m3", "%LMQ%a,%LMQ%b", "2,3")]),
    "%LMQ%b": ([0, 4], [(b"m0", "%LMQ%a,%LMQ%b", "0,0"), (b"m1", "%LMQ%a,%LMQ%b", "1,1"),
                        (b"only-b", "%LMQ%b", "2"), (b"m3", "%LMQ%a,%LMQ%b", "2,3")]),
    "groupOffset": (ResponseCode.SUCCESS, "2"),
}


def test_same_pull_results_on_both_kinds(kinds: Kinds) -> None:
    results = {}
    for kind in ("apache", "orbitmq"):
        proc, addr = start(kinds, kind, f"{kind}-same", kinds.workdir / f"store-{kind}")
        try:
            results[kind] = asyncio.run(write_and_observe(addr))
        finally:
            stop(kind, proc)
    assert results["apache"] == EXPECTED
    assert results["orbitmq"] == results["apache"]


def test_apache_reads_orbitmq_lmq_store(kinds: Kinds) -> None:
    store = kinds.workdir / "store-orbitmq"
    assert (store / "consumequeue" / "%LMQ%a" / "0").is_dir()  # left by the test above
    proc, addr = start(kinds, "apache", "apache-reads", store)
    try:
        async def check() -> None:
            async with RemotingClient() as client:
                assert await observe(client, addr) == EXPECTED
                response = await send(client, addr, b"on-apache", "%LMQ%a,%LMQ%b")
                assert response.code == ResponseCode.SUCCESS, response.remark
                for _ in range(200):
                    seen = await observe(client, addr)
                    if seen["%LMQ%a"][0][1] == 4:
                        break
                    await asyncio.sleep(0.05)
                assert seen["%LMQ%a"][1][-1] == (b"on-apache", "%LMQ%a,%LMQ%b", "3,4")
                assert seen["%LMQ%b"][1][-1] == (b"on-apache", "%LMQ%a,%LMQ%b", "3,4")
        asyncio.run(check())
    finally:
        stop("apache", proc)


def test_max_lmq_consume_queue_num_only_enforced_by_orbitmq(kinds: Kinds) -> None:
    """The documented deviation: Apache 5.5.0 keeps maxLmqConsumeQueueNum and
    LMQ_CONSUME_QUEUE_NUM_EXCEEDED but takes every send; OrbitMQ refuses multi-dispatch sends once
    more LMQ queues than the limit exist, as RIP-28's DefaultMessageStore#checkLmqMessage did."""
    codes = {}
    for kind in ("apache", "orbitmq"):
        store = kinds.workdir / f"store-limit-{kind}"
        if kind == "orbitmq":
            proc, addr = start_broker(kinds.runner, kinds.workdir, "", f"{kind}-limit", store=store,
                                      brokerName=BROKER_NAME, maxLmqConsumeQueueNum="1", **LMQ_KEYS)
        else:
            broker = kinds.apache.broker("", f"{kind}-limit", broker_name=BROKER_NAME, store=store,
                                         maxLmqConsumeQueueNum="1", **LMQ_KEYS)
            proc, addr = broker.process, broker.addr

        async def sends(addr: str = addr) -> list[tuple[int, str | None]]:
            async with RemotingClient() as client:
                response = await invoke(client, addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {
                    "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
                    "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
                assert response.code == ResponseCode.SUCCESS, response.remark
                out = []
                for lmq in ("%LMQ%a,%LMQ%b", "%LMQ%a"):
                    response = await send(client, addr, b"x", lmq)
                    out.append((response.code, response.remark))
                return out
        try:
            codes[kind] = asyncio.run(sends())
        finally:
            stop(kind, proc)
    assert codes["apache"] == [(ResponseCode.SUCCESS, None)] * 2
    assert codes["orbitmq"][0] == (ResponseCode.SUCCESS, None)
    assert codes["orbitmq"][1][0] == ResponseCode.SYSTEM_ERROR
    assert codes["orbitmq"][1][1].startswith("[LMQ_CONSUME_QUEUE_NUM_EXCEEDED]")


def test_apache_reads_orbitmq_lmq_store_after_kill9(kinds: Kinds) -> None:
    """OrbitMQ writes, is killed -9 once its LMQ group offset is persisted (every
    flushConsumerOffsetInterval), and Apache recovers the store abnormally: the LMQ queues are
    served and their offsets continue."""
    store = kinds.workdir / "store-orbitmq-killed"
    proc, addr = start(kinds, "orbitmq", "orbitmq-killed", store)
    try:
        assert asyncio.run(write_and_observe(addr)) == EXPECTED
        saved = store / "config" / "lmqConsumerOffset.json"
        for _ in range(300):
            if saved.exists() and GROUP in saved.read_text():
                break
            time.sleep(0.05)
        else:
            raise AssertionError("lmqConsumerOffset.json never held the LMQ group's offset")
    finally:
        proc.kill()
    assert (store / "abort").exists()
    proc, addr = start(kinds, "apache", "apache-after-kill", store)
    try:
        async def check() -> None:
            async with RemotingClient() as client:
                assert await observe(client, addr) == EXPECTED
                assert (await send(client, addr, b"on-apache", "%LMQ%a,%LMQ%b")).code == ResponseCode.SUCCESS
                for _ in range(200):
                    seen = await observe(client, addr)
                    if seen["%LMQ%a"][0][1] == 4:
                        break
                    await asyncio.sleep(0.05)
                assert seen["%LMQ%b"][1][-1] == (b"on-apache", "%LMQ%a,%LMQ%b", "3,4")
        asyncio.run(check())
    finally:
        stop("apache", proc)
