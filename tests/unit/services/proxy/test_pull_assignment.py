"""QueryAssignment of subscribed PULL_CONSUMER clients: the group's live clients share the queues
(AllocateMessageQueueAveragely), and a queue reaches its new owner only once its previous owner
has released it (services/proxy/pull_assignment.py)."""

from __future__ import annotations

import asyncio

from orbitmq.broker.client.rebalance_lock import RebalanceLockManager
from orbitmq.client import MessageQueueRef
from orbitmq.common.constants import PERM_READ, PERM_WRITE
from orbitmq.common.route import BrokerData, QueueData, TopicRouteData
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy.client_manager import ClientManager
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.context import ProxyContext
from orbitmq.proxy.pull_assignment import PullAssignments
from orbitmq.proxy.route import RouteActivity

KEY = ("", "G", "T")
QUEUES = [("b", i) for i in range(8)]


def test_live_members_share_the_queues_averagely() -> None:
    async def run() -> None:
        live = ["c2", "c1", "c3"]
        pa = PullAssignments(lambda ns, group, topic: live)
        # Each asks once a scan; the first to ask gets everything, then the hand-offs follow.
        for _ in range(3):
            got = {c: await pa.assign(KEY, c, QUEUES) for c in ("c1", "c2", "c3")}
        # AllocateMessageQueueAveragely over sorted ids: 3, 3, 2 contiguous queues
        assert got == {"c1": QUEUES[0:3], "c2": QUEUES[3:6], "c3": QUEUES[6:8]}
        assert await pa.assign(KEY, "stranger", QUEUES) == []  # not live: nothing (upstream: not in cidAll)

    asyncio.run(run())


def test_a_queue_moves_only_after_its_owner_released_it() -> None:
    async def run() -> None:
        live = ["c1"]
        pa = PullAssignments(lambda ns, group, topic: live)
        assert await pa.assign(KEY, "c1", QUEUES) == QUEUES
        live.append("c2")
        # c1 still holds everything: the newcomer waits
        assert await pa.assign(KEY, "c2", QUEUES) == []
        # c1 is told its new share; until it asks again it may still be reading (and committing) the rest
        assert await pa.assign(KEY, "c1", QUEUES) == QUEUES[0:4]
        assert await pa.assign(KEY, "c2", QUEUES) == []
        # c1's next request shows it let go of queues 4..7
        assert await pa.assign(KEY, "c1", QUEUES) == QUEUES[0:4]
        assert await pa.assign(KEY, "c2", QUEUES) == QUEUES[4:8]

    asyncio.run(run())


def test_a_leaving_member_frees_its_queues_at_once() -> None:
    async def run() -> None:
        live = ["c1", "c2"]
        pa = PullAssignments(lambda ns, group, topic: live)
        await pa.assign(KEY, "c1", QUEUES)
        await pa.assign(KEY, "c2", QUEUES)
        live.remove("c2")  # its stream closed (killed) or it stopped heartbeating
        assert await pa.assign(KEY, "c1", QUEUES) == QUEUES
        await pa.forget("c1")
        assert pa._holdings == {}

    asyncio.run(run())


def test_clients_that_never_ask_are_no_members() -> None:
    async def run() -> None:
        live = ["c1", "assigner"]  # "assigner" reads queues it assign()ed: never asks for a share
        pa = PullAssignments(lambda ns, group, topic: live)
        assert await pa.assign(KEY, "c1", QUEUES) == QUEUES

    asyncio.run(run())


class _NoNameServer:
    async def cluster_info(self) -> None:
        raise ConnectionRefusedError("no NameServer in this test")  # the HeartbeatSyncer retries


