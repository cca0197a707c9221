"""QueryRoute and QueryAssignment (RouteActivity): the proxy presents itself as every broker."""

from __future__ import annotations

import asyncio

from orbitmq.common.constants import MASTER_ID, is_readable, is_writeable
from orbitmq.common.route import TopicRouteData
from orbitmq.common.topic_config import TopicMessageType
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy import errors, validation
from orbitmq.proxy.client_manager import ClientManager
from orbitmq.proxy.cluster import ClusterService
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.context import ProxyContext
from orbitmq.proxy.heartbeat_syncer import HeartbeatSyncer
from orbitmq.proxy.pull_assignment import BrokerQueueLocks, PullAssignments

Code = pb.Code

ACCEPT_TYPES: dict[TopicMessageType, list[int]] = {
    TopicMessageType.NORMAL: [pb.MessageType.NORMAL],
    TopicMessageType.FIFO: [pb.MessageType.FIFO],
    TopicMessageType.DELAY: [pb.MessageType.DELAY],
    TopicMessageType.TRANSACTION: [pb.MessageType.TRANSACTION],
    TopicMessageType.PRIORITY: [pb.MessageType.PRIORITY],  # RouteActivity#parseTopicMessageType
    TopicMessageType.MIXED: [pb.MessageType.NORMAL, pb.MessageType.FIFO, pb.MessageType.DELAY,
                             pb.MessageType.TRANSACTION],
    TopicMessageType.UNSPECIFIED: [pb.MessageType.MESSAGE_TYPE_UNSPECIFIED],
}


def permission(perm: int) -> int:
    r, w = is_readable(perm), is_writeable(perm)
    if r and w:
        return pb.Permission.READ_WRITE
    if r:
        return pb.Permission.READ
    if w:
        return pb.Permission.WRITE
    return pb.Permission.NONE


