"""One NameServer and two broker processes on loopback: routing, send and pull over Remoting,
offsets and metadata that survive a restart, and a killed broker leaving the routes.

Local helpers live in this file on purpose: the three broker test files share no module.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

from orbitmq.common.message import properties_to_string
from orbitmq.common.message_codec import decode_records
from orbitmq.common.route import TopicRouteData, parse_json
from orbitmq.common.sysflag import build_pull_sys_flag
from orbitmq.remoting import RemotingClient, RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.support import BROKER_BOOT_TEXT, aboot_broker, free_port, write_broker_conf

TOPIC = "ClusterTopic"
GROUP = "CG_CLUSTER"
QUEUES = 4
PER_QUEUE = 6


def cluster_broker_conf(tmp_path: Path, name: str, port: int, namesrv: str) -> Path:
    return write_broker_conf(tmp_path / f"{name}.conf", port, tmp_path / f"store-{name}",
                             brokerClusterName="TestCluster", brokerName=name, namesrvAddr=namesrv,
                             registerNameServerPeriod=1000, flushConsumerOffsetInterval=500)


async def invoke_ok(client: RemotingClient, addr: str, code: int, fields: dict[str, str] | None = None,
                    body: bytes = b"") -> RemotingCommand:
    response = await client.invoke(addr, RemotingCommand.request(code, fields or {}, body), 5)
    assert response.code == ResponseCode.SUCCESS, (code, response.code, response.remark)
    return response


async def route(client: RemotingClient, namesrv: str, topic: str) -> TopicRouteData | None:
    response = await client.invoke(namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                    {"topic": topic}), 5)
    if response.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert response.code == ResponseCode.SUCCESS, response.remark
    return TopicRouteData.decode(response.body)


async def wait_route_brokers(client: RemotingClient, namesrv: str, topic: str, expected: set[str],
                             timeout: float = 20.0) -> float:  # noqa: ASYNC109
    started = time.monotonic()
    while True:
        data = await route(client, namesrv, topic)
        names = {b.broker_name for b in data.broker_datas} if data else set()
        if names == expected:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise AssertionError(f"route of {topic} lists {names}, expected {expected}")
        await asyncio.sleep(0.1)


async def send(client: RemotingClient, addr: str, topic: str, body: bytes, queue_id: int) -> RemotingCommand:
    props = {"UNIQ_KEY": f"{time.time_ns():032X}", "KEYS": body.decode()}
    return await invoke_ok(client, addr, RequestCode.SEND_MESSAGE_V2, {
        "a": "PG_CLUSTER", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string(props), "j": "0",
        "k": "false", "m": "false"}, body)


async def pull(client: RemotingClient, addr: str, queue_id: int, offset: int, commit_offset: int | None = None,
               max_nums: int = 32) -> RemotingCommand:
    sys_flag = build_pull_sys_flag(commit_offset=commit_offset is not None, suspend=False, subscription=True,
                                   class_filter=False)
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": str(queue_id), "queueOffset": str(offset),
        "maxMsgNums": str(max_nums), "sysFlag": str(sys_flag), "commitOffset": str(commit_offset or 0),
        "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG"})
    return await client.invoke(addr, request, 5)


async def query_offset(client: RemotingClient, addr: str, queue_id: int) -> int:
    response = await client.invoke(addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": str(queue_id), "setZeroIfNotFound": "false"}), 5)
    if response.code == ResponseCode.QUERY_NOT_FOUND:
        return -1
    assert response.code == ResponseCode.SUCCESS, response.remark
    return int(response.ext_fields["offset"])


async def test_two_brokers_route_send_pull_restart_and_expiry(procs, tmp_path: Path) -> None:
    namesrvs = []
    for i in range(2):  # brokers register with EVERY NameServer; they never talk to each other
        ns_port = free_port()
        namesrvs.append(f"127.0.0.1:{ns_port}")
        await procs.astart("namesrv", [f"listenPort={ns_port}", "brokerChannelExpiredTime=3000",
                                       "scanNotActiveBrokerInterval=300",
                                       f"kvConfigPath={tmp_path / f'kv{i}.json'}",
                                       f"configStorePath={tmp_path / f'namesrv{i}.properties'}"],
                           ready_port=ns_port, name=f"namesrv-{i}")
    namesrv, other_namesrv = namesrvs
    brokers: dict[str, str] = {}
    confs: dict[str, Path] = {}
    for name in ("broker-a", "broker-b"):
        port = free_port()
        confs[name] = cluster_broker_conf(tmp_path, name, port, ";".join(namesrvs))
        brokers[name] = f"127.0.0.1:{port}"
    started = {name: procs.spawn("broker", ["-c", str(confs[name])], name=name) for name in brokers}
    for name, proc in started.items():
        await proc.async_wait_ready(("127.0.0.1", int(brokers[name].rsplit(":", 1)[1])), BROKER_BOOT_TEXT)

    async with RemotingClient() as client:
        # -- topic and group created on both brokers; the route lists both at once ------------
        for addr in brokers.values():
            await invoke_ok(client, addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": str(QUEUES),
                "writeQueueNums": str(QUEUES), "perm": "6", "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": "0", "order": "false", "attributes": "+message.type=NORMAL"})
            group_body = json.dumps({"groupName": GROUP, "retryMaxTimes": 5, "consumeEnable": True}).encode()
            await invoke_ok(client, addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group_body)
        for ns in namesrvs:
            waited = await wait_route_brokers(client, ns, TOPIC, set(brokers))
            print(f"cluster: {ns} lists both brokers {waited * 1000:.0f} ms after the topic was created")
        data = await route(client, namesrv, TOPIC)
        assert {q.broker_name: q.write_queue_nums for q in data.queue_datas} == {n: QUEUES for n in brokers}
        assert {b.broker_name: b.broker_addrs[0] for b in data.broker_datas} == brokers

        # -- send to each broker, pull everything back in order per queue ----------------------
        sent: dict[tuple[str, int], list[bytes]] = {}
        for name, addr in brokers.items():
            for i in range(PER_QUEUE * QUEUES):
                queue_id = i % QUEUES
                body = f"{name}-q{queue_id}-{i // QUEUES}".encode()
                response = await send(client, addr, TOPIC, body, queue_id)
                assert int(response.ext_fields["queueId"]) == queue_id
                assert int(response.ext_fields["queueOffset"]) == i // QUEUES
                assert len(response.ext_fields["msgId"]) == 32
                sent.setdefault((name, queue_id), []).append(body)
        for (name, queue_id), bodies in sent.items():
            got: list[bytes] = []
            offset = 0
            while len(got) < len(bodies):
                response = await pull(client, brokers[name], queue_id, offset, max_nums=4)
                assert response.code == ResponseCode.SUCCESS, response.remark
                messages = decode_records(response.body)
                assert [m.queue_offset for m in messages] == list(range(offset, offset + len(messages)))
                assert all(m.topic == TOPIC and m.queue_id == queue_id for m in messages)
                got += [m.body for m in messages]
                offset = int(response.ext_fields["nextBeginOffset"])
            assert got == bodies
            tail = await pull(client, brokers[name], queue_id, offset)
            assert tail.code == ResponseCode.PULL_NOT_FOUND

        # -- offsets: committed by UPDATE_CONSUMER_OFFSET and piggy-backed on a pull ------------
        a = brokers["broker-a"]
        await invoke_ok(client, a, RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "commitOffset": "3"})
        assert (await pull(client, a, 1, 0, commit_offset=5)).code == ResponseCode.SUCCESS
        assert await query_offset(client, a, 0) == 3
        assert await query_offset(client, a, 1) == 5
        assert await query_offset(client, a, 2) == -1

    # -- restart broker-a: offsets, topics and groups survive --------------------------------------
    await started["broker-a"].async_stop()
    assert started["broker-a"].returncode == 0, started["broker-a"].log_tail()
    assert "boot success" in started["broker-a"].log_text()
    port_a = int(brokers["broker-a"].rsplit(":", 1)[1])
    await aboot_broker(procs, confs["broker-a"], port_a, name="broker-a-restarted")
    async with RemotingClient() as client:
        a = brokers["broker-a"]
        assert await query_offset(client, a, 0) == 3
        assert await query_offset(client, a, 1) == 5
        topics = parse_json((await invoke_ok(client, a, RequestCode.GET_ALL_TOPIC_CONFIG)).body)
        topic_config = topics["topicConfigTable"][TOPIC]
        assert (topic_config["readQueueNums"], topic_config["writeQueueNums"]) == (QUEUES, QUEUES)
        assert topic_config["attributes"] == {"message.type": "NORMAL"}
        groups = parse_json((await invoke_ok(client, a, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)
        assert groups["subscriptionGroupTable"][GROUP]["retryMaxTimes"] == 5
        again = await pull(client, a, 0, 0)
        assert [m.body for m in decode_records(again.body)] == sent[("broker-a", 0)]
        await wait_route_brokers(client, other_namesrv, TOPIC, set(brokers))

        # -- a frozen broker-b (SIGSTOP: connection open, heartbeats stop) expires from the routes ---
        started["broker-b"].signal(signal.SIGSTOP)
        try:
            gone_after = await wait_route_brokers(client, namesrv, TOPIC, {"broker-a"}, timeout=15)
        finally:
            started["broker-b"].signal(signal.SIGCONT)
        print(f"cluster: silent broker-b expired from routes after {gone_after * 1000:.0f} ms "
              "(brokerChannelExpiredTime=3000)")
        await wait_route_brokers(client, namesrv, TOPIC, set(brokers))  # it re-registers when thawed

        # -- SIGKILL broker-b: it leaves the routes of every NameServer -------------------------------
        started["broker-b"].kill()
        for ns in namesrvs:
            gone_after = await wait_route_brokers(client, ns, TOPIC, {"broker-a"}, timeout=15)
            print(f"cluster: killed broker-b dropped from {ns} after {gone_after * 1000:.0f} ms")


# ---- one broker: client registry, orderly locks, queries, stats and offset reset ------------------


async def start_single_broker(procs, tmp_path: Path, name: str) -> str:
    port = free_port()
    await aboot_broker(procs, cluster_broker_conf(tmp_path, name, port, ""), port, name=name)
    return f"127.0.0.1:{port}"


def heartbeat_body(client_id: str, group: str, topic: str) -> bytes:
    return json.dumps({
        "clientID": client_id,
        "producerDataSet": [{"groupName": "PG_HB"}],
        "consumerDataSet": [{
            "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
            "subscriptionDataSet": [{"classFilterMode": False, "topic": topic, "subString": "TagA || TagB",
                                     "tagsSet": ["TagA", "TagB"], "codeSet": [], "subVersion": 1,
                                     "expressionType": "TAG"}]}]}).encode()


async def consumer_ids(client: RemotingClient, addr: str, group: str) -> list[str]:
    response = await invoke_ok(client, addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
    return sorted(json.loads(response.body)["consumerIdList"])


async def test_consumer_registry_notifications_and_orderly_locks(procs, tmp_path: Path) -> None:
    addr = await start_single_broker(procs, tmp_path, "broker-clients")
    notified: asyncio.Queue[str] = asyncio.Queue()

    async def on_notify(request: RemotingCommand, channel) -> None:
        await notified.put(request.ext_fields["consumerGroup"])

    first, second, observer = RemotingClient(), RemotingClient(), RemotingClient()
    first.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
    try:
        await invoke_ok(first, addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6",
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
        await invoke_ok(first, addr, RequestCode.HEART_BEAT, body=heartbeat_body("client-1", GROUP, TOPIC))
        assert await consumer_ids(first, addr, GROUP) == ["client-1"]
        # The heartbeat created the group's retry topic, as upstream.
        topics = parse_json((await invoke_ok(first, addr, RequestCode.GET_ALL_TOPIC_CONFIG)).body)
        assert f"%RETRY%{GROUP}" in topics["topicConfigTable"]

        # A second member joins: the first is told at once (NOTIFY_CONSUMER_IDS_CHANGED, oneway).
        await invoke_ok(second, addr, RequestCode.HEART_BEAT, body=heartbeat_body("client-2", GROUP, TOPIC))
        assert await asyncio.wait_for(notified.get(), 5) == GROUP
        assert await consumer_ids(first, addr, GROUP) == ["client-1", "client-2"]
        connections = json.loads((await invoke_ok(first, addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                                  {"consumerGroup": GROUP})).body)
        assert sorted(c["clientId"] for c in connections["connectionSet"]) == ["client-1", "client-2"]
        assert connections["subscriptionTable"][TOPIC]["subString"] == "TagA || TagB"
        assert connections["messageModel"] == "CLUSTERING"
        producers = json.loads((await invoke_ok(first, addr, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                                {"producerGroup": "PG_HB"})).body)
        assert len(producers["connectionSet"]) == 2
        who = json.loads((await invoke_ok(first, addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC})).body)
        assert who["groupList"] == [GROUP]

        # A pull without FLAG_SUBSCRIPTION uses the heartbeat's subscription (TagA || TagB).
        for tag in ("TagA", "TagC", "TagB"):
            props = {"TAGS": tag, "UNIQ_KEY": f"{time.time_ns():032X}"}
            await invoke_ok(first, addr, RequestCode.SEND_MESSAGE_V2, {
                "a": "PG_HB", "b": TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "0",
                "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string(props)}, tag.encode())
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, {
            "consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
            "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0"})
        pulled = await first.invoke(addr, request, 5)
        assert pulled.code == ResponseCode.SUCCESS, pulled.remark
        assert [m.body for m in decode_records(pulled.body)] == [b"TagA", b"TagB"]

        # Orderly locks: client-1 holds queue 0, client-2 only gets the free queue 1.
        def lock_body(client_id: str, queues: list[int]) -> bytes:
            return json.dumps({"consumerGroup": GROUP, "clientId": client_id, "onlyThisBroker": True,
                               "mqSet": [{"topic": TOPIC, "brokerName": "broker-clients", "queueId": q}
                                         for q in queues]}).encode()

        def locked(response: RemotingCommand) -> list[int]:
            return sorted(mq["queueId"] for mq in json.loads(response.body)["lockOKMQSet"])

        assert locked(await invoke_ok(first, addr, RequestCode.LOCK_BATCH_MQ, body=lock_body("client-1", [0]))) == [0]
        assert locked(await invoke_ok(second, addr, RequestCode.LOCK_BATCH_MQ, body=lock_body("client-2", [0, 1]))) == [1]
        await invoke_ok(first, addr, RequestCode.UNLOCK_BATCH_MQ, body=lock_body("client-1", [0]))
        assert locked(await invoke_ok(second, addr, RequestCode.LOCK_BATCH_MQ, body=lock_body("client-2", [0]))) == [0]
        # An unrenewed lock lapses after rebalanceLockMaxLiveTime (shortened here).
        await invoke_ok(first, addr, RequestCode.UPDATE_BROKER_CONFIG, body=b"rebalanceLockMaxLiveTime=200\n")
        await asyncio.sleep(0.3)
        assert locked(await invoke_ok(first, addr, RequestCode.LOCK_BATCH_MQ, body=lock_body("client-1", [0, 1]))) == [0, 1]

        # The second member's connection closes: it leaves the group and the first is told.
        await second.close()
        assert await asyncio.wait_for(notified.get(), 5) == GROUP
        assert await consumer_ids(first, addr, GROUP) == ["client-1"]
        await invoke_ok(first, addr, RequestCode.UNREGISTER_CLIENT,
                        {"clientID": "client-1", "consumerGroup": GROUP, "producerGroup": "PG_HB"})
        gone = await first.invoke(addr, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                                {"consumerGroup": GROUP}), 5)
        assert gone.code == ResponseCode.SYSTEM_ERROR

        # A member that stops sending heartbeats expires (120 s upstream, shortened here).
        await invoke_ok(first, addr, RequestCode.HEART_BEAT, body=heartbeat_body("client-1", GROUP, TOPIC))
        await invoke_ok(first, addr, RequestCode.UPDATE_BROKER_CONFIG,
                        body=b"channelExpiredTimeout=300\nclientChannelScanInterval=100\n")
        # Asked on a connection of its own: the expiry closes client-1's channel (as upstream's
        # ClientHousekeepingService does), which may cut a request in flight on it.
        for _ in range(100):
            listed = await observer.invoke(addr, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                                         {"consumerGroup": GROUP}), 5)
            if listed.code == ResponseCode.SYSTEM_ERROR:
                break
            await asyncio.sleep(0.05)
        assert listed.code == ResponseCode.SYSTEM_ERROR, "a silent consumer never expired"
    finally:
        await first.close()
        await second.close()
        await observer.close()


def heartbeat_v2_body(client_id: str, group: str, topic: str, fingerprint: int, without_sub: bool) -> bytes:
    """What a 5.x client sends once the broker said IS_SUPPORT_HEART_BEAT_V2 (MQClientInstance
    #sendHeartbeatToBrokerV2): its fingerprint, and no subscription when it did not change."""
    data = json.loads(heartbeat_body(client_id, group, topic))
    data["heartbeatFingerprint"] = fingerprint
    data["withoutSub"] = without_sub
    if without_sub:
        data["consumerDataSet"][0]["subscriptionDataSet"] = []
    return json.dumps(data).encode()


async def test_heartbeat_v2_keeps_the_subscription_and_asks_for_it_when_needed(procs, tmp_path: Path) -> None:
    addr = await start_single_broker(procs, tmp_path, "broker-hb-v2")
    group = "CG_HB_V2"

    async def subscription(client: RemotingClient) -> dict:
        connections = json.loads((await invoke_ok(client, addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                                  {"consumerGroup": group})).body)
        return connections["subscriptionTable"]

    async with RemotingClient() as client:
        await invoke_ok(client, addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6",
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
        # A V1 heartbeat: the broker says it speaks V2, and (V1 has no fingerprint) "changed".
        v1 = await invoke_ok(client, addr, RequestCode.HEART_BEAT, body=heartbeat_body("c-1", group, TOPIC))
        assert (v1.ext_fields["IS_SUPPORT_HEART_BEAT_V2"], v1.ext_fields["IS_SUB_CHANGE"]) == ("true", "true")
        # A V2 heartbeat in full, then fingerprint-only ones: the subscription stays.
        full = await invoke_ok(client, addr, RequestCode.HEART_BEAT,
                               body=heartbeat_v2_body("c-1", group, TOPIC, 1234, without_sub=False))
        assert full.ext_fields["IS_SUB_CHANGE"] == "true"  # 0 before, 1234 now
        again = await invoke_ok(client, addr, RequestCode.HEART_BEAT,
                                body=heartbeat_v2_body("c-1", group, TOPIC, 1234, without_sub=False))
        assert again.ext_fields["IS_SUB_CHANGE"] == "false"
        simple = await invoke_ok(client, addr, RequestCode.HEART_BEAT,
                                 body=heartbeat_v2_body("c-1", group, TOPIC, 1234, without_sub=True))
        assert simple.ext_fields["IS_SUB_CHANGE"] == "false"
        assert (await subscription(client))[TOPIC]["subString"] == "TagA || TagB"
        assert await consumer_ids(client, addr, group) == ["c-1"]
        # Another member with another fingerprint: the group's subscription changed, say so.
        async with RemotingClient() as second:  # a member has a connection of its own
            other = await invoke_ok(second, addr, RequestCode.HEART_BEAT,
                                    body=heartbeat_v2_body("c-2", group, TOPIC, 999, without_sub=True))
            assert other.ext_fields["IS_SUB_CHANGE"] == "true"
            assert await consumer_ids(client, addr, group) == ["c-1", "c-2"]
        # A fingerprint-only heartbeat of a group this broker never heard of (it restarted): asked to resend.
        unknown = await invoke_ok(client, addr, RequestCode.HEART_BEAT,
                                  body=heartbeat_v2_body("c-3", "CG_HB_NEW", TOPIC, 77, without_sub=True))
        assert unknown.ext_fields["IS_SUB_CHANGE"] == "true"
        bad = await client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, {}, json.dumps(
            {"clientID": "c-4", "heartbeatFingerprint": "x", "consumerDataSet": [], "producerDataSet": []}).encode()), 5)
        assert bad.code == ResponseCode.SYSTEM_ERROR and "heartbeatFingerprint" in bad.remark


