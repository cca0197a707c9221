"""The proxy's Remoting port (RIP-55) with OrbitMQ's own Remoting API (orbitmq.client.MQClientAPI).

One cluster for the module: a NameServer, broker sets broker-a and broker-b (one master each, short
transaction checks) and a proxy. Every request goes to the proxy's Remoting address, never to a
broker: routes and cluster info come back with the proxy's address, requests naming a broker set
(``bname``, ``n`` for SEND_MESSAGE_V2) reach that set, requests without it (RocketMQ 4.x clients)
reach the topic's only set, and the brokers' requests back (NOTIFY_CONSUMER_IDS_CHANGED,
CHECK_TRANSACTION_STATE) reach the client's own connection to the proxy.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from orbitmq.auth.client import install_signing
from orbitmq.client import MQClientAPI
from orbitmq.client.api import MessageQueueRef
from orbitmq.client.results import PopStatus, PullStatus
from orbitmq.common.message import Message, MessageConst
from orbitmq.common.message_codec import decode_record
from orbitmq.common.route import ClusterInfo, TopicRouteData, dump_json
from orbitmq.common.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting import headers as h
from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.errors import RemotingError
from orbitmq.remoting.protocol import RemotingCommand
from tests.support import free_port, start_broker
from tests.support.process import ProcessRunner, running
from tests.support.services import start_namesrv

BOTH, ONLY_A, GROUP = "RemotingBoth", "RemotingOnlyA", "GRemotingProxy"
FLAG_SUBSCRIPTION = 0x1 << 2  # PullSysFlag: the pull carries its subscription
BROKER_KEYS = {"autoCreateTopicEnable": "false", "autoCreateSubscriptionGroup": "true",
               "flushDiskType": "ASYNC_FLUSH", "mappedFileSizeCommitLog": 64 * 1024 * 1024,
               "transactionCheckInterval": 1000, "transactionTimeOut": 1000}


class Cluster:
    def __init__(self, runner: ProcessRunner, workdir: Path, namesrv: str, brokers: dict[str, str],
                 proxy: str) -> None:
        self.runner, self.workdir = runner, workdir
        self.namesrv, self.brokers, self.proxy = namesrv, brokers, proxy


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir: Path = tmp_path_factory.mktemp("proxy-remoting")
    with running(workdir) as runner:
        _, namesrv = start_namesrv(runner, name="namesrv")
        brokers = {}
        for name in ("broker-a", "broker-b"):
            _, brokers[name] = start_broker(runner, workdir, namesrv, name, store=workdir / f"store-{name}",
                                            brokerName=name, **BROKER_KEYS)
        grpc_port, remoting_port = free_port(), free_port()
        runner.start("proxy", ["-n", namesrv, "--port", str(grpc_port), f"remotingListenPort={remoting_port}"],
                     ready_port=remoting_port, ready_text="The proxy boot success", name="proxy", timeout=30)

        async def topics() -> None:
            api = MQClientAPI(timeout=10)
            try:
                for addr in brokers.values():
                    await api.create_topic(addr, TopicConfig(BOTH, 2, 2))
                await api.create_topic(brokers["broker-a"], TopicConfig(ONLY_A, 2, 2))
                deadline = time.monotonic() + 20
                while len((await api.get_topic_route(namesrv, BOTH)).queue_datas) < 2:
                    assert time.monotonic() < deadline, "topic never routed on both broker sets"
                    await asyncio.sleep(0.2)
                while True:
                    try:
                        await api.get_topic_route(namesrv, ONLY_A)
                        break
                    except Exception:
                        assert time.monotonic() < deadline
                        await asyncio.sleep(0.2)
            finally:
                await api.close()

        asyncio.run(topics())
        yield Cluster(runner, workdir, namesrv, brokers, f"127.0.0.1:{remoting_port}")


async def _with_api(fn: Callable[[MQClientAPI], Awaitable[Any]], remoting: RemotingClient | None = None) -> Any:
    api = MQClientAPI(remoting, timeout=10)
    try:
        return await fn(api)
    finally:
        await api.close()
        if remoting is not None:
            await remoting.close()


async def _eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 15.0) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.2)


def _message(topic: str, body: bytes, **props: str) -> Message:
    msg = Message(topic, body)
    for key, value in props.items():
        msg.put_property(key, value)
    return msg


async def test_routes_and_cluster_name_the_proxy(cluster: Cluster) -> None:
    async def go(api: MQClientAPI) -> None:
        route = await api.get_topic_route(cluster.proxy, BOTH)
        direct = await api.get_topic_route(cluster.namesrv, BOTH)
        assert sorted(b.broker_name for b in route.broker_datas) == ["broker-a", "broker-b"]
        assert all(b.broker_addrs == {0: cluster.proxy} for b in route.broker_datas)
        assert sorted((q.broker_name, q.read_queue_nums) for q in route.queue_datas) == \
            sorted((q.broker_name, q.read_queue_nums) for q in direct.queue_datas)
        info: ClusterInfo = await api.get_cluster_info(cluster.proxy)
        assert set(info.broker_addr_table) == {"broker-a", "broker-b"}
        assert info.retrieve_all_addr_by_cluster("DefaultCluster") == [cluster.proxy, cluster.proxy]
        missing = await api.invoke(cluster.proxy, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "NoSuchTopic"})
        assert missing.code == ResponseCode.TOPIC_NOT_EXIST, missing.remark
    await _with_api(go)


async def test_sends_pulls_and_offsets_reach_the_named_broker_set(cluster: Cluster) -> None:
    async def go(api: MQClientAPI) -> None:
        proxy, b = cluster.proxy, cluster.brokers["broker-b"]
        before = await api.get_max_offset(b, BOTH, 1)
        sent = await api.send_message(proxy, "broker-b", _message(BOTH, b"to-b"), "PRemoting", 1)
        assert sent.queue_offset == before
        batch = await api.send_batch(proxy, "broker-b", [_message(BOTH, b"batch-%d" % i) for i in range(3)],
                                     "PRemoting", 1)
        assert batch.queue_offset == before + 1
        assert await api.get_max_offset(b, BOTH, 1) == before + 4  # stored on broker-b itself
        pull = await api.pull_message(proxy, h.PullMessageRequestHeader(
            consumer_group=GROUP, topic=BOTH, queue_id=1, queue_offset=before, max_msg_nums=32, sys_flag=FLAG_SUBSCRIPTION,
            commit_offset=0, suspend_timeout_millis=1000, sub_version=0, subscription="*", expression_type="TAG",
            broker_name="broker-b"))
        assert pull.status == PullStatus.FOUND
        assert [m.body for m in pull.messages] == [b"to-b", b"batch-0", b"batch-1", b"batch-2"]
        held = await api.pull_message(proxy, h.PullMessageRequestHeader(  # a long poll, answered empty
            consumer_group=GROUP, topic=BOTH, queue_id=1, queue_offset=before + 4, max_msg_nums=32, sys_flag=FLAG_SUBSCRIPTION,
            commit_offset=0, suspend_timeout_millis=500, sub_version=0, subscription="*", broker_name="broker-b"),
            timeout=10)
        assert held.status == PullStatus.NO_NEW_MSG
        update = h.UpdateConsumerOffsetRequestHeader(consumer_group=GROUP, topic=BOTH, queue_id=1,
                                                     commit_offset=before + 4).to_ext_fields()
        response = await api.invoke(proxy, RequestCode.UPDATE_CONSUMER_OFFSET, {**update, "bname": "broker-b"})
        assert response.code == ResponseCode.SUCCESS, response.remark
        assert await api.query_consumer_offset(b, GROUP, BOTH, 1) == before + 4
        query = h.QueryConsumerOffsetRequestHeader(consumer_group=GROUP, topic=BOTH, queue_id=1).to_ext_fields()
        response = await api.invoke(proxy, RequestCode.QUERY_CONSUMER_OFFSET, {**query, "bname": "broker-b"})
        assert h.QueryConsumerOffsetResponseHeader.from_command(response).offset == before + 4
        maxed = await api.invoke(proxy, RequestCode.GET_MAX_OFFSET, {"topic": BOTH, "queueId": "1", "bname": "broker-b"})
        assert int(maxed.ext_fields["offset"]) == before + 4
        # A 4.x client names no broker set: the topic's only one is meant...
        a_before = await api.get_max_offset(cluster.brokers["broker-a"], ONLY_A, 0)
        fields = api._encoded_send_fields("PRemoting", ONLY_A, 0, 0, "", False, None)
        response = await api.remoting.invoke(proxy, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, fields, b"v4"))
        assert response.code == ResponseCode.SUCCESS, response.remark
        assert await api.get_max_offset(cluster.brokers["broker-a"], ONLY_A, 0) == a_before + 1
        # ...and a topic on two sets cannot be told apart: upstream's refusal.
        fields = api._encoded_send_fields("PRemoting", BOTH, 0, 0, "", False, None)
        response = await api.remoting.invoke(proxy, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, fields, b"?"))
        assert response.code == ResponseCode.VERSION_NOT_SUPPORTED, response.remark
    await _with_api(go)


async def test_pop_ack_change_invisible_and_send_back(cluster: Cluster) -> None:
    async def go(api: MQClientAPI) -> None:
        proxy, group = cluster.proxy, "GRemotingPop"
        for i in range(2):
            await api.send_message(proxy, "broker-a", _message(ONLY_A, b"pop-%d" % i), "PRemoting", 1)
        popped: list[Any] = []
        deadline = time.monotonic() + 15
        while len(popped) < 2:  # a new group starts at the queue's end unless told: initMode 0 = from min
            result = await api.pop_message(proxy, "broker-a", h.PopMessageRequestHeader(
                consumer_group=group, topic=ONLY_A, queue_id=1, max_msg_nums=8, invisible_time=20_000,
                poll_time=500, born_time=int(time.time() * 1000), init_mode=0), timeout=10)
            if result.status == PopStatus.FOUND:
                popped += result.messages
            assert time.monotonic() < deadline, "nothing popped through the proxy"
        first, second = popped[0], popped[1]
        ck = first.properties[MessageConst.POP_CK]
        ack = await api.ack_message(proxy, h.AckMessageRequestHeader(
            consumer_group=group, topic=ONLY_A, queue_id=1, extra_info=ck, offset=first.queue_offset))
        assert ack.status.name == "OK"
        changed = await api.change_invisible_time(proxy, "broker-a", h.ChangeInvisibleTimeRequestHeader(
            consumer_group=group, topic=ONLY_A, queue_id=1, extra_info=second.properties[MessageConst.POP_CK],
            offset=second.queue_offset, invisible_time=30_000, broker_name="broker-a"))
        assert changed.status.name == "OK"
        # POP with bname on a topic of two sets, and BATCH_ACK routed by its body's brokerName
        await api.send_message(proxy, "broker-b", _message(BOTH, b"pop-b"), "PRemoting", 1)
        found: list[Any] = []
        deadline = time.monotonic() + 15
        while not found:
            result = await api.pop_message(proxy, "broker-b", h.PopMessageRequestHeader(
                consumer_group=group, topic=BOTH, queue_id=1, max_msg_nums=1, invisible_time=20_000,
                poll_time=500, born_time=int(time.time() * 1000), init_mode=0, broker_name="broker-b"), timeout=10)
            if result.status == PopStatus.FOUND:
                found += result.messages
            assert time.monotonic() < deadline, "nothing popped from broker-b through the proxy"
        acked = await api.batch_ack(proxy, "broker-b", group, BOTH, [found[0].properties[MessageConst.POP_CK]])
        assert acked.status.name == "OK"
        # CONSUMER_SEND_MSG_BACK with the 5.x client's bname: the retry topic of the group on broker-b
        sent = await api.send_message(proxy, "broker-b", _message(BOTH, b"back"), "PRemoting", 0)
        back = h.ConsumerSendMsgBackRequestHeader(offset=int(sent.offset_msg_id[-16:], 16), group=GROUP,
                                                  delay_level=-1, origin_msg_id=sent.msg_id or sent.offset_msg_id,
                                                  origin_topic=BOTH, max_reconsume_times=1).to_ext_fields()
        response = await api.invoke(proxy, RequestCode.CONSUMER_SEND_MSG_BACK, {**back, "bname": "broker-b"})
        assert response.code == ResponseCode.SUCCESS, response.remark
        dlq = f"%DLQ%{GROUP}"
        await _eventually(lambda: _routed(api, cluster.namesrv, dlq, "broker-b"), "DLQ never created on broker-b")
    await _with_api(go)


async def _routed(api: MQClientAPI, namesrv: str, topic: str, broker: str) -> bool:
    try:
        route: TopicRouteData = await api.get_topic_route(namesrv, topic)
    except Exception:
        return False
    return any(q.broker_name == broker for q in route.queue_datas)


async def test_heartbeat_consumer_list_lock_and_unregister_on_close(cluster: Cluster) -> None:
    group = "GRemotingClients"
    notified: list[str] = []

    async def on_notify(request: RemotingCommand, channel: Any) -> None:
        notified.append(request.ext_fields.get("consumerGroup", ""))
        return None

    remoting = RemotingClient()
    remoting.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)

    async def go(api: MQClientAPI) -> None:
        proxy = cluster.proxy
        body = {"clientID": "client-1", "producerDataSet": [],
                "consumerDataSet": [{"groupName": group, "consumeType": "CONSUME_PASSIVELY",
                                     "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                                     "subscriptionDataSet": [{"topic": BOTH, "subString": "*", "tagsSet": [],
                                                              "codeSet": [], "subVersion": 1,
                                                              "expressionType": "TAG"}],
                                     "unitMode": False}]}
        response = await api.invoke(proxy, RequestCode.HEART_BEAT, None, dump_json(body))
        assert response.code == ResponseCode.SUCCESS, response.remark
        for addr in cluster.brokers.values():  # every broker set knows the client
            assert await api.get_consumer_list(addr, group) == ["client-1"]
        assert await api.get_consumer_list(proxy, group) == ["client-1"]
        locked = await api.lock_batch_mq(proxy, group, "client-1", [MessageQueueRef(BOTH, "broker-b", 0)])
        assert locked == {MessageQueueRef(BOTH, "broker-b", 0)}
        # A second client of the group: the brokers tell the first, through the proxy.
        other = MQClientAPI(timeout=10)
        try:
            second = dict(body, clientID="client-2")
            assert (await other.invoke(proxy, RequestCode.HEART_BEAT, None, dump_json(second))).code == 0

            async def told() -> bool:
                return group in notified
            await _eventually(told, "NOTIFY_CONSUMER_IDS_CHANGED never reached the client")
            assert sorted(await api.get_consumer_list(cluster.brokers["broker-a"], group)) == ["client-1", "client-2"]
        finally:
            await other.close()  # its connection to the proxy closes: the brokers forget client-2

        async def forgotten() -> bool:
            lists = [await api.get_consumer_list(addr, group) for addr in cluster.brokers.values()]
            return all(ids == ["client-1"] for ids in lists)
        await _eventually(forgotten, "the closed client is still registered on the brokers")
        header = h.UnregisterClientRequestHeader(client_id="client-1", consumer_group=group)
        assert (await api.invoke(proxy, RequestCode.UNREGISTER_CLIENT, header)).code == ResponseCode.SUCCESS
        for addr in cluster.brokers.values():  # the group has no member left anywhere
            left = await api.invoke(addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                    h.GetConsumerListByGroupRequestHeader(consumer_group=group))
            assert left.code == ResponseCode.SYSTEM_ERROR and "no consumer" in (left.remark or "")
    await _with_api(go, remoting)


async def test_transaction_check_back_reaches_the_producer_and_commits(cluster: Cluster) -> None:
    group, proxy = "PRemotingTx", cluster.proxy
    checks: list[dict[str, str]] = []
    producer = RemotingClient()
    api = MQClientAPI(producer, timeout=10)

    async def on_check(request: RemotingCommand, channel: Any) -> None:
        """TransactionListener#checkLocalTransaction: commit, sent back on the channel it came on."""
        checks.append(dict(request.ext_fields))
        msg = decode_record(request.body, 0, check_crc=False)
        fields = request.ext_fields
        end = h.EndTransactionRequestHeader(
            producer_group=group, tran_state_table_offset=int(fields["tranStateTableOffset"]),
            commit_log_offset=int(fields["commitLogOffset"]), commit_or_rollback=TRANSACTION_COMMIT_TYPE,
            msg_id=msg.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""), topic=BOTH,
            from_transaction_check=True, transaction_id=fields.get("transactionId")).to_ext_fields()
        await channel.invoke_oneway(RemotingCommand.request(RequestCode.END_TRANSACTION,
                                                            {**end, "bname": fields.get("bname", "")}))
        return None

    producer.register_processor(RequestCode.CHECK_TRANSACTION_STATE, on_check)
    try:
        body = {"clientID": "tx-producer", "producerDataSet": [{"groupName": group}], "consumerDataSet": []}
        assert (await api.invoke(proxy, RequestCode.HEART_BEAT, None, dump_json(body))).code == 0
        b = cluster.brokers["broker-b"]
        before = await api.get_max_offset(b, BOTH, 0)
        half = _message(BOTH, b"half", **{MessageConst.TRANSACTION_PREPARED: "true", MessageConst.PRODUCER_GROUP: group,
                                          MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "TXUNIQ00000000000001"})
        await api.send_message(proxy, "broker-b", half, group, 0, sys_flag=TRANSACTION_PREPARED_TYPE)
        assert await api.get_max_offset(b, BOTH, 0) == before  # a half message is not in the topic

        async def committed() -> bool:
            return await api.get_max_offset(b, BOTH, 0) == before + 1
        await _eventually(committed, "the check-back never committed the half message", timeout=30)
        assert checks and checks[0].get("bname") == "broker-b"
        # A 4.x client's END_TRANSACTION names no broker set and no topic: the broker holding it takes it.
        half = _message(BOTH, b"half-2", **{MessageConst.TRANSACTION_PREPARED: "true",
                                            MessageConst.PRODUCER_GROUP: group,
                                            MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "TXUNIQ00000000000002"})
        sent = await api.send_message(proxy, "broker-b", half, group, 0, sys_flag=TRANSACTION_PREPARED_TYPE)
        end = h.EndTransactionRequestHeader(
            producer_group=group, tran_state_table_offset=sent.queue_offset,
            commit_log_offset=int(sent.offset_msg_id[-16:], 16), commit_or_rollback=TRANSACTION_COMMIT_TYPE,
            msg_id="TXUNIQ00000000000002", from_transaction_check=False,
            transaction_id=sent.transaction_id).to_ext_fields()
        await api.remoting.invoke_oneway(proxy, RemotingCommand.request(RequestCode.END_TRANSACTION, end))

        async def second() -> bool:
            return await api.get_max_offset(b, BOTH, 0) == before + 2
        await _eventually(second, "END_TRANSACTION without bname never reached broker-b")
    finally:
        await api.close()
        await producer.close()


