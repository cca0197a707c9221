"""The NameServer as a real process on loopback, driven over Remoting by fake brokers and clients."""

from __future__ import annotations

import asyncio
import json
import time

from orbitmq.common.route import (
    ClusterInfo,
    DataVersion,
    KVTable,
    QueueData,
    RegisterBrokerBody,
    TopicConfigAndMappingSerializeWrapper,
    TopicList,
    TopicRouteData,
)
from orbitmq.common.topic_config import TopicConfig
from orbitmq.namesrv import NamesrvConfig, NamesrvController
from orbitmq.remoting import RemotingClient, RemotingCommand, RemotingServer, RequestCode, ResponseCode
from orbitmq.remoting.headers import RegisterBrokerRequestHeader
from tests.support import NAMESRV_BOOT_TEXT, astart_namesrv, free_port

FAQ = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


def topics(*specs: tuple[str, int, int]) -> dict[str, TopicConfig]:
    """Brokers always register several topics (upstream rejects a first registration of exactly one)."""
    table = {"TBW102": TopicConfig("TBW102", 8, 8, 7)}
    for name, read, write in specs:
        table[name] = TopicConfig(name, read, write)
    return table


class FakeBroker:
    """Registers like a broker would, over its own connection (closing it is the broker dying)."""

    def __init__(self, namesrv: str, cluster: str, name: str, broker_id: int, port: int,
                 table: dict[str, TopicConfig]) -> None:
        self.namesrv = namesrv
        self.cluster, self.name, self.broker_id = cluster, name, broker_id
        self.addr = f"127.0.0.1:{port}"
        self.ha_addr = f"127.0.0.1:{port + 1}"
        self.wrapper = TopicConfigAndMappingSerializeWrapper(table)
        self.client = RemotingClient()

    def header(self, **extra) -> dict[str, str]:
        fields = RegisterBrokerRequestHeader(broker_name=self.name, broker_addr=self.addr,
                                             cluster_name=self.cluster, ha_server_addr=self.ha_addr,
                                             broker_id=self.broker_id, **extra).to_ext_fields()
        return fields

    async def register(self, compressed: bool = False) -> RemotingCommand:
        body = RegisterBrokerBody(self.wrapper, []).encode(compressed)
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, self.header(compressed=compressed), body)
        return await self.client.invoke(self.namesrv, request)

    async def heartbeat(self) -> RemotingCommand:
        request = RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, {
            "clusterName": self.cluster, "brokerAddr": self.addr, "brokerName": self.name,
            "brokerId": str(self.broker_id)})
        return await self.client.invoke(self.namesrv, request)

    async def close(self) -> None:
        await self.client.close()


async def call(client: RemotingClient, addr: str, code: int, fields: dict[str, str] | None = None,
               body: bytes = b"") -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, fields or {}, body))