class RouteActivity:
    def __init__(self, config: ProxyConfig, cluster: ClusterService, clients: ClientManager | None = None) -> None:
        self.config = config
        self.cluster = cluster
        # Subscribed PULL_CONSUMER clients share their group's queues (services/proxy/pull_assignment.py).
        self.clients = clients
        self.pull_assignments: PullAssignments | None = None
        # Members on the other proxies (services/proxy/heartbeat_syncer.py), started by the first
        # PULL_CONSUMER that asks.
        self.pull_sync: HeartbeatSyncer | None = None
        self._pending: set[asyncio.Task[None]] = set()
        if clients is not None:
            pa = self.pull_assignments = PullAssignments(clients.live_pull_consumers, BrokerQueueLocks(cluster))
            sync = self.pull_sync = HeartbeatSyncer(config, cluster, pa.members, on_tick=pa.sweep)
            pa.remote_members, pa.on_members_changed = sync.remote_members, sync.changed
            clients.client_gone_hooks.append(self._forget_pull_client)
            clients.stream_closed_hooks.append(self._pull_stream_closed)

    async def _forget_pull_client(self, client_id: str) -> None:
        if self.pull_assignments is not None:
            await self.pull_assignments.forget(client_id)

    def _pull_stream_closed(self, client_id: str) -> None:
        """A stream ended (a killed client's ends at once): its queues are free now, not at the next sweep."""
        if self.pull_assignments is None or not self.pull_assignments.holds(client_id):
            return
        task = asyncio.create_task(self.pull_assignments.sweep(renew=False))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def shutdown(self) -> None:
        """Stop the HeartbeatSyncer (its peers drop this proxy's members at once) and pending sweeps."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        if self.pull_sync is not None:
            await self.pull_sync.shutdown()

    def proxy_endpoints(self, requested: pb.Endpoints) -> pb.Endpoints:
        """Where clients reach this proxy: localServeAddr, else the host they dialled with
        grpcServerPort, or with the port they dialled too when useEndpointPortFromRequest is set
        (RouteActivity#convertToAddressList: NodePorts and load balancers that map ports)."""
        if self.config.local_serve_addr:
            host, _, port = self.config.local_serve_addr.rpartition(":")
            return pb.Endpoints(scheme=pb.AddressScheme.IPv4,
                                addresses=[pb.Address(host=host, port=int(port))])
        if requested.addresses:
            out = pb.Endpoints()
            out.CopyFrom(requested)
            if out.scheme == pb.AddressScheme.ADDRESS_SCHEME_UNSPECIFIED:
                out.scheme = pb.AddressScheme.IPv4
            if not self.config.use_endpoint_port_from_request:
                for address in out.addresses:
                    address.port = self.config.grpc_server_port
            return out
        return pb.Endpoints(scheme=pb.AddressScheme.IPv4,
                            addresses=[pb.Address(host="127.0.0.1", port=self.config.grpc_server_port)])

    async def query_route(self, request: spb.QueryRouteRequest) -> spb.QueryRouteResponse:
        topic = validation.topic_of(request.topic)  # "{namespace}%{name}"; answered as the client named it
        route = await self.cluster.route(topic)
        accept = ACCEPT_TYPES[await self.cluster.topic_message_type(topic)]
        endpoints = self.proxy_endpoints(request.endpoints)
        queues: list[pb.MessageQueue] = []
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            # A set failing over (slaves only, no master right now) stays listed: its queues are the
            # proxy's, which waits for the new master, so a client refreshing its route meanwhile
            # keeps every queue (and each FIFO group its queue) instead of losing them for 30 s.
            if route.broker_data(qd.broker_name) is None:
                continue
            broker = pb.Broker(name=qd.broker_name, id=MASTER_ID, endpoints=endpoints)
            queues.extend(self._queues(qd.perm, qd.read_queue_nums, qd.write_queue_nums, request.topic, broker,
                                       accept))
        return spb.QueryRouteResponse(status=errors.ok(), message_queues=queues)

    @staticmethod
    def _queues(perm: int, read: int, write: int, topic: pb.Resource, broker: pb.Broker,
                accept: list[int]) -> list[pb.MessageQueue]:
        """genMessageQueueFromQueueData: read-only, write-only, then read-write queue ids."""
        r = w = rw = n = 0
        if is_readable(perm) and is_writeable(perm):
            rw = min(read, write)
            r, w = read - rw, write - rw
        elif is_writeable(perm):
            w = write
        elif is_readable(perm):
            r = read
        else:
            n = max(1, read, write)
        out: list[pb.MessageQueue] = []
        qid = 0
        for count, p in ((r, pb.Permission.READ), (w, pb.Permission.WRITE), (rw, pb.Permission.READ_WRITE),
                         (n, pb.Permission.NONE)):
            for _ in range(count):
                out.append(pb.MessageQueue(topic=topic, id=qid, permission=p, broker=broker,
                                           accept_message_types=accept))
                qid += 1
        return out

    async def query_assignment(self, request: spb.QueryAssignmentRequest, ctx: ProxyContext | None = None
                               ) -> spb.QueryAssignmentResponse:
        topic = validation.topic_of(request.topic)
        group_name = validation.group_of(request.group)
        route = await self.cluster.route(topic)
        if ctx is not None and self.clients is not None and self.clients.is_pull_consumer(ctx.client_id):
            return await self._pull_assignment(request, ctx.client_id, route)
        group = await self.cluster.group_config(group_name)
        fifo = bool(group and group.consume_message_orderly)
        endpoints = self.proxy_endpoints(request.endpoints)
        assignments: list[pb.Assignment] = []
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if not is_readable(qd.perm) or qd.read_queue_nums <= 0:
                continue
            if route.broker_data(qd.broker_name) is None:
                continue  # a set failing over stays assigned, as in query_route
            broker = pb.Broker(name=qd.broker_name, id=MASTER_ID, endpoints=endpoints)
            ids = range(qd.read_queue_nums) if fifo else [-1]
            for qid in ids:
                mq = pb.MessageQueue(topic=request.topic, id=qid, permission=permission(qd.perm), broker=broker)
                assignments.append(pb.Assignment(message_queue=mq))
        if not assignments:
            return spb.QueryAssignmentResponse(status=errors.status(Code.FORBIDDEN, "no readable queue"))
        return spb.QueryAssignmentResponse(status=errors.ok(), assignments=assignments)

    async def _pull_assignment(self, request: spb.QueryAssignmentRequest, client_id: str,
                               route: TopicRouteData) -> spb.QueryAssignmentResponse:
        """A PULL_CONSUMER's share of the topic's readable queues (QueryAssignmentProcessor with
        MessageModel CLUSTERING): queue ids 0..readQueueNums-1 of every readable set, as
        topicRouteData2TopicSubscribeInfo lists them, divided over the group's members on every proxy
        and given only while the brokers lock them for the client (services/proxy/pull_assignment.py).
        An empty share is an answer too: the client releases what it holds."""
        perms: dict[str, int] = {}
        queues: list[tuple[str, int]] = []
        for qd in route.queue_datas:
            if not is_readable(qd.perm) or qd.read_queue_nums <= 0 or route.broker_data(qd.broker_name) is None:
                continue
            perms[qd.broker_name] = qd.perm
            queues.extend((qd.broker_name, qid) for qid in range(qd.read_queue_nums))
        if not queues:
            return spb.QueryAssignmentResponse(status=errors.status(Code.FORBIDDEN, "no readable queue"))
        assert self.pull_assignments is not None and self.pull_sync is not None
        self.pull_sync.start()
        key = (request.group.resource_namespace, request.group.name, request.topic.name)
        endpoints = self.proxy_endpoints(request.endpoints)
        assignments = [
            pb.Assignment(message_queue=pb.MessageQueue(
                topic=request.topic, id=qid, permission=permission(perms[broker]),
                broker=pb.Broker(name=broker, id=MASTER_ID, endpoints=endpoints)))
            for broker, qid in await self.pull_assignments.assign(key, client_id, queues)]
        return spb.QueryAssignmentResponse(status=errors.ok(), assignments=assignments)
