"""Broker -> gRPC client requests, relayed over the client's Telemetry stream (ProxyChannel).

A gRPC consumer is known to the brokers through the proxy's own Remoting connections (the proxy
heartbeats on its behalf), so an operator's ``consumerStatus`` or ``queryMsgById -g -d`` reaches
the proxy as a broker request naming the client:

- GET_CONSUMER_RUNNING_INFO (307): answered with a ConsumerRunningInfo built from what the proxy
  knows of the client (consume type, version, language, start time, its subscriptions and the
  server-side settings it runs with). With ``jstackEnable`` the client is sent a
  PrintThreadStackTraceCommand and its ThreadStackTrace becomes ``jstack``.
- GET_CONSUMER_STATUS_FROM_CLIENT (221): an empty table (gRPC consumers keep no queue offsets).
- CONSUME_MESSAGE_DIRECTLY (309): the message goes to the client as a VerifyMessageCommand; its
  VerifyMessageResult status becomes the ConsumeMessageDirectlyResult (OK -> CR_SUCCESS,
  FAILED_TO_CONSUME_MESSAGE -> CR_LATER, MESSAGE_CORRUPTED -> CR_RETURN_NULL; FIFO refused with
  VERIFY_FIFO_MESSAGE_UNSUPPORTED -> NO_PERMISSION), as upstream's local-mode proxy does.

A client that does not answer within ``grpcProxyRelayRequestTimeoutInSeconds`` gets SYSTEM_BUSY
"call remote timeout" (upstream's answer). Upstream's cluster-mode proxy answers none of these
requests (its local mode only 307 with jstack, and 309); OrbitMQ answers all three in every mode,
and a running info without jstack never waits on the client.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from typing import Any

from orbitmq.common.message_codec import RecordError, decode_record
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy import converter
from orbitmq.proxy.client_manager import (
    ClientManager,
    GrpcClient,
    consume_type_of,
    subscription_data,
    wrapped,
)
from orbitmq.proxy.cluster import ClusterService
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.errors import ProxyError
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

log = logging.getLogger("orbitmq.proxy.relay")
Code = pb.Code

# VerifyMessageResult status -> ConsumeMessageDirectlyResult.consumeResult (CMResult)
def _code_name(code: int) -> str:
    try:
        return Code.Name(code)
    except ValueError:  # a number this proto does not know
        return str(code)


_CONSUME_RESULTS = {Code.OK: "CR_SUCCESS", Code.FAILED_TO_CONSUME_MESSAGE: "CR_LATER",
                    Code.MESSAGE_CORRUPTED: "CR_RETURN_NULL"}


class _StreamLost(Exception):
    """The client's Telemetry stream closed (or filled up) before the command could be queued."""