async def route(client: RemotingClient, addr: str, topic: str) -> RemotingCommand:
    return await call(client, addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


async def eventually(predicate, timeout: float = 10.0, what: str = "condition") -> None:  # noqa: ASYNC109
    """Poll an async predicate until it holds (state changes are asynchronous, not timed)."""
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def test_register_route_cluster_and_topics(procs, tmp_path, async_remoting_client):
    _, ns = await astart_namesrv(procs)
    client = async_remoting_client
    a = FakeBroker(ns, "ClusterA", "broker-a", 0, free_port(), topics(("Shared", 4, 4), ("OnlyA", 2, 2)))
    b = FakeBroker(ns, "ClusterA", "broker-b", 0, free_port(), topics(("Shared", 8, 8)))
    c = FakeBroker(ns, "ClusterB", "broker-c", 0, free_port(), topics(("OnlyC", 1, 1)))
    try:
        for broker in (a, b, c):
            resp = await broker.register()
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            assert "masterAddr" not in resp.ext_fields  # masters get no master address back

        resp = await route(client, ns, "Shared")
        assert resp.code == ResponseCode.SUCCESS
        data = TopicRouteData.decode(resp.body)
        assert {(q.broker_name, q.read_queue_nums, q.write_queue_nums) for q in data.queue_datas} == {
            ("broker-a", 4, 4), ("broker-b", 8, 8)}
        assert {bd.broker_name: bd.broker_addrs for bd in data.broker_datas} == {
            "broker-a": {0: a.addr}, "broker-b": {0: b.addr}}
        assert all(bd.cluster == "ClusterA" for bd in data.broker_datas)
        raw = json.loads(resp.body)  # standard JSON with RocketMQ's field names
        assert set(raw) >= {"queueDatas", "brokerDatas", "filterServerTable"}
        assert raw["brokerDatas"][0]["brokerAddrs"].keys() == {"0"}

        resp = await route(client, ns, "NoSuchTopic")
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        assert resp.remark == "No topic route info in name server for the topic: NoSuchTopic" + FAQ

        resp = await call(client, ns, RequestCode.GET_BROKER_CLUSTER_INFO)
        info = ClusterInfo.decode(resp.body)
        assert info.cluster_addr_table == {"ClusterA": {"broker-a", "broker-b"}, "ClusterB": {"broker-c"}}
        assert info.broker_addr_table["broker-c"].broker_addrs == {0: c.addr}

        resp = await call(client, ns, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        assert set(TopicList.decode(resp.body).topic_list) == {"TBW102", "Shared", "OnlyA", "OnlyC"}
        resp = await call(client, ns, RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "ClusterB"})
        assert set(TopicList.decode(resp.body).topic_list) == {"TBW102", "OnlyC"}

        # Deleting in one cluster keeps the other cluster's queues; without a cluster it goes entirely.
        resp = await call(client, ns, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "TBW102", "clusterName": "ClusterA"})
        assert resp.code == ResponseCode.SUCCESS
        data = TopicRouteData.decode((await route(client, ns, "TBW102")).body)
        assert [q.broker_name for q in data.queue_datas] == ["broker-c"]
        resp = await call(client, ns, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "Shared"})
        assert resp.code == ResponseCode.SUCCESS
        assert (await route(client, ns, "Shared")).code == ResponseCode.TOPIC_NOT_EXIST
        resp = await call(client, ns, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        assert "Shared" not in TopicList.decode(resp.body).topic_list

        # A slave learns its master's address and HA address; its topics do not replace the master's.
        slave = FakeBroker(ns, "ClusterA", "broker-a", 1, free_port(), topics(("OnlyA", 99, 99)))
        try:
            resp = await slave.register()
            assert resp.code == ResponseCode.SUCCESS
            assert resp.ext_fields.get("masterAddr") == a.addr
            assert resp.ext_fields.get("haServerAddr") == a.ha_addr
            data = TopicRouteData.decode((await route(client, ns, "OnlyA")).body)
            assert data.queue_datas[0].read_queue_nums == 2
            assert data.broker_datas[0].broker_addrs == {0: a.addr, 1: slave.addr}
        finally:
            await slave.close()

        # UNREGISTER_BROKER removes the broker and every topic only it served.
        resp = await call(client, ns, RequestCode.UNREGISTER_BROKER, {
            "brokerName": "broker-c", "brokerAddr": c.addr, "clusterName": "ClusterB", "brokerId": "0"})
        assert resp.code == ResponseCode.SUCCESS
        assert (await route(client, ns, "OnlyC")).code == ResponseCode.TOPIC_NOT_EXIST
        info = ClusterInfo.decode((await call(client, ns, RequestCode.GET_BROKER_CLUSTER_INFO)).body)
        assert "ClusterB" not in info.cluster_addr_table
    finally:
        for broker in (a, b, c):
            await broker.close()


async def test_compressed_registration_and_order_topic_conf(procs, tmp_path, async_remoting_client):
    _, ns = await astart_namesrv(procs, "orderMessageEnable=true")
    client = async_remoting_client
    resp = await call(client, ns, RequestCode.PUT_KV_CONFIG,
                      {"namespace": "ORDER_TOPIC_CONFIG", "key": "Orders", "value": "broker-z:4"})
    assert resp.code == ResponseCode.SUCCESS
    z = FakeBroker(ns, "C", "broker-z", 0, free_port(), topics(("Orders", 4, 4)))
    try:
        resp = await z.register(compressed=True)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert KVTable.decode(resp.body).table == {"Orders": "broker-z:4"}  # order config back to the broker
        data = TopicRouteData.decode((await route(client, ns, "Orders")).body)
        assert data.order_topic_conf == "broker-z:4"
        assert data.queue_datas[0].write_queue_nums == 4
    finally:
        await z.close()


async def test_kv_config_survives_restart(procs, tmp_path, async_remoting_client):
    kv_path = tmp_path / "kv" / "kvConfig.json"
    proc, ns = await astart_namesrv(procs, kv_path=kv_path, name="ns-first")
    client = async_remoting_client
    for key, value in (("k1", "v1"), ("k2", "v2")):
        resp = await call(client, ns, RequestCode.PUT_KV_CONFIG, {"namespace": "NS", "key": key, "value": value})
        assert resp.code == ResponseCode.SUCCESS
    assert (await call(client, ns, RequestCode.DELETE_KV_CONFIG, {"namespace": "NS", "key": "k2"})).code == 0
    resp = await call(client, ns, RequestCode.GET_KV_CONFIG, {"namespace": "NS", "key": "k1"})
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["value"] == "v1"
    resp = await call(client, ns, RequestCode.GET_KV_CONFIG, {"namespace": "NS", "key": "k2"})
    assert resp.code == ResponseCode.QUERY_NOT_FOUND
    assert resp.remark == "No config item, Namespace: NS Key: k2"
    assert json.loads(kv_path.read_text()) == {"configTable": {"NS": {"k1": "v1"}}}

    assert await proc.async_stop() == 0  # SIGTERM is a clean shutdown
    assert "The Name Server shutdown OK" in proc.log_text()
    await client.close_channel(ns)
    _, ns2 = await astart_namesrv(procs, kv_path=kv_path, name="ns-second")
    resp = await call(client, ns2, RequestCode.GET_KV_CONFIG, {"namespace": "NS", "key": "k1"})
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["value"] == "v1"
    resp = await call(client, ns2, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "NS"})
    assert KVTable.decode(resp.body).table == {"k1": "v1"}
    resp = await call(client, ns2, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "Nope"})
    assert resp.code == ResponseCode.QUERY_NOT_FOUND