async def test_bad_requests_are_refused_and_the_port_keeps_serving(cluster: Cluster) -> None:
    async def go(api: MQClientAPI) -> None:
        proxy = cluster.proxy
        unknown = await api.invoke(proxy, 99_999)
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        admin = await api.invoke(proxy, RequestCode.GET_BROKER_RUNTIME_INFO)  # not a proxy port's request
        assert admin.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        fields = api._encoded_send_fields("PRemoting", BOTH, 0, 0, "", False, "broker-z")
        stray = await api.remoting.invoke(proxy, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, fields, b"x"))
        assert stray.code == ResponseCode.SYSTEM_ERROR and "broker-z" in (stray.remark or "")
        bad = await api.invoke(proxy, RequestCode.HEART_BEAT, None, b"not json")
        assert bad.code == ResponseCode.SYSTEM_ERROR
        bad_poll = await api.invoke(proxy, RequestCode.PULL_MESSAGE, {"topic": BOTH, "bname": "broker-a",
                                                                      "suspendTimeoutMillis": "soon"})
        assert bad_poll.code == ResponseCode.SYSTEM_ERROR
        assert (await api.get_topic_route(proxy, BOTH)).broker_datas  # still serving
    await _with_api(go)


async def test_the_remoting_port_serves_tls_as_the_grpc_port(cluster: Cluster) -> None:
    """tls.server.mode=enforcing with a test-mode pair: TLS clients are served, plaintext ones are not."""
    tls_dir = cluster.workdir / "tls"
    grpc_port, remoting_port = free_port(), free_port()
    cluster.runner.start("proxy", ["-n", cluster.namesrv, "--port", str(grpc_port),
                                   f"remotingListenPort={remoting_port}", "tlsTestModeEnable=true",
                                   f"tlsCertPath={tls_dir / 'proxy.crt'}", f"tlsKeyPath={tls_dir / 'proxy.key'}",
                                   "tls.server.mode=enforcing"],
                         ready_port=remoting_port, ready_text="The proxy boot success", name="tls-proxy", timeout=30)
    addr = f"127.0.0.1:{remoting_port}"
    secure = RemotingClient()
    context = ssl.create_default_context(cafile=str(tls_dir / "proxy.crt"))
    context.check_hostname = False
    secure.ssl_context = context

    async def go(api: MQClientAPI) -> None:
        route = await api.get_topic_route(addr, BOTH)
        assert all(b.broker_addrs == {0: addr} for b in route.broker_datas)
        sent = await api.send_message(addr, "broker-a", _message(BOTH, b"over-tls"), "PRemoting", 0)
        assert sent.queue_offset >= 0
    await _with_api(go, secure)

    async def plain(api: MQClientAPI) -> None:
        with pytest.raises(RemotingError):
            await api.get_topic_route(addr, BOTH, timeout=3)
    await _with_api(plain)


