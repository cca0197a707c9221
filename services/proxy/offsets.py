"""PullMessage, GetOffset, QueryOffset, UpdateOffset: offset-addressed access to one queue.

These back the SDK's pull consumer and the Spark connector: the caller names the queue and the
offset, the proxy forwards PULL_MESSAGE (long-polled) and the consumer-offset calls.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from orbitmq.client import MQBrokerError, PullStatus
from orbitmq.common import sysflag
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy import converter, errors, validation
from orbitmq.proxy.client_manager import subscription_data
from orbitmq.proxy.cluster import ClusterService
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.context import ProxyContext
from orbitmq.proxy.errors import ProxyError
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import ResponseCode

Code = pb.Code
MAX_PULL_BATCH = 32


class OffsetActivity:
    def __init__(self, config: ProxyConfig, cluster: ClusterService) -> None:
        self.config = config
        self.cluster = cluster

    async def _queue_addr(self, mq: pb.MessageQueue) -> tuple[str, str]:
        """(master address, topic as the brokers know it: "{namespace}%{name}") of a queue."""
        topic = validation.topic_of(mq.topic)
        if mq.id < 0:
            raise ProxyError(Code.BAD_REQUEST, f"queue id {mq.id} is not a queue")
        route = await self.cluster.route(topic)
        for qd in route.queue_datas:
            if qd.broker_name == mq.broker.name:
                if mq.id >= max(qd.read_queue_nums, qd.write_queue_nums):
                    raise ProxyError(Code.BAD_REQUEST, f"queue {mq.id} does not exist on {qd.broker_name}")
                addr = self.cluster.master_addr(route, qd.broker_name)
                if addr:
                    return addr, topic
        raise ProxyError(Code.NOT_FOUND, f"broker {mq.broker.name!r} does not serve topic {topic}")

    async def pull_message(self, ctx: ProxyContext, request: spb.PullMessageRequest
                           ) -> AsyncIterator[spb.PullMessageResponse]:
        try:
            group = validation.group_of(request.group)
            mq = request.message_queue
            addr, topic = await self._queue_addr(mq)
            if request.offset < 0:
                raise ProxyError(Code.ILLEGAL_OFFSET, f"offset {request.offset} is negative")
            sub = subscription_data(topic, request.filter_expression)
            suspend = request.long_polling_timeout.ToMilliseconds() if request.HasField("long_polling_timeout") else 0
            suspend = max(0, min(suspend, self.config.grpc_client_consumer_max_long_polling_timeout_millis))
            batch = request.batch_size if request.batch_size > 0 else MAX_PULL_BATCH
            header = h.PullMessageRequestHeader(
                consumer_group=group, topic=topic, queue_id=mq.id, queue_offset=request.offset,
                max_msg_nums=min(batch, MAX_PULL_BATCH),
                sys_flag=sysflag.build_pull_sys_flag(False, suspend > 0, True, False),
                commit_offset=0, suspend_timeout_millis=suspend, subscription=sub.sub_string, sub_version=0,
                expression_type=sub.expression_type, broker_name=mq.broker.name)
            result = await self.cluster.api.pull_message(
                addr, header, (suspend + self.config.remoting_timeout_millis) / 1000.0)
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
        addr, topic = await self._queue_addr(mq)
        if request.offset < 0:
            raise ProxyError(Code.ILLEGAL_OFFSET, f"offset {request.offset} is negative")
        await self.cluster.api.update_consumer_offset(addr, group, topic, mq.id, request.offset)
        return spb.UpdateOffsetResponse(status=errors.ok())

    async def get_offset(self, ctx: ProxyContext, request: spb.GetOffsetRequest) -> spb.GetOffsetResponse:
        group = validation.group_of(request.group)
        mq = request.message_queue
        addr, topic = await self._queue_addr(mq)
        try:
            offset = await self.cluster.api.query_consumer_offset(addr, group, topic, mq.id,
                                                                  set_zero_if_not_found=False)
        except MQBrokerError as exc:
            if exc.code == ResponseCode.QUERY_NOT_FOUND:
                raise ProxyError(Code.OFFSET_NOT_FOUND, exc.remark or "offset not found") from None
            raise
        return spb.GetOffsetResponse(status=errors.ok(), offset=offset)

    async def query_offset(self, ctx: ProxyContext, request: spb.QueryOffsetRequest) -> spb.QueryOffsetResponse:
        mq = request.message_queue
        addr, topic = await self._queue_addr(mq)
        api = self.cluster.api
        policy = request.query_offset_policy
        if policy == pb.QueryOffsetPolicy.BEGINNING:
            offset = await api.get_min_offset(addr, topic, mq.id)
        elif policy == pb.QueryOffsetPolicy.END:
            offset = await api.get_max_offset(addr, topic, mq.id)
        elif policy == pb.QueryOffsetPolicy.TIMESTAMP:
            if not request.HasField("timestamp"):
                raise ProxyError(Code.BAD_REQUEST, "timestamp is required by QueryOffsetPolicy.TIMESTAMP")
            offset = await api.search_offset(addr, topic, mq.id, request.timestamp.ToMilliseconds())
        else:
            raise ProxyError(Code.BAD_REQUEST, f"unknown query offset policy {policy}")
        return spb.QueryOffsetResponse(status=errors.ok(), offset=offset)