async def test_silent_broker_expires_and_closed_connection_leaves_at_once(procs, tmp_path, async_remoting_client):
    _, ns = await astart_namesrv(procs, "brokerChannelExpiredTime=2500",
                                "scanNotActiveBrokerInterval=300")
    client = async_remoting_client
    silent = FakeBroker(ns, "C", "silent", 0, free_port(), topics(("SilentTopic", 1, 1)))
    alive = FakeBroker(ns, "C", "alive", 0, free_port(), topics(("AliveTopic", 1, 1)))
    closing = FakeBroker(ns, "C", "closing", 0, free_port(), topics(("ClosingTopic", 1, 1)))
    try:
        for broker in (silent, alive, closing):
            assert (await broker.register()).code == ResponseCode.SUCCESS

        await closing.close()  # the connection closes: gone without waiting for the expiry

        async def closing_gone() -> bool:
            return (await route(client, ns, "ClosingTopic")).code == ResponseCode.TOPIC_NOT_EXIST
        await eventually(closing_gone, what="closed broker to leave the routes")
        # Registered together with the closed one: had expiry removed that, it would be gone too.
        assert (await route(client, ns, "SilentTopic")).code == ResponseCode.SUCCESS

        async def silent_gone() -> bool:
            assert (await alive.heartbeat()).code == ResponseCode.SUCCESS
            return (await route(client, ns, "SilentTopic")).code == ResponseCode.TOPIC_NOT_EXIST
        await eventually(silent_gone, what="silent broker to expire")
        assert (await route(client, ns, "AliveTopic")).code == ResponseCode.SUCCESS
        info = ClusterInfo.decode((await call(client, ns, RequestCode.GET_BROKER_CLUSTER_INFO)).body)
        assert info.cluster_addr_table == {"C": {"alive"}}
    finally:
        for broker in (silent, alive, closing):
            await broker.close()


async def test_two_namesrvs_are_independent(procs, tmp_path, async_remoting_client):
    (_, ns1), (_, ns2) = await asyncio.gather(astart_namesrv(procs, name="ns-1"),
                                              astart_namesrv(procs, name="ns-2"))
    client = async_remoting_client
    one = FakeBroker(ns1, "C", "only-on-1", 0, free_port(), topics(("T1", 1, 1)))
    two = FakeBroker(ns2, "C", "only-on-2", 0, free_port(), topics(("T2", 1, 1)))
    try:
        assert (await one.register()).code == ResponseCode.SUCCESS
        assert (await two.register()).code == ResponseCode.SUCCESS
        assert (await route(client, ns1, "T1")).code == ResponseCode.SUCCESS
        assert (await route(client, ns2, "T1")).code == ResponseCode.TOPIC_NOT_EXIST
        assert (await route(client, ns2, "T2")).code == ResponseCode.SUCCESS
        assert (await route(client, ns1, "T2")).code == ResponseCode.TOPIC_NOT_EXIST
        await call(client, ns1, RequestCode.PUT_KV_CONFIG, {"namespace": "N", "key": "k", "value": "v"})
        resp = await call(client, ns2, RequestCode.GET_KV_CONFIG, {"namespace": "N", "key": "k"})
        assert resp.code == ResponseCode.QUERY_NOT_FOUND
    finally:
        await one.close()
        await two.close()


