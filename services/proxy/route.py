"""QueryRoute and QueryAssignment (RouteActivity): the proxy presents itself as every broker."""

from __future__ import annotations

from orbitmq.common.constants import MASTER_ID, is_readable, is_writeable
from orbitmq.common.topic_config import TopicMessageType
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy import errors, validation
from orbitmq.proxy.cluster import ClusterService
from orbitmq.proxy.config import ProxyConfig

Code = pb.Code

ACCEPT_TYPES: dict[TopicMessageType, list[int]] = {
    TopicMessageType.NORMAL: [pb.MessageType.NORMAL],
    TopicMessageType.FIFO: [pb.MessageType.FIFO],
    TopicMessageType.DELAY: [pb.MessageType.DELAY],
    TopicMessageType.TRANSACTION: [pb.MessageType.TRANSACTION],
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
    def __init__(self, config: ProxyConfig, cluster: ClusterService) -> None:
        self.config = config
        self.cluster = cluster

    def proxy_endpoints(self, requested: pb.Endpoints) -> pb.Endpoints:
        """Where clients reach this proxy: localServeAddr, else the address they dialled."""
        if self.config.local_serve_addr:
            host, _, port = self.config.local_serve_addr.rpartition(":")
            return pb.Endpoints(scheme=pb.AddressScheme.IPv4,
                                addresses=[pb.Address(host=host, port=int(port))])
        if requested.addresses:
            out = pb.Endpoints()
            out.CopyFrom(requested)
            if out.scheme == pb.AddressScheme.ADDRESS_SCHEME_UNSPECIFIED:
                out.scheme = pb.AddressScheme.IPv4
            return out
        return pb.Endpoints(scheme=pb.AddressScheme.IPv4,
                            addresses=[pb.Address(host="127.0.0.1", port=self.config.grpc_server_port)])

    async def query_route(self, request: spb.QueryRouteRequest) -> spb.QueryRouteResponse:
        topic = request.topic.name
        validation.validate_topic(topic)
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

    async def query_assignment(self, request: spb.QueryAssignmentRequest) -> spb.QueryAssignmentResponse:
        topic = request.topic.name
        validation.validate_topic(topic)
        validation.validate_consumer_group(request.group.name)
        route = await self.cluster.route(topic)
        group = await self.cluster.group_config(request.group.name)
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