class ClientRequestRelay:
    def __init__(self, config: ProxyConfig, cluster: ClusterService, clients: ClientManager) -> None:
        self.config = config
        self.cluster = cluster
        self.clients = clients
        self._nonces = itertools.count(1)
        # nonce -> (client id, future of the client's TelemetryCommand answer)
        self._pending: dict[str, tuple[str, asyncio.Future[spb.TelemetryCommand]]] = {}

    def start(self) -> None:
        remoting = self.cluster.api.remoting
        remoting.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, self.on_running_info)
        remoting.register_processor(RequestCode.CONSUME_MESSAGE_DIRECTLY, self.on_consume_directly)
        remoting.register_processor(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, self.on_consumer_status)

    # ---- answers from clients (the Telemetry reader calls these) ------------------------------

    def on_client_answer(self, client_id: str, command: spb.TelemetryCommand) -> None:
        """A ThreadStackTrace or VerifyMessageResult: completes the request waiting on its nonce.
        An unknown nonce (late, or made up) or another client's nonce is ignored."""
        which = command.WhichOneof("command")
        nonce = getattr(command, which).nonce if which in ("thread_stack_trace", "verify_message_result") else ""
        waiting = self._pending.get(nonce)
        if waiting is None or waiting[0] != client_id:
            log.info("telemetry %s from %s answers no pending request (nonce %r)", which, client_id, nonce)
            return
        del self._pending[nonce]
        if not waiting[1].done():
            waiting[1].set_result(command)

    async def _ask(self, client: GrpcClient, command: spb.TelemetryCommand, nonce: str) -> spb.TelemetryCommand | None:
        """Send ``command`` and wait for the answer carrying ``nonce``; None on timeout."""
        future: asyncio.Future[spb.TelemetryCommand] = asyncio.get_running_loop().create_future()
        self._pending[nonce] = (client.client_id, future)
        try:
            if not self.clients.send_command(client.client_id, command):
                raise _StreamLost(f"client {client.client_id} lost its telemetry stream")
            return await asyncio.wait_for(future, self.config.grpc_proxy_relay_request_timeout_in_seconds)
        except TimeoutError:
            return None
        finally:
            self._pending.pop(nonce, None)

    def _next_nonce(self) -> str:
        return str(next(self._nonces))

    # ---- GET_CONSUMER_RUNNING_INFO ------------------------------------------------------------

    def _consumer(self, fields: dict[str, str]) -> tuple[GrpcClient | None, str]:
        group, client_id = fields.get("consumerGroup", ""), fields.get("clientId", "")
        client = self.clients.clients.get(client_id)
        if client is None or client.group != group:
            return None, f"The Consumer <{group}> <{client_id}> not online"
        return client, ""

    async def on_running_info(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        fields = request.ext_fields or {}
        client, why = self._consumer(fields)
        if client is None:
            return request.response_to(ResponseCode.SYSTEM_ERROR, why)
        info = await self._running_info(client)
        if str(fields.get("jstackEnable", "false")).lower() == "true":
            if client.outbox is None:
                return request.response_to(ResponseCode.SYSTEM_ERROR,
                                           f"client {client.client_id} has no telemetry stream to ask for its stacks")
            nonce = self._next_nonce()
            try:
                answer = await self._ask(client, spb.TelemetryCommand(
                    print_thread_stack_trace_command=spb.PrintThreadStackTraceCommand(nonce=nonce)), nonce)
            except _StreamLost as exc:
                return request.response_to(ResponseCode.SYSTEM_ERROR, str(exc))
            if answer is None:
                return request.response_to(ResponseCode.SYSTEM_BUSY, "call remote timeout")
            if answer.status.code != Code.OK:
                return request.response_to(ResponseCode.SYSTEM_ERROR,
                                           f"client {client.client_id} refused the stack trace: "
                                           f"{_code_name(answer.status.code)} {answer.status.message}".strip())
            info["jstack"] = answer.thread_stack_trace.thread_stack_trace
        return request.response_to(ResponseCode.SUCCESS, None, None, json.dumps(info).encode())

    async def _running_info(self, client: GrpcClient) -> dict[str, Any]:
        """ConsumerRunningInfo of a gRPC consumer: no process queues or client-side rates (a POP
        consumer holds none the proxy could see), its settings as properties."""
        settings = client.settings
        assert settings is not None  # a consumer is known by the group of its settings
        merged = await self.clients.effective_settings(client.client_id) or settings
        sub = merged.subscription
        properties = {
            "PROP_CONSUME_TYPE": consume_type_of(settings.client_type),
            "PROP_CONSUMER_START_TIMESTAMP": str(client.started_at_ms),
            "PROP_CLIENT_VERSION": client.version,
            "clientType": pb.ClientType.Name(settings.client_type),
            "language": client.language,
            "consumerGroup": client.group,
            "fifo": str(sub.fifo).lower(),
            "receiveBatchSize": str(sub.receive_batch_size),
            "longPollingTimeoutMillis": str(sub.long_polling_timeout.ToMilliseconds()),
            "maxDeliveryAttempts": str(merged.backoff_policy.max_attempts),
            "telemetryStream": "open" if client.outbox is not None else "closed",
            "proxy": "OrbitMQ gRPC proxy",
        }
        subscriptions = []
        for entry in settings.subscription.subscriptions:
            try:
                subscriptions.append(subscription_data(wrapped(entry.topic), entry.expression).to_json_dict())
            except ProxyError:
                continue
        return {"properties": properties, "subscriptionSet": subscriptions, "mqTable": {}, "statusTable": {}}

    # ---- GET_CONSUMER_STATUS_FROM_CLIENT -------------------------------------------------------

    async def on_consumer_status(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """getConsumerStatus: a client's own table of queue offsets. gRPC consumers keep none (the
        broker holds what they consumed, POP style), and the request names no client, so every
        one answers an empty table at once rather than leaving the broker to time out."""
        return request.response_to(ResponseCode.SUCCESS, None, None,
                                    json.dumps({"messageQueueTable": {}}).encode())

    # ---- CONSUME_MESSAGE_DIRECTLY -------------------------------------------------------------

    async def on_consume_directly(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        fields = request.ext_fields or {}
        client, why = self._consumer(fields)
        if client is None:
            return request.response_to(ResponseCode.SYSTEM_ERROR, why)
        if client.outbox is None:
            return request.response_to(ResponseCode.SYSTEM_ERROR,
                                       f"client {client.client_id} has no telemetry stream to send the message on")
        try:
            msg = decode_record(bytes(request.body or b""), 0, check_crc=False)
        except RecordError as exc:
            return request.response_to(ResponseCode.SYSTEM_ERROR, f"the message to consume does not decode: {exc}")
        nonce = self._next_nonce()
        started = time.monotonic()
        try:
            answer = await self._ask(client, spb.TelemetryCommand(verify_message_command=spb.VerifyMessageCommand(
                nonce=nonce, message=converter.build_proto_message(msg))), nonce)
        except _StreamLost as exc:
            return request.response_to(ResponseCode.SYSTEM_ERROR, str(exc))
        if answer is None:
            return request.response_to(ResponseCode.SYSTEM_BUSY, "call remote timeout")
        code = answer.status.code
        if code == Code.VERIFY_FIFO_MESSAGE_UNSUPPORTED:
            return request.response_to(ResponseCode.NO_PERMISSION, "forbidden to verify message")
        consume_result = _CONSUME_RESULTS.get(code)
        if consume_result is None:
            return request.response_to(ResponseCode.SYSTEM_ERROR,
                                       f"verify message failed: {_code_name(code)} {answer.status.message}".strip())
        result = {"order": False, "autoCommit": True, "consumeResult": consume_result, "remark": "from gRPC client",
                  "spentTimeMills": int((time.monotonic() - started) * 1000)}
        return request.response_to(ResponseCode.SUCCESS, None, None, json.dumps(result).encode())
