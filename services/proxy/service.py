"""apache.rocketmq.v2.MessagingService: one thin method per RPC, routed to its activity.

Every call first checks the caller names itself (x-mq-client-id), and every failure comes back
as gRPC OK with a Status, never as a transport error or a stack trace; the one exception is
upstream's too: a Telemetry stream whose Settings are invalid ends with INVALID_ARGUMENT (or
INTERNAL) and no command (ClientActivity#processTelemetryException), so that a starting client
fails at once instead of waiting. Refused credentials are answered with a Status command by the
auth interceptor (services/proxy/auth.py), as upstream's pipeline answers them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc
from orbitmq.proxy import errors
from orbitmq.proxy.client_manager import ClientManager
from orbitmq.proxy.client_relay import ClientRequestRelay
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.consumer import ConsumerActivity
from orbitmq.proxy.context import ProxyContext
from orbitmq.proxy.flow_limit import FLOW_LIMIT_MESSAGE, Family, family_limits
from orbitmq.proxy.offsets import OffsetActivity
from orbitmq.proxy.producer import ProducerActivity
from orbitmq.proxy.recall import RecallActivity
from orbitmq.proxy.route import RouteActivity
from orbitmq.proxy.transaction import TransactionActivity

log = logging.getLogger("orbitmq.proxy.service")
Code = pb.Code


def telemetry_refusal(status: pb.Status) -> tuple[grpc.StatusCode, str]:
    """The gRPC status ending a Telemetry stream whose Settings were refused (ClientActivity#
    processTelemetryException): INVALID_ARGUMENT for a client's error (a 4xxxx code), else INTERNAL."""
    client_error = Code.BAD_REQUEST <= status.code < Code.INTERNAL_ERROR
    return (grpc.StatusCode.INVALID_ARGUMENT if client_error else grpc.StatusCode.INTERNAL,
            f"process client telemetryCommand failed. {status.message}")


