"""The connection every client shares: Telemetry sessions, server Settings, heartbeats, routes.

RocketMQ 5's client lifecycle: open a Telemetry stream per proxy and announce the client's
Settings; the server answers with its own (retry policy, receive batch size, long-polling
timeout, max body size), which the client applies; heartbeats keep the client known; routes
are cached and refreshed on error; shutdown tells every proxy (NotifyClientTermination).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import platform
import socket
import time
import traceback
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc

from orbitmq.clientcore.config import ClientConfig
from orbitmq.clientcore.errors import (
    ClientClosedError,
    ClientError,
    Code,
    TransportError,
    check_status,
    error_of,
)
from orbitmq.clientcore.rpc import RpcClient
from orbitmq.clientcore.signing import SDK_VERSION
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.pool import Duration

log = logging.getLogger("orbitmq.client")

HEARTBEAT_INTERVAL_S = 10.0
ROUTE_TTL_S = 30.0
TELEMETRY_RECONNECT_S = (0.5, 5.0)
_sequence = itertools.count()


def duration(seconds: float) -> Duration:
    d = Duration()
    d.FromMilliseconds(int(seconds * 1000))
    return d


def new_client_id() -> str:
    """hostname@pid@sequence@random, the shape of the official clients' ids."""
    return f"{socket.gethostname()}@{os.getpid()}@{next(_sequence)}@{uuid.uuid4().hex[:10]}"