async def test_queries_stats_and_reset_offset(procs, tmp_path: Path) -> None:
    from orbitmq.common import fastjson

    addr = await start_single_broker(procs, tmp_path, "broker-query")
    async with RemotingClient() as client:
        await invoke_ok(client, addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6",
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
        msg_ids = []
        for i in range(4):
            response = await send(client, addr, TOPIC, f"order-{i}".encode(), 0)
            msg_ids.append(response.ext_fields["msgId"])
            if i == 1:
                await asyncio.sleep(0.05)
                middle = int(time.time() * 1000)
                await asyncio.sleep(0.05)

        def offset_of(response: RemotingCommand) -> int:
            return int(response.ext_fields["offset"])

        q0 = {"topic": TOPIC, "queueId": "0"}
        assert offset_of(await invoke_ok(client, addr, RequestCode.GET_MAX_OFFSET, q0)) == 4
        assert offset_of(await invoke_ok(client, addr, RequestCode.GET_MIN_OFFSET, q0)) == 0
        assert offset_of(await invoke_ok(client, addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                                         {**q0, "timestamp": str(middle)})) == 2
        earliest = await invoke_ok(client, addr, RequestCode.GET_EARLIEST_MSG_STORETIME, q0)
        assert 0 < int(earliest.ext_fields["timestamp"]) <= middle

        # VIEW_MESSAGE_BY_ID: the body is the raw record at the msgId's CommitLog offset.
        from orbitmq.common.message_id import decode_offset_message_id

        _, _, phy = decode_offset_message_id(msg_ids[2])
        viewed = await invoke_ok(client, addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(phy)})
        assert [m.body for m in decode_records(viewed.body)] == [b"order-2"]
        # QUERY_MESSAGE by key (the KEYS property) within a time range, via the index.
        found = None
        for _ in range(50):  # the index is built by the dispatcher just after the store
            found = await client.invoke(addr, RemotingCommand.request(RequestCode.QUERY_MESSAGE, {
                "topic": TOPIC, "key": "order-3", "maxNum": "10", "beginTimestamp": "0",
                "endTimestamp": str(int(time.time() * 1000) + 60_000)}), 5)
            if found.code == ResponseCode.SUCCESS:
                break
            await asyncio.sleep(0.05)
        assert found.code == ResponseCode.SUCCESS, found.remark
        assert [m.body for m in decode_records(found.body)] == [b"order-3"]
        assert int(found.ext_fields["indexLastUpdateTimestamp"]) > 0

        # Topic stats and consume stats, MessageQueue-keyed as fastjson writes them.
        await invoke_ok(client, addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                        {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "commitOffset": "1"})
        stats = fastjson.loads((await invoke_ok(client, addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": TOPIC})).body)
        table = {key.as_dict()["queueId"]: value for key, value in stats["offsetTable"].items()}
        assert table[0]["maxOffset"] == 4 and table[0]["minOffset"] == 0 and table[0]["lastUpdateTimestamp"] > 0
        assert table[1]["maxOffset"] == 0
        consume = fastjson.loads((await invoke_ok(client, addr, RequestCode.GET_CONSUME_STATS,
                                                  {"consumerGroup": GROUP, "topic": TOPIC})).body)
        rows = {key.as_dict()["queueId"]: value for key, value in consume["offsetTable"].items()}
        assert (rows[0]["brokerOffset"], rows[0]["consumerOffset"]) == (4, 1)
        assert "consumeTps" in consume
        runtime = json.loads((await invoke_ok(client, addr, RequestCode.GET_BROKER_RUNTIME_INFO)).body)
        assert runtime["table"]["brokerName"] == "broker-query"

        # Reset the group's offsets to a timestamp: the broker answers ResetOffsetBody and stores them.
        reset = await invoke_ok(client, addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {
            "topic": TOPIC, "group": GROUP, "timestamp": str(middle), "isForce": "true"})
        body = fastjson.loads(reset.body)
        assert {k.as_dict()["queueId"]: v for k, v in body["offsetTable"].items()} == {0: 2, 1: 0}
        assert await query_offset(client, addr, 0) == 2
        await invoke_ok(client, addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {
            "topic": TOPIC, "group": GROUP, "timestamp": "-1", "isForce": "true"})
        assert await query_offset(client, addr, 0) == 4

        # SEND_MESSAGE (10) with the long header names.
        v1 = await invoke_ok(client, addr, RequestCode.SEND_MESSAGE, {
            "producerGroup": "PG_V1", "topic": TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
            "queueId": "1", "sysFlag": "0", "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
            "properties": properties_to_string({"UNIQ_KEY": "V1KEY"}), "reconsumeTimes": "0"}, b"v1-body")
        assert (v1.ext_fields["queueId"], v1.ext_fields["queueOffset"]) == ("1", "0")

        # A send to %RETRY%<group> whose reconsumeTimes reached maxReconsumeTimes lands in the
        # write-only %DLQ%<group> (handleRetryAndDLQ).
        dead = await invoke_ok(client, addr, RequestCode.SEND_MESSAGE_V2, {
            "a": "PG_RETRY", "b": f"%RETRY%{GROUP}", "c": "TBW102", "d": "4", "e": "0", "f": "0",
            "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string({"UNIQ_KEY": "DEADKEY"}),
            "j": "3", "l": "2"}, b"dead-letter")
        _, _, dead_phy = decode_offset_message_id(dead.ext_fields["msgId"])
        dead_view = await invoke_ok(client, addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(dead_phy)})
        assert [(m.topic, m.body) for m in decode_records(dead_view.body)] == [(f"%DLQ%{GROUP}", b"dead-letter")]
        all_topics = parse_json((await invoke_ok(client, addr, RequestCode.GET_ALL_TOPIC_CONFIG)).body)
        assert all_topics["topicConfigTable"][f"%DLQ%{GROUP}"]["perm"] == 2

        # Deleting the topic drops its data and offsets.
        await invoke_ok(client, addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": TOPIC})
        assert await query_offset(client, addr, 0) == -1
        missing = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_TOPIC_STATS_INFO,
                                                                    {"topic": TOPIC}), 5)
        assert missing.code == ResponseCode.TOPIC_NOT_EXIST