class MessagingService(sgrpc.MessagingServiceServicer):
    def __init__(self, route: RouteActivity, producer: ProducerActivity, consumer: ConsumerActivity,
                 offsets: OffsetActivity, clients: ClientManager, config: ProxyConfig | None = None) -> None:
        self.route = route
        self.producer = producer
        self.consumer = consumer
        self.offsets = offsets
        self.clients = clients
        # Set by the server (services/proxy/transaction.py); None answers NOT_IMPLEMENTED.
        self.transactions: TransactionActivity | None = None
        # Broker -> client requests over Telemetry (services/proxy/client_relay.py), set by the server.
        self.relay: ClientRequestRelay | None = None
        # Set by the server (services/proxy/recall.py); None answers NOT_IMPLEMENTED.
        self.recall: RecallActivity | None = None
        # ReceiveMessage calls in progress (long polls), against grpcMaxLongPollingRequests
        self.held_receives = 0
        # Calls in flight per Family, against upstream's pool keys (services/proxy/flow_limit.py).
        self.flow_limits = family_limits(config or ProxyConfig())
        self.in_flight = [0] * len(Family)

    async def _unary(self, context: grpc.aio.ServicerContext, response_cls: type,
                     handler: Callable[[ProxyContext], Awaitable[Any]], family: Family) -> Any:
        ctx = ProxyContext.from_grpc(context)
        in_flight = self.in_flight
        if in_flight[family] >= self.flow_limits[family]:
            return response_cls(status=errors.status(Code.TOO_MANY_REQUESTS, FLOW_LIMIT_MESSAGE))
        in_flight[family] += 1
        try:
            ctx.require_client_id()
            return await handler(ctx)
        except Exception as exc:  # noqa: BLE001 -- reported to the caller as a Status
            return response_cls(status=errors.status_of(exc))
        finally:
            in_flight[family] -= 1

    async def _stream(self, context: grpc.aio.ServicerContext, response_cls: type,
                      handler: Callable[[ProxyContext], AsyncIterator[Any]]) -> AsyncIterator[Any]:
        ctx = ProxyContext.from_grpc(context)
        try:
            ctx.require_client_id()
        except Exception as exc:  # noqa: BLE001
            yield response_cls(status=errors.status_of(exc))
            return
        async for item in handler(ctx):
            yield item

    # ---- route / client ---------------------------------------------------------------------

    async def QueryRoute(self, request, context):
        return await self._unary(context, spb.QueryRouteResponse, lambda ctx: self.route.query_route(request),
                                 Family.ROUTE)

    async def QueryAssignment(self, request, context):
        return await self._unary(context, spb.QueryAssignmentResponse,
                                 lambda ctx: self.route.query_assignment(request, ctx), Family.ROUTE)

    async def Heartbeat(self, request, context):
        return await self._unary(context, spb.HeartbeatResponse, lambda ctx: self.clients.heartbeat(ctx, request),
                                 Family.CLIENT_MANAGER)

    async def NotifyClientTermination(self, request, context):
        return await self._unary(context, spb.NotifyClientTerminationResponse,
                                 lambda ctx: self.clients.terminate(ctx, request), Family.CLIENT_MANAGER)

    async def Telemetry(self, request_iterator, context):
        ctx = ProxyContext.from_grpc(context)
        try:
            ctx.require_client_id()
        except Exception as exc:  # noqa: BLE001
            yield spb.TelemetryCommand(status=errors.status_of(exc))
            return
        try:
            outbox = self.clients.attach_stream(ctx)  # TOO_MANY_REQUESTS past grpcMaxTelemetryStreams
        except errors.ProxyError as exc:
            yield spb.TelemetryCommand(status=errors.status_of(exc))
            return
        offer = self.clients.offer  # bounded: a client that does not read loses its stream
        refused: list[pb.Status] = []

        async def read() -> None:
            try:
                async for command in request_iterator:
                    which = command.WhichOneof("command")
                    if which == "settings":
                        try:
                            reply = await self.clients.on_settings(ctx, command.settings)
                        except Exception as exc:  # noqa: BLE001 -- refused settings end the stream
                            # with an error and no command, as ClientActivity#processTelemetryException:
                            # a client still starting fails at once (a Status command first makes
                            # the Java client warn and the Go client log an error).
                            refused.append(errors.status_of(exc))
                            return
                        offer(outbox, reply)
                    elif which in ("thread_stack_trace", "verify_message_result"):
                        if self.relay is not None:  # a client's answer to a relayed broker request
                            self.relay.on_client_answer(ctx.client_id, command)
                    elif which is None:
                        # ClientActivity#telemetry's onNext has no case for it: ignored, no answer.
                        log.debug("telemetry command without content from %s", ctx.client_id)
                    else:
                        log.info("telemetry %s from %s: %s", which, ctx.client_id, command.status.message)
            except (asyncio.CancelledError, grpc.aio.AioRpcError):
                pass
            finally:
                offer(outbox, None)

        reader = asyncio.create_task(read())
        try:
            while True:
                item = await outbox.get()
                if item is None:
                    break
                yield item
            if refused:
                await context.abort(*telemetry_refusal(refused[0]))
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
            self.clients.detach_stream(ctx.client_id, outbox)

    # ---- producer ---------------------------------------------------------------------------

    async def SendMessage(self, request, context):
        # _unary inlined (same steps, same Status on failure): the hottest RPC skips a lambda and a frame.
        ctx = ProxyContext.from_grpc(context)
        in_flight = self.in_flight
        if in_flight[Family.PRODUCER] >= self.flow_limits[Family.PRODUCER]:
            return spb.SendMessageResponse(status=errors.status(Code.TOO_MANY_REQUESTS, FLOW_LIMIT_MESSAGE))
        in_flight[Family.PRODUCER] += 1
        try:
            ctx.require_client_id()
            return await self.producer.send_message(ctx, request)
        except Exception as exc:  # noqa: BLE001 -- reported to the caller as a Status
            return spb.SendMessageResponse(status=errors.status_of(exc))
        finally:
            in_flight[Family.PRODUCER] -= 1

    async def EndTransaction(self, request, context):
        transactions = self.transactions
        if transactions is None:
            return await self._unary(context, spb.EndTransactionResponse, _not_implemented("EndTransaction"),
                                     Family.TRANSACTION)
        return await self._unary(context, spb.EndTransactionResponse,
                                 lambda ctx: transactions.end_transaction(ctx, request), Family.TRANSACTION)

    async def RecallMessage(self, request, context):
        recall = self.recall
        if recall is None:
            return await self._unary(context, spb.RecallMessageResponse, _not_implemented("RecallMessage"),
                                     Family.PRODUCER)
        return await self._unary(context, spb.RecallMessageResponse, lambda ctx: recall.recall_message(ctx, request),
                                 Family.PRODUCER)

    # ---- consumer ---------------------------------------------------------------------------

    async def ReceiveMessage(self, request, context):
        # _stream inlined (same steps, same Status on failure): every streamed message passes one
        # async generator fewer.
        ctx = ProxyContext.from_grpc(context)
        try:
            ctx.require_client_id()
        except Exception as exc:  # noqa: BLE001
            yield spb.ReceiveMessageResponse(status=errors.status_of(exc))
            return
        # long polls held at once (issue 16): a counter compare, TOO_MANY_REQUESTS past the limit
        held = self.held_receives
        if held >= self.consumer.config.grpc_max_long_polling_requests:
            yield spb.ReceiveMessageResponse(status=errors.status(
                Code.TOO_MANY_REQUESTS, f"too many ReceiveMessage requests held, max is {held}"))
            return
        self.held_receives = held + 1
        try:
            async for item in self.consumer.receive_message(ctx, request):
                yield item
        finally:
            self.held_receives -= 1

    async def AckMessage(self, request, context):
        # _unary inlined, as for SendMessage.
        ctx = ProxyContext.from_grpc(context)
        in_flight = self.in_flight
        if in_flight[Family.CONSUMER] >= self.flow_limits[Family.CONSUMER]:
            return spb.AckMessageResponse(status=errors.status(Code.TOO_MANY_REQUESTS, FLOW_LIMIT_MESSAGE))
        in_flight[Family.CONSUMER] += 1
        try:
            ctx.require_client_id()
            return await self.consumer.ack_message(ctx, request)
        except Exception as exc:  # noqa: BLE001 -- reported to the caller as a Status
            return spb.AckMessageResponse(status=errors.status_of(exc))
        finally:
            in_flight[Family.CONSUMER] -= 1

    async def ChangeInvisibleDuration(self, request, context):
        return await self._unary(context, spb.ChangeInvisibleDurationResponse,
                                 lambda ctx: self.consumer.change_invisible_duration(ctx, request), Family.CONSUMER)

    async def ForwardMessageToDeadLetterQueue(self, request, context):
        return await self._unary(context, spb.ForwardMessageToDeadLetterQueueResponse,
                                 lambda ctx: self.consumer.forward_to_dlq(ctx, request), Family.PRODUCER)

    async def SyncLiteSubscription(self, request, context):
        return await self._unary(context, spb.SyncLiteSubscriptionResponse, _not_implemented("SyncLiteSubscription"),
                                 Family.CLIENT_MANAGER)

    # ---- offsets ----------------------------------------------------------------------------

    async def PullMessage(self, request, context):
        async for item in self._stream(context, spb.PullMessageResponse,
                                       lambda ctx: self.offsets.pull_message(ctx, request)):
            yield item

    async def UpdateOffset(self, request, context):
        return await self._unary(context, spb.UpdateOffsetResponse,
                                 lambda ctx: self.offsets.update_offset(ctx, request), Family.CONSUMER)

    async def GetOffset(self, request, context):
        return await self._unary(context, spb.GetOffsetResponse, lambda ctx: self.offsets.get_offset(ctx, request),
                                 Family.CONSUMER)

    async def QueryOffset(self, request, context):
        return await self._unary(context, spb.QueryOffsetResponse,
                                 lambda ctx: self.offsets.query_offset(ctx, request), Family.CONSUMER)


def _not_implemented(name: str) -> Callable[[ProxyContext], Awaitable[Any]]:
    async def handler(ctx: ProxyContext) -> Any:
        raise errors.ProxyError(Code.NOT_IMPLEMENTED, f"{name} is not supported by this proxy yet")

    return handler