@dataclass
class RetryPolicy:
    """The server's backoff policy: attempts and the delay before attempt n (1-based)."""

    max_attempts: int = 3
    initial: float = 0.01
    maximum: float = 1.0
    multiplier: float = 2.0
    customized: tuple[float, ...] = ()

    @classmethod
    def of(cls, policy: pb.RetryPolicy, default: RetryPolicy) -> RetryPolicy:
        if policy.max_attempts <= 0:
            return default
        which = policy.WhichOneof("strategy")
        if which == "customized_backoff":
            return cls(policy.max_attempts, customized=tuple(d.ToMilliseconds() / 1000
                                                             for d in policy.customized_backoff.next))
        if which == "exponential_backoff":
            e = policy.exponential_backoff
            return cls(policy.max_attempts, e.initial.ToMilliseconds() / 1000, e.max.ToMilliseconds() / 1000,
                       e.multiplier or 1.0)
        return cls(policy.max_attempts, default.initial, default.maximum, default.multiplier)

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based)."""
        if self.customized:
            return self.customized[min(attempt, len(self.customized)) - 1]
        return min(self.initial * self.multiplier ** max(attempt - 1, 0), self.maximum)


class ClientSession:
    """Base of every client; subclasses say what Settings they announce and how they apply the reply."""

    client_type: int = pb.ClientType.CLIENT_TYPE_UNSPECIFIED

    def __init__(self, config: ClientConfig) -> None:
        if not isinstance(config, ClientConfig):
            raise TypeError(f"config must be an orbitmq.ClientConfig, not {type(config).__name__}")
        self.config = config
        self.client_id = new_client_id()
        self.rpc = RpcClient(config, self.client_id)
        self.server_settings: pb.Settings | None = None
        self.running = False
        self._routes: dict[str, tuple[float, list[pb.MessageQueue]]] = {}
        self._telemetry: dict[str, _TelemetrySession] = {}
        self._settings_event = asyncio.Event()
        self._settings_error: ClientError | None = None
        self._tasks: set[asyncio.Task] = set()
        self._heartbeat_task: asyncio.Task | None = None

    # ---- what subclasses provide -------------------------------------------------------------

    def client_settings(self) -> pb.Settings:
        raise NotImplementedError

    def apply_settings(self, settings: pb.Settings) -> None:
        """Use the server's Settings (retry policy, batch size, ...)."""

    def group(self) -> str | None:
        return None

    async def on_recover_orphaned_transaction(self, endpoint: str, command: spb.RecoverOrphanedTransactionCommand
                                              ) -> None:
        log.warning("%s: transaction check-back for %s ignored (not a transactional producer)",
                    self.client_id, command.transaction_id)

    async def on_verify_message(self, message: pb.Message) -> pb.Status:
        """A broker's CONSUME_MESSAGE_DIRECTLY (``queryMsgById -g -d``), relayed by the proxy: only a
        PushConsumer consumes; other clients answer NOT_IMPLEMENTED, as RocketMQ's clients do."""
        return pb.Status(code=Code.NOT_IMPLEMENTED, message=f"{type(self).__name__} does not consume messages pushed to it")

    async def _answer_verify_message(self, endpoint: str, command: spb.VerifyMessageCommand) -> None:
        try:
            status = await self.on_verify_message(command.message)
        except Exception as exc:  # noqa: BLE001 -- the answer says it failed; the client goes on
            log.warning("%s: verifying message %s failed: %s", self.client_id, command.message.system_properties.message_id,
                        exc)
            status = pb.Status(code=Code.FAILED_TO_CONSUME_MESSAGE, message=str(exc))
        session = self._telemetry.get(endpoint)
        if session is not None:
            session.send(spb.TelemetryCommand(status=status,
                                              verify_message_result=spb.VerifyMessageResult(nonce=command.nonce)))

    def topics_to_check(self) -> list[str]:
        return []

    # ---- lifecycle ---------------------------------------------------------------------------

    def _base_settings(self) -> pb.Settings:
        hosts = []
        for ep in self.rpc.endpoints:
            host, _, port = ep.rpartition(":")
            hosts.append(pb.Address(host=host, port=int(port)))
        scheme = pb.AddressScheme.IPv4 if all(a.host.replace(".", "").isdigit() for a in hosts) \
            else pb.AddressScheme.DOMAIN_NAME
        return pb.Settings(
            client_type=self.client_type, access_point=pb.Endpoints(scheme=scheme, addresses=hosts),
            request_timeout=duration(self.config.request_timeout),
            user_agent=pb.UA(language=pb.Language.PYTHON, version=SDK_VERSION, platform=platform.platform(),
                             hostname=socket.gethostname()))

    async def start(self) -> None:
        """Check the topics exist, open Telemetry on every endpoint and wait for the server's Settings."""
        if self.running:
            return
        try:
            for topic in self.topics_to_check():
                await self.route(topic)
            for ep in self.rpc.endpoints:
                session = _TelemetrySession(self, ep)
                self._telemetry[ep] = session
                session.start()
            try:
                await asyncio.wait_for(self._settings_event.wait(), self.config.request_timeout * 2)
            except TimeoutError:
                raise TransportError("no Settings from the server through Telemetry",
                                     grpc.StatusCode.DEADLINE_EXCEEDED, self.rpc.endpoints) from None
            if self._settings_error is not None:
                raise self._settings_error
            # Give the other proxies a moment to answer too, so that each knows this client before the
            # first request reaches it (an unreachable one settles at once with its error).
            waits = [asyncio.ensure_future(s.settled.wait()) for s in self._telemetry.values()]
            _, pending = await asyncio.wait(waits, timeout=self.config.request_timeout)
            for w in pending:
                w.cancel()
        except BaseException:
            await self._close_sessions()
            await self.rpc.close()
            raise
        self.running = True
        self._heartbeat_task = self.spawn(self._heartbeat_loop())

    async def shutdown(self) -> None:
        """Stop heartbeats, tell every proxy this client is gone, close streams and channels."""
        if not self.running:
            await self.rpc.close()
            return
        self.running = False
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
        group = self.group()
        request = spb.NotifyClientTerminationRequest()
        if group:
            request.group.name = group
        for ep in self.rpc.endpoints:
            with contextlib.suppress(ClientError):
                await self.rpc.unary("NotifyClientTermination", request, endpoint=ep)
        await self._close_sessions()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.rpc.close()

    async def _close_sessions(self) -> None:
        sessions = list(self._telemetry.values())
        self._telemetry.clear()
        for s in sessions:
            await s.close()

    def ensure_running(self) -> None:
        if not self.running:
            raise ClientClosedError(f"{type(self).__name__} is not started (or already shut down)")

    def spawn(self, coro) -> asyncio.Task:
        """A background task kept until done (cancelled at shutdown)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ---- Settings and telemetry commands -----------------------------------------------------

    def settings_command(self) -> spb.TelemetryCommand:
        return spb.TelemetryCommand(settings=self.client_settings())

    def resend_settings(self) -> None:
        """Announce changed Settings (e.g. a new subscription) on every open stream."""
        for s in self._telemetry.values():
            s.send(self.settings_command())

    async def on_telemetry(self, endpoint: str, command: spb.TelemetryCommand) -> None:
        which = command.WhichOneof("command")
        if which == "settings" or (which is None and command.HasField("status")):
            session = self._telemetry.get(endpoint)
            if session is not None:
                session.settled.set()
        if which == "settings":
            if command.HasField("status") and command.status.code != Code.OK:
                self._settings_error = error_of(command.status.code, command.status.message)
            else:
                self.server_settings = command.settings
                self.apply_settings(command.settings)
                self._settings_error = None
            self._settings_event.set()
        elif which is None and command.HasField("status") and command.status.code != Code.OK:
            # A refused Settings comes back as a bare Status.
            if not self._settings_event.is_set():
                self._settings_error = error_of(command.status.code, command.status.message)
                self._settings_event.set()
            else:
                log.warning("%s: telemetry status from %s: %s", self.client_id, endpoint, command.status.message)
        elif which == "recover_orphaned_transaction_command":
            self.spawn(self.on_recover_orphaned_transaction(endpoint, command.recover_orphaned_transaction_command))
        elif which == "print_thread_stack_trace_command":
            stacks = "\n".join(f"{t.get_name()}:\n{''.join(traceback.format_stack(t.get_coro().cr_frame))}"
                               if getattr(t.get_coro(), "cr_frame", None) else t.get_name()
                               for t in asyncio.all_tasks())
            session = self._telemetry.get(endpoint)
            if session is not None:
                session.send(spb.TelemetryCommand(status=pb.Status(code=Code.OK), thread_stack_trace=spb.ThreadStackTrace(
                    nonce=command.print_thread_stack_trace_command.nonce, thread_stack_trace=stacks)))
        elif which == "verify_message_command":
            self.spawn(self._answer_verify_message(endpoint, command.verify_message_command))
        elif which == "reconnect_endpoints_command":
            session = self._telemetry.get(endpoint)
            if session is not None:
                session.reconnect()

    # ---- heartbeats --------------------------------------------------------------------------

    async def heartbeat(self) -> None:
        request = spb.HeartbeatRequest(client_type=self.client_type)
        group = self.group()
        if group:
            request.group.name = group
        for ep in self.rpc.endpoints:
            try:
                response = await self.rpc.unary("Heartbeat", request, endpoint=ep)
                if response.status.code != Code.OK:
                    log.debug("heartbeat to %s: %s", ep, response.status.message)
            except ClientError as exc:
                log.debug("heartbeat to %s failed: %s", ep, exc)

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL_S)
            await self.heartbeat()

    # ---- routes ------------------------------------------------------------------------------

    async def route(self, topic: str, refresh: bool = False) -> list[pb.MessageQueue]:
        """The topic's queues (cached ROUTE_TTL_S); raises NotFoundError for an unknown topic."""
        if not isinstance(topic, str):
            raise TypeError(f"topic must be a str, not {type(topic).__name__}")
        cached = self._routes.get(topic)
        if cached is not None and not refresh and time.monotonic() < cached[0]:
            return cached[1]
        request = spb.QueryRouteRequest(topic=pb.Resource(name=topic, resource_namespace=self.config.namespace),
                                        endpoints=self._base_settings().access_point)
        response = await self.rpc.unary("QueryRoute", request)
        if response.status.code != Code.OK:
            self._routes.pop(topic, None)
        check_status(response.status)
        queues = list(response.message_queues)
        self._routes[topic] = (time.monotonic() + ROUTE_TTL_S, queues)
        return queues

    def invalidate_route(self, topic: str) -> None:
        self._routes.pop(topic, None)