async def test_acl_on_the_proxy_checks_remoting_requests(cluster: Cluster) -> None:
    """authenticationEnabled/authorizationEnabled on the proxy: the Remoting port checks signatures
    and ACLs as a broker would (here the proxy's bootstrap Super user; the brokers run without ACL)."""
    grpc_port, remoting_port = free_port(), free_port()
    admin = {"username": "admin", "password": "admin-secret"}
    cluster.runner.start("proxy", ["-n", cluster.namesrv, "--port", str(grpc_port),
                                   f"remotingListenPort={remoting_port}", "authenticationEnabled=true",
                                   "authorizationEnabled=true", f"initAuthenticationUser={json.dumps(admin)}"],
                         ready_port=remoting_port, ready_text="The proxy boot success", name="acl-proxy", timeout=30)
    addr = f"127.0.0.1:{remoting_port}"

    async def anonymous(api: MQClientAPI) -> None:
        refused = await api.invoke(addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": BOTH})
        assert refused.code == ResponseCode.NO_PERMISSION, refused.remark
        assert (await api.invoke(addr, 99_999)).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    await _with_api(anonymous)

    wrong = RemotingClient()
    install_signing(wrong, ("admin", "not-the-secret"))

    async def forged(api: MQClientAPI) -> None:
        refused = await api.invoke(addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": BOTH})
        assert refused.code == ResponseCode.NO_PERMISSION and "signature" in (refused.remark or "")
    await _with_api(forged, wrong)

    signed = RemotingClient()
    install_signing(signed, (admin["username"], admin["password"]))

    async def super_user(api: MQClientAPI) -> None:
        assert (await api.get_topic_route(addr, BOTH)).broker_datas
        sent = await api.send_message(addr, "broker-b", _message(BOTH, b"signed"), "PRemoting", 0)
        assert sent.queue_offset >= 0
    await _with_api(super_user, signed)