class _Cluster:
    """ClusterService and MQClientAPI of one broker set "b", its rebalance locks the broker's own."""

    def __init__(self) -> None:
        self.route_data = TopicRouteData(
            queue_datas=[QueueData("b", 8, 8, PERM_READ | PERM_WRITE)],
            broker_datas=[BrokerData("C", "b", {0: "127.0.0.1:10911"})])
        self.api = self
        self.routes = _NoNameServer()
        self.broker_locks = RebalanceLockManager()

    async def route(self, topic: str) -> TopicRouteData:
        return self.route_data

    async def broker_addr(self, broker_name: str, topic: str | None = None) -> str:
        return "127.0.0.1:10911"

    async def lock_batch_mq(self, addr: str, group: str, client_id: str, refs: list) -> set[MessageQueueRef]:
        keys = [(r.topic, r.broker_name, r.queue_id) for r in refs]
        return {MessageQueueRef(*k) for k in self.broker_locks.try_lock_batch(group, keys, client_id)}

    async def unlock_batch_mq(self, addr: str, group: str, client_id: str, refs: list) -> None:
        self.broker_locks.unlock_batch(group, [(r.topic, r.broker_name, r.queue_id) for r in refs], client_id)

    async def group_config(self, group: str) -> None:
        return None

    async def heartbeat(self, *args: object) -> None:
        return None


def _ctx(client_id: str) -> ProxyContext:
    return ProxyContext(client_id, "PYTHON", "5.0.0", "127.0.0.1:1", "", None)


def _pull_settings() -> pb.Settings:
    settings = pb.Settings(client_type=pb.ClientType.PULL_CONSUMER)
    settings.subscription.group.name = "G"
    settings.subscription.subscriptions.add(topic=pb.Resource(name="T"), expression=pb.FilterExpression(
        type=pb.FilterType.TAG, expression="*"))
    return settings


def test_pull_consumers_heartbeat_and_split_a_topic_through_the_proxy() -> None:
    async def run() -> None:
        cluster = _Cluster()
        clients = ClientManager(ProxyConfig(), cluster)  # type: ignore[arg-type]
        route = RouteActivity(ProxyConfig(), cluster, clients)  # type: ignore[arg-type]
        for cid in ("p1", "p2"):
            clients.attach_stream(_ctx(cid))
            await clients.on_settings(_ctx(cid), _pull_settings())
            beat = await clients.heartbeat(_ctx(cid), spb.HeartbeatRequest(
                group=pb.Resource(name="G"), client_type=pb.ClientType.PULL_CONSUMER))
            assert beat.status.code == pb.Code.OK, beat.status.message
        request = spb.QueryAssignmentRequest(topic=pb.Resource(name="T"), group=pb.Resource(name="G"))

        async def share(cid: str) -> list[int]:
            response = await route.query_assignment(request, _ctx(cid))
            assert response.status.code == pb.Code.OK
            return [a.message_queue.id for a in response.assignments]

        assert await share("p1") == list(range(8))  # the only one asking so far
        assert await share("p2") == []  # p1 holds them all
        assert await share("p1") == [0, 1, 2, 3]  # p1 lets 4..7 go ...
        assert await share("p2") == []
        assert await share("p1") == [0, 1, 2, 3]  # ... and asking again shows it did
        assert await share("p2") == [4, 5, 6, 7]
        # p2's Telemetry stream ends (kill -9): p1 takes every queue at its next request
        client = clients.clients["p2"]
        assert client.outbox is not None
        clients.detach_stream("p2", client.outbox)
        assert await share("p1") == list(range(8))
        # a push consumer's QueryAssignment is as before: one broker-level assignment (queue id -1)
        response = await route.query_assignment(request, _ctx("someone-else"))
        assert [a.message_queue.id for a in response.assignments] == [-1]
        # the broker holds p1's locks, under its id and the group's name
        assert sorted(cluster.broker_locks.mq_lock_table["G"]) == [("T", "b", i) for i in range(8)]
        assert {e.client_id for e in cluster.broker_locks.mq_lock_table["G"].values()} == {"p1"}
        await route.shutdown()
        await clients.shutdown()

    asyncio.run(run())
