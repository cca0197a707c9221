"""PullMessage, GetOffset, QueryOffset, UpdateOffset: offset-addressed access to one queue.

These back the SDK's pull consumer and the Spark connector: the caller names the queue and the
offset, the proxy forwards PULL_MESSAGE (long-polled) and the consumer-offset calls.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from orbitmq.client import MQBrokerError, PullStatus
from orbitmq.client.results import PullResult
from orbitmq.common import sysflag
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy import converter, errors, validation
from orbitmq.proxy.client_manager import subscription_data
from orbitmq.proxy.cluster import ClusterService
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.context import ProxyContext
from orbitmq.proxy.errors import ProxyError
from orbitmq.proxy.producer import failure_kind
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.errors import RemotingError

Code = pb.Code
MAX_PULL_BATCH = 32
T = TypeVar("T")


# PullAPIWrapper#pullFromWhichNodeTable, kept by the proxy for its PullMessage callers: a bounded
# cache (soft state; a proxy that forgets asks the master again, which suggests again).
PULL_FROM_WHICH_NODE_MAX = 100_000


class OffsetActivity:
    def __init__(self, config: ProxyConfig, cluster: ClusterService) -> None:
        self.config = config
        self.cluster = cluster
        # (group, broker name, topic, queue id) -> the brokerId the last pull's broker suggested.
        self._pull_from_which_node: dict[tuple[str, str, str, int], int] = {}

    async def _pull_addr(self, group: str, mq: pb.MessageQueue) -> tuple[str | None, str]:
        """Where a PullMessage goes: the replica the set's broker last suggested (slaveReadEnable:
        a master whose backlog is out of memory sends readers to a slave), else the master, else,
        while the set has no master, a slave (as the Remoting client's
        findBrokerAddressInSubscribe; a classic set without a controller never gets one back on
        its own). None: the master, through _on_master's failover."""
        topic = validation.topic_of(mq.topic)
        route = await self.cluster.route(topic)
        bd = route.broker_data(mq.broker.name)
        if bd is None:
            return None, topic
        suggested = self._pull_from_which_node.get((group, mq.broker.name, topic, mq.id), 0)
        if suggested and bd.broker_addrs.get(suggested):
            return bd.broker_addrs[suggested], topic
        if bd.broker_addrs.get(0) or not bd.broker_addrs:
            return None, topic
        return bd.broker_addrs[min(bd.broker_addrs)], topic

    def _remember_suggestion(self, group: str, mq: pb.MessageQueue, topic: str, broker_id: int) -> None:
        key = (group, mq.broker.name, topic, mq.id)
        table = self._pull_from_which_node
        if broker_id:
            if key not in table and len(table) >= PULL_FROM_WHICH_NODE_MAX:
                table.pop(next(iter(table)))
            table[key] = broker_id
        else:
            table.pop(key, None)

    async def _queue_addr(self, mq: pb.MessageQueue) -> tuple[str, str]:
        """(master address, "" while its set has none, and the topic as the brokers know it:
        "{namespace}%{name}") of a queue."""
        topic = validation.topic_of(mq.topic)
        if mq.id < 0:
            raise ProxyError(Code.BAD_REQUEST, f"queue id {mq.id} is not a queue")
        route = await self.cluster.route(topic)
        for qd in route.queue_datas:
            if qd.broker_name == mq.broker.name:
                if mq.id >= max(qd.read_queue_nums, qd.write_queue_nums):
                    raise ProxyError(Code.BAD_REQUEST, f"queue {mq.id} does not exist on {qd.broker_name}")
                # "" while the set has no master (failing over): _on_master waits for one
                return self.cluster.master_addr(route, qd.broker_name) or "", topic
        raise ProxyError(Code.NOT_FOUND, f"broker {mq.broker.name!r} does not serve topic {topic}")

    async def _on_master(self, ctx: ProxyContext, mq: pb.MessageQueue,
                         call: Callable[[str, str], Awaitable[T]]) -> T:
        """``call(addr, topic)`` on the queue's master; when that master is gone (no connection, or
        it refused as a fenced or demoted one) again on its set's new master, re-resolved within
        brokerFailoverWaitMillis, as sends, pops and acks do: a reader of a controller-mode set
        (the SDK's pull consumer, the Spark source) outlives a failover without an error."""
        addr, topic = await self._queue_addr(mq)
        deadline: float | None = None
        if not addr:
            deadline = self.cluster.failover_deadline(ctx.time_remaining)
            addr = await self.cluster.failover_master(mq.broker.name, topic, "", deadline)
        while True:
            try:
                return await call(addr, topic)
            except (MQBrokerError, RemotingError) as exc:
                if failure_kind(exc) is None:
                    raise
                self.cluster.broker_unreachable(mq.broker.name, addr, exc)
                if deadline is None:
                    deadline = self.cluster.failover_deadline(ctx.time_remaining)
                if time.monotonic() >= deadline:
                    raise
                failed = addr if not isinstance(exc, MQBrokerError) else ""
                addr = await self.cluster.failover_master(mq.broker.name, topic, failed, deadline)

    async def pull_message(self, ctx: ProxyContext, request: spb.PullMessageRequest
                           ) -> AsyncIterator[spb.PullMessageResponse]:
        try:
            group = validation.group_of(request.group)
            mq = request.message_queue
            if request.offset < 0:
                raise ProxyError(Code.ILLEGAL_OFFSET, f"offset {request.offset} is negative")
            suspend = request.long_polling_timeout.ToMilliseconds() if request.HasField("long_polling_timeout") else 0
            suspend = max(0, min(suspend, self.config.grpc_client_consumer_max_long_polling_timeout_millis))
            batch = request.batch_size if request.batch_size > 0 else MAX_PULL_BATCH

            async def pull(addr: str, topic: str) -> PullResult:
                sub = subscription_data(topic, request.filter_expression)
                header = h.PullMessageRequestHeader(
                    consumer_group=group, topic=topic, queue_id=mq.id, queue_offset=request.offset,
                    max_msg_nums=min(batch, MAX_PULL_BATCH),
                    sys_flag=sysflag.build_pull_sys_flag(False, suspend > 0, True, False),
                    commit_offset=0, suspend_timeout_millis=suspend, subscription=sub.sub_string, sub_version=0,
                    expression_type=sub.expression_type, broker_name=mq.broker.name)
                return await self.cluster.api.pull_message(
                    addr, header, (suspend + self.config.remoting_timeout_millis) / 1000.0)

            replica, topic = await self._pull_addr(group, mq)
            result = None
            if replica is not None:
                try:
                    result = await pull(replica, topic)
                except (MQBrokerError, RemotingError) as exc:
                    if failure_kind(exc) is None and not isinstance(exc, MQBrokerError):
                        raise
                    # The slave is gone or refused: the master (or its failover) from now on.
                    self._remember_suggestion(group, mq, topic, 0)
            if result is None:
                result = await self._on_master(ctx, mq, pull)
            self._remember_suggestion(group, mq, topic, result.suggest_which_broker_id)
        except Exception as exc:  # noqa: BLE001 -- every failure becomes a Status
            yield spb.PullMessageResponse(status=errors.status_of(exc))
            return
        if result.status == PullStatus.FOUND:
            yield spb.PullMessageResponse(status=errors.ok())
            for msg in result.messages:
                yield spb.PullMessageResponse(message=converter.build_proto_message(msg))
        elif result.status == PullStatus.OFFSET_ILLEGAL:
            yield spb.PullMessageResponse(status=errors.status(
                Code.ILLEGAL_OFFSET, f"offset {request.offset} is out of [{result.min_offset}, {result.max_offset}]"))
        else:
            yield spb.PullMessageResponse(status=errors.status(Code.MESSAGE_NOT_FOUND, "no new message"))
        yield spb.PullMessageResponse(next_offset=result.next_begin_offset)

    async def update_offset(self, ctx: ProxyContext, request: spb.UpdateOffsetRequest) -> spb.UpdateOffsetResponse:
        group = validation.group_of(request.group)
        mq = request.message_queue
        if request.offset < 0:
            raise ProxyError(Code.ILLEGAL_OFFSET, f"offset {request.offset} is negative")
        await self._on_master(ctx, mq, lambda addr, topic: self.cluster.api.update_consumer_offset(
            addr, group, topic, mq.id, request.offset))
        return spb.UpdateOffsetResponse(status=errors.ok())

    async def get_offset(self, ctx: ProxyContext, request: spb.GetOffsetRequest) -> spb.GetOffsetResponse:
        group = validation.group_of(request.group)
        mq = request.message_queue
        try:
            offset = await self._on_master(ctx, mq, lambda addr, topic: self.cluster.api.query_consumer_offset(
                addr, group, topic, mq.id, set_zero_if_not_found=False))
        except MQBrokerError as exc:
            if exc.code == ResponseCode.QUERY_NOT_FOUND:
                raise ProxyError(Code.OFFSET_NOT_FOUND, exc.remark or "offset not found") from None
            raise
        return spb.GetOffsetResponse(status=errors.ok(), offset=offset)

    async def query_offset(self, ctx: ProxyContext, request: spb.QueryOffsetRequest) -> spb.QueryOffsetResponse:
        mq = request.message_queue
        api = self.cluster.api
        policy = request.query_offset_policy
        if policy == pb.QueryOffsetPolicy.BEGINNING:
            offset = await self._on_master(ctx, mq, lambda addr, topic: api.get_min_offset(addr, topic, mq.id))
        elif policy == pb.QueryOffsetPolicy.END:
            offset = await self._on_master(ctx, mq, lambda addr, topic: api.get_max_offset(addr, topic, mq.id))
        elif policy == pb.QueryOffsetPolicy.TIMESTAMP:
            if not request.HasField("timestamp"):
                raise ProxyError(Code.BAD_REQUEST, "timestamp is required by QueryOffsetPolicy.TIMESTAMP")
            ms = request.timestamp.ToMilliseconds()
            offset = await self._on_master(ctx, mq, lambda addr, topic: api.search_offset(addr, topic, mq.id, ms))
        else:
            raise ProxyError(Code.BAD_REQUEST, f"unknown query offset policy {policy}")
        return spb.QueryOffsetResponse(status=errors.ok(), offset=offset)
