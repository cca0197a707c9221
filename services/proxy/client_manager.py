"""gRPC clients: their Settings, Telemetry streams, and their presence on the brokers.

RocketMQ's GrpcClientSettingsManager + GrpcChannelManager + ClientActivity. A client announces
its Settings on the Telemetry stream and gets back the server-side Settings (retry policy,
batch size, long polling, fifo flag, max body size). The proxy then keeps the client known to
the brokers serving its topics (HEART_BEAT on its behalf) until it terminates or goes idle, and
keeps its stream open for server -> client commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from orbitmq.client import ConsumerData, ProducerData
from orbitmq.common.aio import cancel_and_wait
from orbitmq.common.filter import SubscriptionData, validate_filter_expression
from orbitmq.common.filter.errors import FilterExpressionError
from orbitmq.common.namespace import wrap_namespace
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.pool import Duration
from orbitmq.proxy import errors, validation
from orbitmq.proxy.cluster import ClusterService
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.context import ProxyContext
from orbitmq.proxy.errors import ProxyError

log = logging.getLogger("orbitmq.proxy.client")
Code = pb.Code

# CustomizedRetryPolicy's default "next" delays (1s 5s 10s 30s 1m … 2h), in milliseconds.
DEFAULT_CUSTOMIZED_BACKOFF_MS = [1000, 5000, 10000, 30000] + [m * 60000 for m in range(1, 11)] + [
    20 * 60000, 30 * 60000, 3600000, 7200000]
# ExponentialRetryPolicy defaults.
DEFAULT_EXPONENTIAL = (5000, 7200000, 2)


# SubscriptionGroupAttributes#LITE_SUB_CLIENT_QUOTA_ATTRIBUTE: its name and default.
LITE_SUB_CLIENT_QUOTA_ATTRIBUTE, LITE_SUB_CLIENT_QUOTA_DEFAULT = "lite.sub.client.quota", 2000


def _lite_quota(group: SubscriptionGroupConfig) -> int:
    """SubscriptionGroupConfig#getLiteSubClientQuota: the attribute, its default when unset or not a number."""
    try:
        quota = int(group.attributes.get(LITE_SUB_CLIENT_QUOTA_ATTRIBUTE, LITE_SUB_CLIENT_QUOTA_DEFAULT))
    except ValueError:
        return LITE_SUB_CLIENT_QUOTA_DEFAULT
    return max(-1, min(quota, 2**31 - 1))  # the attribute's range starts at -1; the field is an int32


def _duration_ms(ms: int) -> Duration:
    d = Duration()
    d.FromMilliseconds(int(ms))
    return d


def expression_type(filter_type: int) -> str:
    return "SQL92" if filter_type == pb.FilterType.SQL else "TAG"


def subscription_data(topic: str, expr: pb.FilterExpression) -> SubscriptionData:
    """FilterAPI.build on a gRPC filter; ILLEGAL_FILTER_EXPRESSION when it does not parse."""
    try:
        return validate_filter_expression(expression_type(expr.type), expr.expression, topic)
    except (FilterExpressionError, ValueError) as exc:
        raise ProxyError(Code.ILLEGAL_FILTER_EXPRESSION, f"expression format is not correct: {exc}") from None


def consume_type_of(client_type: int) -> str:
    if client_type in (pb.ClientType.SIMPLE_CONSUMER,):
        return "CONSUME_ACTIVELY"
    return "CONSUME_PASSIVELY"


@dataclass
class GrpcClient:
    client_id: str
    language: str
    version: str
    settings: pb.Settings | None = None
    last_seen: float = field(default_factory=time.monotonic)
    # When this proxy first heard of the client (ConsumerRunningInfo's PROP_CONSUMER_START_TIMESTAMP).
    started_at_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    # Outbound Telemetry commands; None when the client has no open stream with this proxy.
    outbox: asyncio.Queue[spb.TelemetryCommand | None] | None = None
    # (raw settings, group config, merged settings) of the last effective_settings.
    merged: tuple[pb.Settings, SubscriptionGroupConfig | None, pb.Settings] | None = field(default=None, repr=False)

    @property
    def is_producer(self) -> bool:
        return self.settings is not None and self.settings.HasField("publishing")

    @property
    def group(self) -> str | None:
        """The consumer group as the brokers know it, ``{namespace}%{name}``."""
        if self.settings is not None and self.settings.HasField("subscription"):
            return wrapped(self.settings.subscription.group)
        return None

    def topics(self) -> list[str]:
        """The topics of the settings as the brokers know them, ``{namespace}%{name}``."""
        if self.settings is None:
            return []
        if self.settings.HasField("publishing"):
            return [wrapped(t) for t in self.settings.publishing.topics]
        if self.settings.HasField("subscription"):
            return [wrapped(s.topic) for s in self.settings.subscription.subscriptions]
        return []


