"""The Remoting producer against real processes: a NameServer and two broker groups.

Sends of every kind (sync, async with futures and callbacks, oneway, batch, selector, to a
queue), read back by pulling every queue; compression; checks before sending; errors carrying
their codes; transactions with check-backs; request/reply; trace records; heartbeats and
UNREGISTER_CLIENT; the synchronous wrapper; and what it wrote read by Apache's Java client
(rocketmq-tools 5.5.0's mqadmin printMsg: DefaultMQPullConsumer and MessageDecoder, which
decompresses the zlib body).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import zlib
from pathlib import Path

import pytest

from orbitmq.admin.cli import main as admin_main
from orbitmq.client import MQBrokerError, MQClientAPI, MQClientError, SendStatus
from orbitmq.client.request_reply import RequestTimeoutError
from orbitmq.common.constants import RMQ_SYS_TRACE_TOPIC
from orbitmq.common.message import Message, MessageConst, MessageExt
from orbitmq.common.sysflag import (
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_COMPARATOR,
    COMPRESSION_ZLIB_TYPE,
    PULL_FLAG_SUBSCRIPTION,
)
from orbitmq.common.trace_codec import TraceType, decode
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.instance import NOT_FOUND_TOPIC_EXCEPTION, REQUEST_TIMEOUT_EXCEPTION
from orbitmq.remoting_client.producer import (
    AsyncDefaultMQProducer,
    AsyncTransactionMQProducer,
    DefaultMQProducer,
    LocalTransactionState,
    select_message_queue_by_hash,
)
from orbitmq.remoting_client.request_reply import create_reply_message
from tests.interop.java.mqadmin.tools import mqadmin
from tests.sdk.remoting_client.cluster import CLUSTER_NAME, RemotingCluster, unique


def config(cluster: RemotingCluster, **kw: object) -> RemotingClientConfig:
    return RemotingClientConfig(namesrv_addr=cluster.namesrv, client_ip="127.0.0.1", **kw)  # type: ignore[arg-type]


async def pull_all(cluster: RemotingCluster, topic: str, expect: int, timeout: float = 10.0) -> list[MessageExt]:  # noqa: ASYNC109
    """Every message of ``topic`` on every queue of both broker groups (waits for ``expect`` of them)."""
    api = MQClientAPI(timeout=5)
    try:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            route = await api.get_topic_route(cluster.namesrv, topic)
            found: list[MessageExt] = []
            for qd in route.queue_datas:
                for qid in range(qd.read_queue_nums):
                    offset = 0
                    while True:
                        result = await api.pull_message(cluster.brokers[qd.broker_name], h.PullMessageRequestHeader(
                            consumer_group="PULL_CHECK", topic=topic, queue_id=qid, queue_offset=offset,
                            max_msg_nums=32, sys_flag=PULL_FLAG_SUBSCRIPTION, commit_offset=0,
                            suspend_timeout_millis=0, subscription="*", expression_type="TAG", sub_version=0,
                            broker_name=qd.broker_name))
                        if not result.messages:
                            break
                        for m in result.messages:
                            m.properties["_BROKER"] = qd.broker_name
                        found += result.messages
                        offset = result.next_begin_offset
            if len(found) >= expect or asyncio.get_running_loop().time() > deadline:
                return found
            await asyncio.sleep(0.2)
    finally:
        await api.close()


def body_of(m: MessageExt) -> bytes:
    return zlib.decompress(m.body) if m.sys_flag & COMPRESSED_FLAG else m.body


async def test_every_send_mode_is_read_back(remoting_cluster: RemotingCluster) -> None:
    topic = remoting_cluster.create_topic(unique("RcSend"))
    callbacks: list[tuple[object, object]] = []
    async with AsyncDefaultMQProducer(unique("PG"), config(remoting_cluster)) as producer:
        sync = [await producer.send(Message(topic, f"sync-{i}".encode(), properties={"TAGS": "a"}))
                for i in range(4)]
        futures = [producer.send_async(Message(topic, f"async-{i}".encode()),
                                       lambda r, e: callbacks.append((r, e))) for i in range(4)]
        class Callback:  # upstream's SendCallback shape
            def on_success(self, result: object) -> None:
                callbacks.append((result, None))

            def on_exception(self, error: BaseException) -> None:
                callbacks.append((None, error))

        futures.append(producer.send_async(Message(topic, b"async-4"), Callback()))
        async_results = await asyncio.gather(*futures)
        for i in range(2):
            await producer.send_oneway(Message(topic, f"oneway-{i}".encode()))
        batch = await producer.send_batch([Message(topic, f"batch-{i}".encode()) for i in range(5)])
        mq = (await producer.fetch_publish_message_queues(topic))[-1]
        to_queue = await producer.send_to_queue(Message(topic, b"to-queue"), mq)
    assert all(r.status == SendStatus.SEND_OK for r in [*sync, *async_results, batch, to_queue])
    assert len(callbacks) == 5 and all(e is None and r is not None for r, e in callbacks)
    assert (to_queue.broker_name, to_queue.queue_id) == (mq.broker_name, mq.queue_id)
    # round robin over both broker groups
    assert {r.broker_name for r in [*sync, *async_results]} == {"broker-a", "broker-b"}
    batch_ids = batch.msg_id.split(",")
    assert len(batch_ids) == 5 and len(set(batch_ids)) == 5
    # MessageClientIDSetter: 16 bytes as 32 upper-case hex characters, one prefix per process
    for r in sync:
        assert len(r.msg_id) == 32 and r.msg_id == r.msg_id.upper() and r.msg_id[:20] == sync[0].msg_id[:20]
    got = await pull_all(remoting_cluster, topic, 17)
    bodies = sorted(m.body.decode() for m in got)
    assert bodies == sorted([*(f"sync-{i}" for i in range(4)), *(f"async-{i}" for i in range(5)),
                             *(f"oneway-{i}" for i in range(2)), *(f"batch-{i}" for i in range(5)), "to-queue"])
    by_id = {m.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]: m for m in got}
    assert by_id[sync[0].msg_id].properties["TAGS"] == "a"
    assert {by_id[i].queue_id for i in batch_ids} == {batch.queue_id}  # one batch, one queue


async def test_selector_keeps_one_order_on_one_queue(remoting_cluster: RemotingCluster) -> None:
    topic = remoting_cluster.create_topic(unique("RcOrder"))
    async with AsyncDefaultMQProducer(unique("PG"), config(remoting_cluster)) as producer:
        results = {}
        for step in range(3):
            for order in ("o-1", "o-2", "o-3"):
                r = await producer.send_with_selector(Message(topic, f"{order}:{step}".encode()),
                                                      select_message_queue_by_hash, order)
                results.setdefault(order, []).append((r.broker_name, r.queue_id))
    for placements in results.values():
        assert len(set(placements)) == 1
    got = await pull_all(remoting_cluster, topic, 9)
    for order in results:
        steps = [int(m.body.decode().split(":")[1]) for m in sorted(got, key=lambda m: m.queue_offset)
                 if m.body.decode().startswith(order)]
        assert steps == [0, 1, 2]


async def test_large_bodies_travel_compressed(remoting_cluster: RemotingCluster) -> None:
    topic = remoting_cluster.create_topic(unique("RcZip"), queues=1, brokers=["broker-a"])
    big = (b"0123456789abcdef" * 400)[:5000]  # over compressMsgBodyOverHowmuch (4 KiB)
    async with AsyncDefaultMQProducer(unique("PG"), config(remoting_cluster)) as producer:
        await producer.send(Message(topic, big))
        await producer.send(Message(topic, b"small"))
    got = sorted(await pull_all(remoting_cluster, topic, 2), key=lambda m: m.queue_offset)
    assert got[0].sys_flag & COMPRESSED_FLAG
    assert got[0].sys_flag & COMPRESSION_TYPE_COMPARATOR == COMPRESSION_ZLIB_TYPE
    assert len(got[0].body) < len(big) and body_of(got[0]) == big
    assert not got[1].sys_flag & COMPRESSED_FLAG and got[1].body == b"small"


@pytest.mark.parametrize("compress_type", ["LZ4", "ZSTD"])
async def test_lz4_and_zstd_bodies_keep_their_type_through_a_commit(remoting_cluster: RemotingCluster,
                                                                   compress_type: str) -> None:
    """compressType LZ4 / ZSTD: the stored record carries COMPRESSED_FLAG and the type's bits, also
    when a transaction commit rewrites the half message (EndTransactionProcessor keeps its sysFlag),
    and the body inflates with that codec."""
    from orbitmq.common.compression import CompressionType, decompress_by_sys_flag

    kind = CompressionType.of(compress_type)
    topic = remoting_cluster.create_topic(unique(f"Rc{compress_type}"), queues=1, brokers=["broker-a"])
    tx_topic = remoting_cluster.create_topic(unique(f"RcTx{compress_type}"), queues=1, brokers=["broker-a"],
                                             message_type="TRANSACTION")
    big = (b"0123456789abcdef" * 400)[:5000]

    class Commit:
        def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE

        def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE

    async with AsyncDefaultMQProducer(unique("PG"), config(remoting_cluster), compress_type=compress_type) as p:
        await p.send(Message(topic, big))
    async with AsyncTransactionMQProducer(unique("TxPG"), config(remoting_cluster), transaction_listener=Commit(),
                                          compress_type=compress_type) as tx:
        await tx.send_message_in_transaction(Message(tx_topic, big), None)
    for name in (topic, tx_topic):
        (stored,) = await pull_all(remoting_cluster, name, 1, timeout=20)
        assert stored.sys_flag & COMPRESSED_FLAG, name
        assert stored.sys_flag & COMPRESSION_TYPE_COMPARATOR == kind.compression_flag, name
        assert len(stored.body) < len(big) and decompress_by_sys_flag(stored.body, stored.sys_flag) == big


async def test_bad_input_raises_before_sending_with_codes(remoting_cluster: RemotingCluster) -> None:
    topic = remoting_cluster.create_topic(unique("RcBad"), queues=1, brokers=["broker-a"])
    with pytest.raises(MQClientError, match="producerGroup can not equal DEFAULT_PRODUCER"):
        await AsyncDefaultMQProducer(config=config(remoting_cluster)).start()
    async with AsyncDefaultMQProducer(unique("PG"), config(remoting_cluster), max_message_size=1024) as producer:
        with pytest.raises(MQClientError) as too_big:
            await producer.send(Message(topic, b"x" * 1025))
        assert too_big.value.code == ResponseCode.MESSAGE_ILLEGAL
        assert "the message body size over max value, MAX: 1024" in str(too_big.value)
        with pytest.raises(MQClientError) as empty:
            await producer.send(Message(topic, b""))
        assert empty.value.code == ResponseCode.MESSAGE_ILLEGAL
        with pytest.raises(MQClientError, match=r"contains illegal characters"):
            await producer.send(Message("bad topic!", b"x"))
        with pytest.raises(MQClientError) as no_route:
            await producer.send(Message(unique("NoSuchTopic"), b"x"))
        assert no_route.value.code == NOT_FOUND_TOPIC_EXCEPTION and "No route info of this topic" in str(no_route.value)
        # the broker's refusal keeps its code: a queue the topic does not have
        mq = (await producer.fetch_publish_message_queues(topic))[0]
        with pytest.raises(MQBrokerError) as refused:
            await producer.send_to_queue(Message(topic, b"x"), type(mq)(mq.topic, mq.broker_name, 7))
        assert refused.value.code == ResponseCode.INVALID_PARAMETER and "queueId[7] is illegal" in refused.value.remark
        with pytest.raises(MQClientError, match="has been created before"):
            await AsyncDefaultMQProducer(producer.producer_group, producer.config).start()
    assert await pull_all(remoting_cluster, topic, 0, timeout=0) == []  # nothing reached the broker
    with pytest.raises(MQClientError, match="service state not OK"):
        await producer.send(Message(topic, b"x"))


async def test_routes_are_refreshed_in_the_background(remoting_cluster: RemotingCluster) -> None:
    """pollNameServerInterval (0.3 s here instead of 30 s): a broker group that starts serving the
    topic is used without any error first."""
    topic = remoting_cluster.create_topic(unique("RcGrow"), queues=2, brokers=["broker-a"])
    async with AsyncDefaultMQProducer(unique("PG"), config(remoting_cluster, poll_name_server_interval=0.3)) as p:
        assert {q.broker_name for q in await p.fetch_publish_message_queues(topic)} == {"broker-a"}
        remoting_cluster.create_topic(topic, queues=2, brokers=["broker-b"])
        deadline = asyncio.get_running_loop().time() + 10
        while {q.broker_name for q in await p.fetch_publish_message_queues(topic)} != {"broker-a", "broker-b"}:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.1)
        results = [await p.send(Message(topic, b"x")) for _ in range(4)]
    assert {r.broker_name for r in results} == {"broker-a", "broker-b"}


async def test_heartbeat_registers_and_shutdown_unregisters(remoting_cluster: RemotingCluster) -> None:
    topic = remoting_cluster.create_topic(unique("RcHb"))
    group = unique("PG")
    addr = remoting_cluster.brokers["broker-a"]

    async def producers() -> list[str]:
        api = MQClientAPI(timeout=5)
        try:
            response = await api.invoke(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group})
            if response.code != ResponseCode.SUCCESS:
                return []
            return [c["clientId"] for c in json.loads(response.body)["connectionSet"]]
        finally:
            await api.close()

    producer = AsyncDefaultMQProducer(group, config(remoting_cluster, instance_name=unique("hb")))
    await producer.start()
    await producer.send(Message(topic, b"x"))
    await producer.instance.send_heartbeat_to_all_brokers()
    client_id = producer.instance.client_id
    assert client_id.startswith("127.0.0.1@")
    assert await producers() == [client_id]
    await producer.shutdown()
    assert await producers() == []
    assert producer.instance.closed


async def test_transactions_commit_rollback_and_check_back(remoting_cluster: RemotingCluster) -> None:
    topic = remoting_cluster.create_topic(unique("RcTx"), message_type="TRANSACTION")
    checked: list[MessageExt] = []

    class Listener:
        def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
            if arg == "boom":
                raise RuntimeError("local transaction failed")
            return LocalTransactionState(arg)

        async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            checked.append(msg)
            return LocalTransactionState.COMMIT_MESSAGE

    async with AsyncTransactionMQProducer(unique("TxPG"), config(remoting_cluster),
                                          transaction_listener=Listener()) as producer:
        commit = await producer.send_message_in_transaction(Message(topic, b"commit"), "COMMIT_MESSAGE")
        rollback = await producer.send_message_in_transaction(Message(topic, b"rollback"), "ROLLBACK_MESSAGE")
        unknown = await producer.send_message_in_transaction(Message(topic, b"unknown"), "UNKNOW")
        failed = await producer.send_message_in_transaction(Message(topic, b"failed"), "boom")
        assert [r.local_transaction_state for r in (commit, rollback, unknown, failed)] == [
            LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.ROLLBACK_MESSAGE,
            LocalTransactionState.UNKNOW, LocalTransactionState.UNKNOW]
        got = await pull_all(remoting_cluster, topic, 3, timeout=20)
    assert sorted(m.body for m in got) == [b"commit", b"failed", b"unknown"]
    checked_ids = {m.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for m in checked}
    assert {unknown.msg_id, failed.msg_id} <= checked_ids and commit.msg_id not in checked_ids
    assert all(m.topic == topic for m in checked)


async def test_request_reply_and_timeout(remoting_cluster: RemotingCluster) -> None:
    topic = remoting_cluster.create_topic(unique("RcReq"), queues=1, brokers=["broker-a"])
    addr = remoting_cluster.brokers["broker-a"]

    async def responder(stop: asyncio.Event) -> None:
        """Pull requests, answer each (MessageUtil#createReplyMessage + SEND_REPLY_MESSAGE_V2)."""
        api = MQClientAPI(timeout=5)
        offset = 0
        try:
            while not stop.is_set():
                result = await api.pull_message(addr, h.PullMessageRequestHeader(
                    consumer_group="RESPONDER", topic=topic, queue_id=0, queue_offset=offset, max_msg_nums=8,
                    sys_flag=PULL_FLAG_SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=0, subscription="*",
                    expression_type="TAG", sub_version=0))
                for m in result.messages:
                    if m.body != b"no-answer":
                        reply = create_reply_message(m, b"re:" + m.body)
                        await api.send_reply_message(addr, "broker-a", reply, "RESPONDER_PG")
                offset = result.next_begin_offset if result.messages else offset
                await asyncio.sleep(0.05)
        finally:
            await api.close()

    stop = asyncio.Event()
    task = asyncio.create_task(responder(stop))
    try:
        async with AsyncDefaultMQProducer(unique("ReqPG"), config(remoting_cluster)) as producer:
            reply = await producer.request(Message(topic, b"ping"), timeout=5)
            assert reply.body == b"re:ping"
            assert reply.topic == f"{CLUSTER_NAME}_REPLY_TOPIC"
            with pytest.raises(RequestTimeoutError) as late:
                await producer.request(Message(topic, b"no-answer"), timeout=1)
            assert late.value.code == REQUEST_TIMEOUT_EXCEPTION

            # request(msg, RequestCallback, timeout): the callback object gets the reply ...
            replied: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()

            class Callback:  # RequestCallback
                def on_success(self, m: MessageExt) -> None:
                    replied.set_result(m)

                def on_exception(self, e: BaseException) -> None:
                    replied.set_exception(e)
            future = producer.request_async(Message(topic, b"cb"), Callback(), timeout=5)
            assert (await asyncio.wait_for(replied, 10)).body == b"re:cb"
            assert (await future).body == b"re:cb"
            # ... and a callable gets the timeout as its error
            outcomes: list[tuple[MessageExt | None, BaseException | None]] = []
            late_future = producer.request_async(Message(topic, b"no-answer"), lambda r, e: outcomes.append((r, e)),
                                                 timeout=1)
            with pytest.raises(RequestTimeoutError):
                await late_future
            await asyncio.sleep(0)
            assert len(outcomes) == 1 and outcomes[0][0] is None and isinstance(outcomes[0][1], RequestTimeoutError)
            assert len(producer.instance.request_futures) == 0
    finally:
        stop.set()
        await task


async def test_trace_records_are_written_and_queryable(remoting_cluster: RemotingCluster) -> None:
    topic = remoting_cluster.create_topic(unique("RcTrace"))
    group = unique("TracePG")
    async with AsyncDefaultMQProducer(group, config(remoting_cluster), enable_msg_trace=True) as producer:
        msg = Message(topic, b"traced", properties={"TAGS": "tg"})
        msg.keys = ["order-42"]
        result = await producer.send(msg)
    traces = await pull_all(remoting_cluster, RMQ_SYS_TRACE_TOPIC, 1)
    records = [r for t in traces for r in decode(t.body.decode()) if r.msg_id == result.msg_id]
    assert len(records) == 1
    pub = records[0]
    assert (pub.type, pub.group, pub.topic, pub.tags, pub.keys) == (TraceType.PUB, group, topic, "tg", "order-42")
    assert pub.success and pub.offset_msg_id == result.offset_msg_id
    assert pub.store_host == remoting_cluster.brokers[result.broker_name]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = await asyncio.to_thread(admin_main, ["queryMsgTraceById", "-n", remoting_cluster.namesrv,
                                                    "-i", result.msg_id])
    assert code == 0 and "Pub" in out.getvalue() and group in out.getvalue()


def test_synchronous_wrapper(remoting_cluster: RemotingCluster) -> None:
    topic = remoting_cluster.create_topic(unique("RcSyncApi"))
    seen: list[object] = []
    with DefaultMQProducer(unique("PG"), config(remoting_cluster, namespace="nsA")) as producer:
        assert producer.impl.group_name.startswith("nsA%")
        with pytest.raises(MQClientError) as no_route:  # the namespace wraps the topic: nsA%<topic> has no route
            producer.send(Message(topic, b"x"))
        assert no_route.value.code == NOT_FOUND_TOPIC_EXCEPTION
    wrapped = remoting_cluster.create_topic(f"nsA%{topic}")
    with DefaultMQProducer(unique("PG"), config(remoting_cluster, namespace="nsA")) as producer:
        first = producer.send(Message(topic, b"one"))
        future = producer.send_async(Message(topic, b"two"), lambda r, e: seen.append(r))
        second = future.result(10)
        producer.send_oneway(Message(topic, b"three"))
    assert first.topic == topic and second.status == SendStatus.SEND_OK and seen == [second]
    got = asyncio.run(pull_all(remoting_cluster, wrapped, 3))
    assert sorted(m.body for m in got) == [b"one", b"three", b"two"]
    assert {m.properties.get(MessageConst.INSTANCE_ID) for m in got} == {"nsA"}


class Commit:
    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg: Message) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


