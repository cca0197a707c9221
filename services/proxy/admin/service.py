"""AdminService: apache.rocketmq.v2.Admin, one thin method per RPC routed to its family.

Every failure comes back as gRPC OK with the response's Status (errors.status_of: the brokers'
codes mapped as ResponseBuilder maps them), never as a transport error; ChangeLogLevelResponse
has no Status, so its remark says what happened. Admin calls need no x-mq-client-id: an
operator's console is not a client of the cluster. Calls are counted and timed by
ProxyMetrics, and checked by ACL 2.0 (admin/auth.py), as MessagingService's are.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from orbitmq.proto.apache.rocketmq.v2 import admin_pb2 as apb
from orbitmq.proto.apache.rocketmq.v2 import admin_pb2_grpc as agrpc
from orbitmq.proxy import errors
from orbitmq.proxy.admin import accumulation, clients, messages, offsets, runtime, subscriptions, topics
from orbitmq.proxy.admin.common import AdminParts

log = logging.getLogger("orbitmq.proxy.admin")
SERVICE = apb.DESCRIPTOR.services_by_name["Admin"]


class AdminService(agrpc.AdminServicer):
    def __init__(self, parts: AdminParts) -> None:
        self.parts = parts
        self.stats = runtime.RuntimeStats(parts)

    async def _answer(self, response_cls: type, handler: Callable[[], Awaitable[Any]]) -> Any:
        try:
            return await handler()
        except Exception as exc:  # noqa: BLE001 -- reported to the caller as a Status
            return response_cls(status=errors.status_of(exc))

    async def ChangeLogLevel(self, request, context):
        try:
            return runtime.change_log_level(request)
        except Exception as exc:  # noqa: BLE001 -- the response has no Status: the remark says it
            return apb.ChangeLogLevelResponse(remark=f"log level unchanged: {exc}")

    async def DescribeTopicStatus(self, request, context):
        return await self._answer(apb.DescribeTopicStatusResponse,
                                  lambda: topics.describe_topic_status(self.parts, request))

    async def ListSubscription(self, request, context):
        return await self._answer(apb.ListSubscriptionResponse,
                                  lambda: subscriptions.list_subscription(self.parts, request))

    async def DescribeSubscription(self, request, context):
        return await self._answer(apb.DescribeSubscriptionResponse,
                                  lambda: subscriptions.describe_subscription(self.parts, request))

    async def DeleteSubscription(self, request, context):
        return await self._answer(apb.DeleteSubscriptionResponse,
                                  lambda: subscriptions.delete_subscription(self.parts, request))

    async def DescribeGroupAccumulation(self, request, context):
        return await self._answer(apb.DescribeGroupAccumulationResponse,
                                  lambda: accumulation.describe_group_accumulation(self.parts, request))

    async def ListConsumerConnection(self, request, context):
        return await self._answer(apb.ListConsumerConnectionResponse,
                                  lambda: subscriptions.list_consumer_connection(self.parts, request))

    async def ResetGroupOffset(self, request, context):
        return await self._answer(apb.ResetGroupOffsetResponse, lambda: offsets.reset_group_offset(self.parts, request))

    async def QueryMessage(self, request, context):
        return await self._answer(apb.ListMessageResponse, lambda: messages.query_message(self.parts, request))

    async def PrintThreadStackTrace(self, request, context):
        return await self._answer(apb.PrintThreadStackTraceResponse,
                                  lambda: clients.print_thread_stack_trace(self.parts, request))

    async def VerifyMessage(self, request, context):
        return await self._answer(apb.VerifyMessageResponse, lambda: clients.verify_message(self.parts, request))

    async def AdminSendMessage(self, request, context):
        return await self._answer(apb.AdminSendMessageResponse, lambda: topics.admin_send_message(self.parts, request))

    async def GetConsumerRunningInfo(self, request, context):
        return await self._answer(apb.GetConsumerRunningInfoResponse,
                                  lambda: clients.get_consumer_running_info(self.parts, request))

    async def GetTopicRoute(self, request, context):
        return await self._answer(apb.GetTopicRouteResponse, lambda: topics.get_topic_route(self.parts, request))

    async def QueryTimeSpan(self, request, context):
        return await self._answer(apb.QueryTimeSpanResponse, lambda: offsets.query_time_span(self.parts, request))

    async def GetProxyRuntimeStats(self, request, context):
        async def answer() -> apb.GetProxyRuntimeStatsResponse:
            return self.stats.answer()
        return await self._answer(apb.GetProxyRuntimeStatsResponse, answer)


def instrument_metrics(metrics: Any, servicer: AdminService) -> AdminService:
    """ProxyMetrics' counting wrapper on every Admin RPC whose response has a Status (all but
    ChangeLogLevel), labelled by method as MessagingService's; call before adding the servicer."""
    for method in SERVICE.methods:
        if "status" in method.output_type.fields_by_name:
            setattr(servicer, method.name, metrics._wrap_unary(method.name, getattr(servicer, method.name)))
    return servicer