class _TelemetrySession:
    """One Telemetry stream to one proxy, reopened (and Settings re-sent) when it breaks."""

    def __init__(self, client: ClientSession, endpoint: str) -> None:
        self.client = client
        self.endpoint = endpoint
        self._outbox: asyncio.Queue[spb.TelemetryCommand | None] = asyncio.Queue()
        self._task: asyncio.Task | None = None
        self._call = None
        self._closing = False
        self._reconnecting = False
        # Set once this proxy answered the Settings (or the stream failed): start() waits for it.
        self.settled = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def send(self, command: spb.TelemetryCommand) -> None:
        self._outbox.put_nowait(command)

    def reconnect(self) -> None:
        if self._call is not None:
            self._reconnecting = True
            self._call.cancel()

    async def _requests(self, outbox: asyncio.Queue) -> AsyncIterator[spb.TelemetryCommand]:
        while True:
            item = await outbox.get()
            if item is None:
                return
            yield item

    async def _run(self) -> None:
        backoff = TELEMETRY_RECONNECT_S[0]
        while not self._closing:
            outbox: asyncio.Queue[spb.TelemetryCommand | None] = asyncio.Queue()
            # Settings first on every (re)opened stream, then whatever was queued meanwhile.
            outbox.put_nowait(self.client.settings_command())
            while not self._outbox.empty():
                item = self._outbox.get_nowait()
                if item is not None:
                    outbox.put_nowait(item)
            self._outbox = outbox
            try:
                self._call = self.client.rpc.bidi(self.endpoint, self._requests(outbox))
                async for command in self._call:
                    backoff = TELEMETRY_RECONNECT_S[0]
                    await self.client.on_telemetry(self.endpoint, command)
            except asyncio.CancelledError:
                # grpc.aio reports a cancelled call as CancelledError: only reconnect() continues.
                if self._closing or not self._reconnecting:
                    raise
                self._reconnecting = False
            except grpc.aio.AioRpcError as exc:
                self.settled.set()
                if exc.code() != grpc.StatusCode.CANCELLED:
                    log.debug("telemetry with %s broke: %s", self.endpoint, exc.code().name)
            except ClientError:
                return  # channel closed
            except Exception:  # a handler bug must not end the stream for good
                log.exception("telemetry handler failed on %s", self.endpoint)
            if self._closing:
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, TELEMETRY_RECONNECT_S[1])

    async def close(self) -> None:
        self._closing = True
        self._outbox.put_nowait(None)
        if self._call is not None:
            self._call.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