async def test_malformed_requests_get_errors_and_namesrv_keeps_serving(procs, tmp_path, async_remoting_client):
    proc, ns = await astart_namesrv(procs)
    client = async_remoting_client
    good = FakeBroker(ns, "C", "good", 0, free_port(), topics(("Good", 1, 1)))
    try:
        fields = good.header()
        missing = dict(fields)
        del missing["brokerId"]
        body = RegisterBrokerBody(good.wrapper).encode()
        resp = await call(client, ns, RequestCode.REGISTER_BROKER, missing, body)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "brokerId" in resp.remark
        resp = await call(client, ns, RequestCode.REGISTER_BROKER, {**fields, "brokerId": "zero"}, body)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "brokerId" in resp.remark
        resp = await call(client, ns, RequestCode.REGISTER_BROKER, fields, b"{not json at all")
        assert resp.code == ResponseCode.SYSTEM_ERROR and "RegisterBrokerBody" in resp.remark
        resp = await call(client, ns, RequestCode.REGISTER_BROKER, {**fields, "compressed": "true"}, b"garbage")
        assert resp.code == ResponseCode.SYSTEM_ERROR
        wrong_type = b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"X":{"topicName":"X","perm":"rw"}}}}'
        resp = await call(client, ns, RequestCode.REGISTER_BROKER, fields, wrong_type)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        resp = await call(client, ns, RequestCode.REGISTER_BROKER, {**fields, "bodyCrc32": "12345"}, body)
        assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "crc32 not match"
        resp = await call(client, ns, RequestCode.GET_ROUTEINFO_BY_TOPIC, {})
        assert resp.code == ResponseCode.SYSTEM_ERROR and "topic" in resp.remark
        resp = await call(client, ns, RequestCode.PUT_KV_CONFIG, {"namespace": "N"})
        assert resp.code == ResponseCode.SYSTEM_ERROR
        resp = await call(client, ns, RequestCode.QUERY_DATA_VERSION, {
            "brokerName": "good", "brokerAddr": good.addr, "clusterName": "C", "brokerId": "0"}, b"[1,2")
        assert resp.code == ResponseCode.SYSTEM_ERROR
        resp = await call(client, ns, 99999)
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert resp.remark == " request type 99999 not supported"
        resp = await call(client, ns, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/tmp/evil")
        assert resp.code == ResponseCode.NO_PERMISSION
        resp = await call(client, ns, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"enableTopicList=maybe")
        assert resp.code == ResponseCode.INVALID_PARAMETER

        # Nothing above registered anything, and the server still works.
        assert (await route(client, ns, "Good")).code == ResponseCode.TOPIC_NOT_EXIST
        assert (await good.register()).code == ResponseCode.SUCCESS
        assert (await route(client, ns, "Good")).code == ResponseCode.SUCCESS
        assert proc.is_running()
    finally:
        await good.close()


async def test_namesrv_config_update_and_query(procs, tmp_path, async_remoting_client):
    conf = tmp_path / "namesrv.conf"
    port = free_port()
    conf.write_text(f"listenPort={port}\nbindAddress=127.0.0.1\nkvConfigPath={tmp_path / 'kv.json'}\n")
    await procs.astart("namesrv", ["-c", str(conf)], ready_port=port, ready_text=NAMESRV_BOOT_TEXT)
    ns = f"127.0.0.1:{port}"
    client = async_remoting_client
    resp = await call(client, ns, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"enableAllTopicList=false\n")
    assert resp.code == ResponseCode.SUCCESS
    resp = await call(client, ns, RequestCode.GET_NAMESRV_CONFIG)
    assert "enableAllTopicList=false" in resp.body.decode().splitlines()
    resp = await call(client, ns, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "disable"
    assert "enableAllTopicList=false" in conf.read_text().splitlines()  # written back to the -c file


async def test_master_connection_loss_notifies_slaves_and_routes_to_acting_master(procs, tmp_path,
                                                                                   async_remoting_client):
    _, ns = await astart_namesrv(procs, "supportActingMaster=true", "notifyMinBrokerIdChanged=true")
    client = async_remoting_client
    notified: asyncio.Queue[RemotingCommand] = asyncio.Queue()

    async def on_notify(request: RemotingCommand, channel) -> None:
        await notified.put(request)

    slave_server = RemotingServer("127.0.0.1", 0)  # the slave's own Remoting port receives the notice
    slave_server.register(RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE, on_notify)
    await slave_server.start()
    master = FakeBroker(ns, "C", "broker-x", 0, free_port(), topics(("Acting", 4, 4)))
    slave = FakeBroker(ns, "C", "broker-x", 1, slave_server.port, topics(("Acting", 4, 4)))
    try:
        for broker in (master, slave):
            request = RemotingCommand.request(
                RequestCode.REGISTER_BROKER, broker.header(enable_acting_master=True),
                RegisterBrokerBody(broker.wrapper).encode())
            assert (await broker.client.invoke(ns, request)).code == ResponseCode.SUCCESS

        await master.close()  # the master dies
        notice = await asyncio.wait_for(notified.get(), 10)
        assert notice.ext_fields["minBrokerId"] == "1"
        assert notice.ext_fields["minBrokerAddr"] == slave.addr
        assert notice.ext_fields["offlineBrokerAddr"] == master.addr
        data = TopicRouteData.decode((await route(client, ns, "Acting")).body)
        assert data.broker_datas[0].broker_addrs == {0: slave.addr}  # the slave answers as master...
        assert data.queue_datas[0].perm & 2 == 0  # ...but read-only
    finally:
        await master.close()
        await slave.close()
        await slave_server.close()


async def test_controller_embeds_in_process(tmp_path, async_remoting_client):
    """`orbitmq local` runs the NameServer on its own event loop; port 0 picks a free port."""
    config = NamesrvConfig(listen_port=0, bind_address="127.0.0.1", kv_config_path=str(tmp_path / "kv.json"))
    controller = NamesrvController(config)
    await controller.start()
    try:
        broker = FakeBroker(controller.address, "C", "embedded", 0, free_port(), topics(("E", 2, 2)))
        try:
            assert (await broker.register()).code == ResponseCode.SUCCESS
            assert (await route(async_remoting_client, controller.address, "E")).code == ResponseCode.SUCCESS
            assert controller.route_info_manager.pickup_topic_route_data("E") is not None
        finally:
            await broker.close()
    finally:
        await controller.shutdown()


async def test_namesrv_fixture_serves_routes(namesrv, async_remoting_client):
    resp = await route(async_remoting_client, namesrv, "Anything")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST


async def test_data_version_perm_member_group_and_system_topics(procs, async_remoting_client):
    _, ns = await astart_namesrv(procs)
    client = async_remoting_client
    m = FakeBroker(ns, "C", "broker-m", 0, free_port(), topics(("T", 4, 4)))
    s = FakeBroker(ns, "C", "broker-m", 1, free_port(), topics(("T", 4, 4)))
    try:
        assert (await m.register()).code == ResponseCode.SUCCESS
        assert (await s.register()).code == ResponseCode.SUCCESS
        who = {"brokerName": "broker-m", "brokerAddr": m.addr, "clusterName": "C", "brokerId": "0"}

        resp = await call(client, ns, RequestCode.QUERY_DATA_VERSION, who, m.wrapper.data_version.encode())
        assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["changed"] == "false"
        assert DataVersion.decode(resp.body) == m.wrapper.data_version
        newer = m.wrapper.data_version.copy()
        newer.next_version()
        resp = await call(client, ns, RequestCode.QUERY_DATA_VERSION, who, newer.encode())
        assert resp.ext_fields["changed"] == "true"

        resp = await call(client, ns, RequestCode.GET_BROKER_MEMBER_GROUP,
                          {"clusterName": "C", "brokerName": "broker-m"})
        group = json.loads(resp.body)["brokerMemberGroup"]
        assert group == {"cluster": "C", "brokerName": "broker-m", "brokerAddrs": {"0": m.addr, "1": s.addr}}

        resp = await call(client, ns, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-m"})
        assert resp.ext_fields["wipeTopicCount"] == "2"
        data = TopicRouteData.decode((await route(client, ns, "T")).body)
        assert data.queue_datas[0].perm == 4
        resp = await call(client, ns, RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-m"})
        assert resp.ext_fields["addTopicCount"] == "2"
        assert TopicRouteData.decode((await route(client, ns, "T")).body).queue_datas[0].perm == 6

        resp = await call(client, ns, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
        system = TopicList.decode(resp.body)
        assert system.topic_list == ["C", "broker-m"] and system.broker_addr == m.addr

        # REGISTER_TOPIC_IN_NAMESRV adds a route for known broker groups only.
        body = TopicRouteData(queue_datas=[QueueData("broker-m", 2, 2, 6)]).encode()
        resp = await call(client, ns, RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": "Static"}, body)
        assert resp.code == ResponseCode.SUCCESS
        assert TopicRouteData.decode((await route(client, ns, "Static")).body).queue_datas[0].read_queue_nums == 2
        body = TopicRouteData(queue_datas=[QueueData("unknown", 2, 2, 6)]).encode()
        await call(client, ns, RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": "Ghost"}, body)
        assert (await route(client, ns, "Ghost")).code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        await m.close()
        await s.close()