async def test_java_reads_what_python_sent(remoting_cluster: RemotingCluster, tmp_path: Path) -> None:
    topic = remoting_cluster.create_topic(unique("RcJava"), queues=2)
    cfg = RemotingClientConfig(namesrv_addr=remoting_cluster.namesrv, client_ip="127.0.0.1")
    big = b"z" * 6000
    async with AsyncDefaultMQProducer(unique("PG"), cfg) as producer:
        plain = await producer.send(Message(topic, b"hello java", properties={"TAGS": "t1", "KEYS": "k1"}))
        packed = await producer.send(Message(topic, big))
        batch = await producer.send_batch([Message(topic, b"batch-0"), Message(topic, b"batch-1")])
    async with AsyncTransactionMQProducer(unique("TxPG"), cfg, transaction_listener=Commit()) as tx:
        committed = await tx.send_message_in_transaction(Message(topic, b"committed"))
    expected = {plain.msg_id: b"hello java", packed.msg_id: big, committed.msg_id: b"committed",
                **dict(zip(batch.msg_id.split(","), (b"batch-0", b"batch-1"), strict=True))}
    ns = remoting_cluster.namesrv
    printed, detail = mqadmin(tmp_path / "mqadmin", [
        ["printMsg", "-n", ns, "-t", topic, "-d", "true"],
        ["queryMsgByUniqueKey", "-n", ns, "-t", topic, "-i", plain.msg_id]])
    out = printed.ok()
    assert out.count("MSGID: ") == len(expected)
    for msg_id, body in expected.items():
        line = next(ln for ln in out.splitlines() if ln.startswith(f"MSGID: {msg_id} "))
        assert line.endswith(f"BODY: {body.decode()}"), line[-200:]
    text = detail.ok()
    assert "Tags:                [t1]" in text and "Keys:                [k1]" in text