def wrapped(resource: pb.Resource) -> str:
    """GrpcConverter#wrapResourceWithNamespace of settings already validated (on_settings)."""
    return wrap_namespace(resource.resource_namespace, resource.name)


# Server -> client Telemetry commands queued for one stream; a client that does not read its
# stream fills it, and the stream is then ended rather than buffered without bound (issue 16).
TELEMETRY_OUTBOX_CAPACITY = 256
# How long a heartbeat waits for the Settings of its client (ClientManager._settings_soon): the
# Java client's requestTimeout, 3 s, and never past the call's own deadline less a reserve.
SETTINGS_WAIT_SECONDS = 3.0
SETTINGS_WAIT_RESERVE_SECONDS = 0.2


class ClientManager:
    def __init__(self, config: ProxyConfig, cluster: ClusterService) -> None:
        self.config = config
        self.cluster = cluster
        self.clients: dict[str, GrpcClient] = {}
        # Telemetry streams alive (attach_stream .. detach_stream), against grpcMaxTelemetryStreams
        self.telemetry_streams = 0
        self._task: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()
        # Called with a client id when the client terminates or expires (e.g. release its messages).
        self.client_gone_hooks: list[Callable[[str], Awaitable[None]]] = []
        # Called with a client id when the client's Telemetry stream ends (a killed client's at once):
        # it is no longer alive for live_pull_consumers.
        self.stream_closed_hooks: list[Callable[[str], None]] = []
        # PULL_CONSUMER clients by id, for live_pull_consumers.
        self._pull_clients: dict[str, GrpcClient] = {}
        self.client_gone_hooks.append(self._forget_pull_client)
        # Heartbeats waiting for the settings of a client whose Telemetry stream is open (heartbeat).
        self._settings_waiters: dict[str, asyncio.Event] = {}

    # ---- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._housekeeping(), name="grpc-client-housekeeping")

    async def shutdown(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        for client in list(self.clients.values()):
            self._close_stream(client)
        for task in list(self._pending):
            task.cancel()
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    def _client(self, ctx: ProxyContext) -> GrpcClient:
        client = self.clients.get(ctx.client_id)
        if client is None:
            client = GrpcClient(ctx.client_id, ctx.language, ctx.client_version)
            self.clients[ctx.client_id] = client
        client.last_seen = time.monotonic()
        return client

    # ---- settings ----------------------------------------------------------------------------

    async def effective_settings(self, client_id: str) -> pb.Settings | None:
        """The client's Settings merged with what the server decides (getClientSettings).

        Every ReceiveMessage asks for it, so the merge is kept until the client sends other
        Settings or its group's config object is replaced: the result is shared, read-only.
        """
        client = self.clients.get(client_id)
        if client is None or client.settings is None:
            return None
        raw = client.settings
        group = await self._group_of(raw)
        cached = client.merged
        if cached is not None and cached[0] is raw and cached[1] is group:
            return cached[2]
        merged = self._merge(raw, group)
        client.merged = (raw, group, merged)
        return merged

    async def _group_of(self, raw: pb.Settings) -> SubscriptionGroupConfig | None:
        if raw.HasField("subscription"):
            return await self.cluster.group_config(wrapped(raw.subscription.group))
        return None

    async def merge_settings(self, raw: pb.Settings) -> pb.Settings:
        return self._merge(raw, await self._group_of(raw))

    def _merge(self, raw: pb.Settings, group: SubscriptionGroupConfig | None) -> pb.Settings:
        settings = pb.Settings()
        settings.CopyFrom(raw)
        if settings.HasField("publishing"):
            cfg = self.config
            bp = settings.backoff_policy
            bp.max_attempts = cfg.grpc_client_producer_max_attempts
            bp.exponential_backoff.initial.CopyFrom(_duration_ms(cfg.grpc_client_producer_backoff_initial_millis))
            bp.exponential_backoff.max.CopyFrom(_duration_ms(cfg.grpc_client_producer_backoff_max_millis))
            bp.exponential_backoff.multiplier = cfg.grpc_client_producer_backoff_multiplier
            settings.publishing.validate_message_type = cfg.enable_topic_message_type_check
            settings.publishing.max_body_size = cfg.max_message_size
        elif settings.HasField("subscription"):
            self._merge_subscription(settings, group or SubscriptionGroupConfig(wrapped(settings.subscription.group)))
        settings.metric.on = False
        return settings

    def _merge_subscription(self, settings: pb.Settings, group: SubscriptionGroupConfig) -> None:
        sub = settings.subscription
        sub.receive_batch_size = self.config.grpc_client_consumer_long_polling_batch_size
        sub.long_polling_timeout.CopyFrom(_duration_ms(self.config.grpc_client_consumer_max_long_polling_timeout_millis))
        sub.fifo = group.consume_message_orderly
        # 5.5.0's GrpcClientSettingsManager#mergeSubscriptionData: the group's lite subscription
        # quota (SubscriptionGroupConfig#getLiteSubClientQuota) and the proxy's maxLiteTopicSize.
        sub.lite_subscription_quota = _lite_quota(group)
        sub.max_lite_topic_size = self.config.max_lite_topic_size
        bp = settings.backoff_policy
        bp.max_attempts = group.retry_max_times + 1
        policy = group.extra.get("groupRetryPolicy") or {}
        if isinstance(policy, dict) and policy.get("type") == "EXPONENTIAL":
            exp = policy.get("exponentialRetryPolicy") or {}
            initial, maximum, multiplier = (int(exp.get("initial", DEFAULT_EXPONENTIAL[0])),
                                            int(exp.get("max", DEFAULT_EXPONENTIAL[1])),
                                            int(exp.get("multiplier", DEFAULT_EXPONENTIAL[2])))
            bp.ClearField("customized_backoff")
            bp.exponential_backoff.initial.CopyFrom(_duration_ms(initial))
            bp.exponential_backoff.max.CopyFrom(_duration_ms(maximum))
            bp.exponential_backoff.multiplier = multiplier
        else:
            custom = (policy.get("customizedRetryPolicy") or {}) if isinstance(policy, dict) else {}
            nxt = [int(x) for x in custom.get("next", DEFAULT_CUSTOMIZED_BACKOFF_MS)]
            bp.ClearField("exponential_backoff")
            del bp.customized_backoff.next[:]
            bp.customized_backoff.next.extend(_duration_ms(ms) for ms in nxt)

    async def consumer_policy(self, client_id: str, group: str) -> tuple[bool, int]:
        """(fifo, max delivery attempts) for a receive: from the client's settings or the group."""
        return await self.consumer_policy_of(await self.effective_settings(client_id), group)

    async def consumer_policy_of(self, settings: pb.Settings | None, group: str) -> tuple[bool, int]:
        """consumer_policy for effective settings the caller already has."""
        if settings is not None and settings.HasField("subscription"):
            return settings.subscription.fifo, settings.backoff_policy.max_attempts
        config = await self.cluster.group_config(group) or SubscriptionGroupConfig(group)
        return config.consume_message_orderly, config.retry_max_times + 1

    # ---- Telemetry ---------------------------------------------------------------------------

    async def on_settings(self, ctx: ProxyContext, settings: pb.Settings) -> spb.TelemetryCommand:
        """processAndWriteClientSettings: validate, remember, answer with the merged settings."""
        which = settings.WhichOneof("pub_sub")
        if which == "publishing":
            for topic in settings.publishing.topics:
                validation.topic_of(topic)
        elif which == "subscription":
            validation.group_of(settings.subscription.group)
            for entry in settings.subscription.subscriptions:
                subscription_data(validation.topic_of(entry.topic), entry.expression)
        else:
            raise ProxyError(Code.BAD_REQUEST, "there is no publishing or subscription data in settings")
        validation.validate_client_properties(settings)
        client = self._client(ctx)
        client.settings = settings
        waiter = self._settings_waiters.pop(client.client_id, None)
        if waiter is not None:
            waiter.set()
        if settings.client_type == pb.ClientType.PULL_CONSUMER:
            self._pull_clients[client.client_id] = client
        merged = await self.merge_settings(settings)
        self._schedule_broker_heartbeat(client)
        return spb.TelemetryCommand(status=errors.ok(), settings=merged)

    def attach_stream(self, ctx: ProxyContext) -> asyncio.Queue[spb.TelemetryCommand | None]:
        """The outbox of a new Telemetry stream (replacing the client's previous one); ProxyError
        TOO_MANY_REQUESTS when grpcMaxTelemetryStreams streams are already open."""
        known = self.clients.get(ctx.client_id)
        replacing = known is not None and known.outbox is not None  # ends its old stream: allowed
        if not replacing and self.telemetry_streams >= self.config.grpc_max_telemetry_streams:
            raise ProxyError(Code.TOO_MANY_REQUESTS,
                             f"too many telemetry streams, max is {self.config.grpc_max_telemetry_streams}")
        client = self._client(ctx)
        self._close_stream(client)
        client.outbox = asyncio.Queue(TELEMETRY_OUTBOX_CAPACITY)
        self.telemetry_streams += 1
        return client.outbox

    def detach_stream(self, client_id: str, outbox: asyncio.Queue) -> None:
        """Called once per attach_stream, when its stream ends."""
        self.telemetry_streams -= 1
        client = self.clients.get(client_id)
        if client is not None and client.outbox is outbox:
            client.outbox = None
            for hook in self.stream_closed_hooks:
                try:
                    hook(client_id)
                except Exception:  # one hook failing must not keep the stream counted
                    log.exception("stream-closed hook failed for %s", client_id)

    @staticmethod
    def offer(outbox: asyncio.Queue[spb.TelemetryCommand | None], item: spb.TelemetryCommand | None) -> bool:
        """Queue a command (or None: end the stream). A full outbox means the client does not read
        its stream: the stream is ended instead (False), never buffered without bound."""
        try:
            outbox.put_nowait(item)
            return True
        except asyncio.QueueFull:
            log.warning("telemetry stream not read by its client: closing it")
            while not outbox.empty():
                outbox.get_nowait()
            outbox.put_nowait(None)
            return False

    def _close_stream(self, client: GrpcClient) -> None:
        if client.outbox is not None:
            self.offer(client.outbox, None)
            client.outbox = None

    def send_command(self, client_id: str, command: spb.TelemetryCommand) -> bool:
        """Queue a server -> client command on the client's Telemetry stream (False if none)."""
        client = self.clients.get(client_id)
        if client is None or client.outbox is None:
            return False
        return self.offer(client.outbox, command)

    # ---- Heartbeat / termination -------------------------------------------------------------

    async def _settings_soon(self, ctx: ProxyContext) -> GrpcClient | None:
        """The client, once its settings are known. The Java client sends its first heartbeat
        without waiting for its Telemetry stream to open or its Settings to be read, and on a
        loaded host (TLS handshakes, ACL checks) the heartbeat often comes first; upstream answers
        it UNRECOGNIZED_CLIENT_TYPE at once and the client logs a failed heartbeat. Here a client
        whose settings are not known yet is waited for, up to SETTINGS_WAIT_SECONDS within the
        call's deadline, and only then refused."""
        client = self.clients.get(ctx.client_id)
        if client is not None and client.settings is not None:
            return client
        wait = SETTINGS_WAIT_SECONDS
        if ctx.time_remaining is not None:
            wait = min(wait, ctx.time_remaining - SETTINGS_WAIT_RESERVE_SECONDS)
        if wait <= 0:
            return client
        waiter = self._settings_waiters.setdefault(ctx.client_id, asyncio.Event())
        try:
            await asyncio.wait_for(waiter.wait(), wait)
        except TimeoutError:
            if self._settings_waiters.get(ctx.client_id) is waiter:
                del self._settings_waiters[ctx.client_id]
        return self.clients.get(ctx.client_id)

    async def heartbeat(self, ctx: ProxyContext, request: spb.HeartbeatRequest) -> spb.HeartbeatResponse:
        client = await self._settings_soon(ctx)
        if client is None or client.settings is None:
            return spb.HeartbeatResponse(status=errors.status(
                Code.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client"))
        client.last_seen = time.monotonic()
        ctype = client.settings.client_type
        # PULL_CONSUMER: OrbitMQ's gRPC PullConsumer; its heartbeats keep it in its group's
        # QueryAssignment (live_pull_consumers, services/proxy/pull_assignment.py).
        if ctype in (pb.ClientType.PUSH_CONSUMER, pb.ClientType.SIMPLE_CONSUMER, pb.ClientType.PULL_CONSUMER):
            validation.group_of(request.group)
        elif ctype != pb.ClientType.PRODUCER:
            return spb.HeartbeatResponse(status=errors.status(
                Code.UNRECOGNIZED_CLIENT_TYPE, pb.ClientType.Name(ctype)))
        self._schedule_broker_heartbeat(client)
        return spb.HeartbeatResponse(status=errors.ok())

    async def terminate(self, ctx: ProxyContext, request: spb.NotifyClientTerminationRequest
                        ) -> spb.NotifyClientTerminationResponse:
        client = self.clients.pop(ctx.client_id, None)
        if client is None or client.settings is None:
            return spb.NotifyClientTerminationResponse(status=errors.status(
                Code.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client"))
        self._close_stream(client)
        await self._client_gone(client)
        return spb.NotifyClientTerminationResponse(status=errors.ok())

    def is_pull_consumer(self, client_id: str) -> bool:
        client = self.clients.get(client_id)
        return client is not None and client.settings is not None and \
            client.settings.client_type == pb.ClientType.PULL_CONSUMER

    def live_pull_consumers(self, namespace: str, group: str, topic: str) -> list[str]:
        """The group's PULL_CONSUMER clients reading ``topic`` that are alive: Telemetry stream open
        and heard from within grpcClientIdleTimeMills (a killed client's stream ends at once; a hung
        one expires). Names as the clients sent them (namespace apart)."""
        deadline = time.monotonic() - self.config.grpc_client_idle_time_mills / 1000.0
        out = []
        for client_id, client in list(self._pull_clients.items()):
            if self.clients.get(client_id) is not client:
                del self._pull_clients[client_id]
                continue
            s = client.settings
            if (s is not None and s.client_type == pb.ClientType.PULL_CONSUMER and client.outbox is not None
                    and client.last_seen >= deadline and s.subscription.group.name == group
                    and s.subscription.group.resource_namespace == namespace
                    and any(e.topic.name == topic for e in s.subscription.subscriptions)):
                out.append(client.client_id)
        return out

    async def _forget_pull_client(self, client_id: str) -> None:
        self._pull_clients.pop(client_id, None)

    # ---- broker side presence ----------------------------------------------------------------

    def _schedule_broker_heartbeat(self, client: GrpcClient) -> None:
        task = asyncio.create_task(self._heartbeat_brokers(client))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _brokers_of(self, client: GrpcClient) -> set[str]:
        addrs: set[str] = set()
        for topic in client.topics():
            try:
                route = await self.cluster.route(topic)
            except Exception:  # a missing topic only means no broker to tell
                continue
            for bd in route.broker_datas:
                if bd.master_addr:
                    addrs.add(bd.master_addr)
        return addrs

    def _heartbeat_data(self, client: GrpcClient) -> tuple[list[ProducerData], list[ConsumerData]]:
        settings = client.settings
        if settings is None:
            return [], []
        if settings.HasField("publishing"):
            # RocketMQ's proxy registers a gRPC producer under its topics' names as groups.
            return [ProducerData(name) for name in client.topics()], []
        subs = []
        for entry in settings.subscription.subscriptions:
            try:
                subs.append(subscription_data(wrapped(entry.topic), entry.expression))
            except ProxyError:
                continue
        return [], [ConsumerData(wrapped(settings.subscription.group), subs, consume_type_of(settings.client_type))]

    async def _heartbeat_brokers(self, client: GrpcClient) -> None:
        producers, consumers = self._heartbeat_data(client)
        for addr in await self._brokers_of(client):
            try:
                await self.cluster.api.heartbeat(addr, client.client_id, producers, consumers,
                                                 client.settings.client_properties if client.settings else None)
            except Exception as exc:  # the next heartbeat retries; the client must not notice
                log.debug("heartbeat of %s to %s failed: %s", client.client_id, addr, exc)

    async def _client_gone(self, client: GrpcClient) -> None:
        for hook in self.client_gone_hooks:
            try:
                await hook(client.client_id)
            except Exception:  # one hook failing must not keep the client registered
                log.exception("client-gone hook failed for %s", client.client_id)
        await self._unregister(client)

    async def _unregister(self, client: GrpcClient) -> None:
        producers, consumers = self._heartbeat_data(client)
        for addr in await self._brokers_of(client):
            for p in producers:
                with contextlib.suppress(Exception):
                    await self.cluster.api.unregister_client(addr, client.client_id, producer_group=p.group_name)
            for c in consumers:
                with contextlib.suppress(Exception):
                    await self.cluster.api.unregister_client(addr, client.client_id, consumer_group=c.group_name)

    async def _housekeeping(self) -> None:
        interval = self.config.heartbeat_interval_millis / 1000.0
        idle = self.config.grpc_client_idle_time_mills / 1000.0
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for client_id, client in list(self.clients.items()):
                if now - client.last_seen > idle and client.outbox is None:
                    self.clients.pop(client_id, None)
                    await self._client_gone(client)
                elif client.settings is not None:
                    self._schedule_broker_heartbeat(client)
