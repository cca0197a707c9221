"""Proxy metrics, readiness and gRPC health (beyond upstream, whose cluster-mode proxy exports only
``rocketmq_proxy_up``).

ProxyMetrics instruments the MessagingService servicer (``instrument(servicer)`` before it is
added to the server, one wrapper coroutine per call; a grpc.aio interceptor would cost a
coroutine and a new handler per call on top): every RPC is counted and timed by
method and the ``apache.rocketmq.v2.Code`` of its Status (the proxy answers failures as gRPC OK
with a Status, so the gRPC status code alone would say nothing), and the messages of
SendMessage, ReceiveMessage, AckMessage and ForwardMessageToDeadLetterQueue are counted by topic
and group. Only successful entries are counted per topic, so label values are topics and groups
that exist (bounded cardinality); client ids and message ids never become labels. The hot path
is a dict lookup and integer additions; families are built at scrape time, with the active
clients by type read from the ClientManager then.

ProxyHealth answers readiness: routes can be loaded, i.e. a NameServer answered the cluster
info and it lists at least one master broker. It drives ``grpc.health.v1``: service
``apache.rocketmq.v2.MessagingService`` is SERVING when ready (the readiness probe), service ""
while the server runs (liveness); both turn NOT_SERVING at shutdown. /ready of the hub agrees.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from grpc_health.v1 import health_pb2
from grpc_health.v1.health import aio as health_aio

from orbitmq.common import metrics as m
from orbitmq.common.aio import cancel_and_wait
from orbitmq.common.namespace import wrap_namespace
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb

log = logging.getLogger("orbitmq.proxy.metrics")

SERVICE_NAME = "apache.rocketmq.v2.MessagingService"
RPC_LATENCY_BUCKETS_MS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
_OK = pb.Code.OK
_CODE_NAMES: dict[int, str] = {v.number: v.name for v in pb.Code.DESCRIPTOR.values}
_CLIENT_TYPE_NAMES: dict[int, str] = {v.number: v.name.lower() for v in pb.ClientType.DESCRIPTOR.values}
READY_PROBE_INTERVAL_SECONDS = 2.0
READY_RECHECK_INTERVAL_SECONDS = 10.0


_CANCELLED = -1  # a stream the client cancelled: no Code was sent
_CODE_NAMES[_CANCELLED] = "CANCELLED"


def _name(resource: Any) -> str:
    """A topic or group label as the brokers know it, ``{namespace}%{name}``: tenants count apart."""
    return wrap_namespace(resource.resource_namespace, resource.name)


def _code_name(code: int) -> str:
    return _CODE_NAMES.get(code, str(code))


class _Rpc:
    __slots__ = ("histo",)

    def __init__(self) -> None:
        self.histo = m.Histo(RPC_LATENCY_BUCKETS_MS)


class ProxyMetrics:
    """Counts and times RPCs; counts messages by topic/group (see the module docstring)."""

    def __init__(self, config: Any, clients: Callable[[], Any]) -> None:
        extra = m.parse_metrics_label(config.metrics_label)
        self.label_names = ("cluster", "node_type", "node_id", "proxy_mode", *extra)
        self.common = (config.rocket_mq_cluster_name, "proxy", config.proxy_name, config.proxy_mode.lower(),
                       *extra.values())
        self._clients = clients
        self._rpc: dict[tuple[str, int], _Rpc] = {}
        self._sent: dict[str, list[int]] = {}  # topic -> [messages, bytes]
        self._received: dict[tuple[str, str], list[int]] = {}  # (topic, group) -> [messages, bytes]
        self._acked: dict[tuple[str, str], int] = {}
        self._dlq: dict[tuple[str, str], int] = {}
        self._auth_denied: dict[str, int] = {}  # reason -> calls refused by ACL 2.0

    # ---- instrumenting ----------------------------------------------------------------------

    def instrument(self, servicer: Any) -> Any:
        """Replace the servicer's RPC methods (on the instance) by counting wrappers; call before
        add_MessagingServiceServicer_to_server, which reads them. Telemetry (a bidi stream for
        the client's lifetime) is left as is."""
        for method in spb.DESCRIPTOR.services_by_name["MessagingService"].methods:
            if method.client_streaming:
                continue
            behavior = getattr(servicer, method.name)
            wrap = self._wrap_unary_stream if method.server_streaming else self._wrap_unary
            setattr(servicer, method.name, wrap(method.name, behavior))
        return servicer

    def _wrap_unary(self, name: str, behavior: Callable[..., Any]) -> Callable[..., Any]:
        observe = self._observe
        on_response = _UNARY_COUNTERS.get(name)

        async def wrapped(request: Any, context: Any) -> Any:
            start = time.perf_counter()
            code = pb.Code.INTERNAL_SERVER_ERROR
            try:
                response = await behavior(request, context)
                code = response.status.code
                if on_response is not None:
                    on_response(self, code, request, response)
                return response
            finally:
                observe(name, code, start)

        return wrapped

    def _wrap_unary_stream(self, name: str, behavior: Callable[..., Any]) -> Callable[..., Any]:
        observe = self._observe

        async def wrapped(request: Any, context: Any) -> AsyncIterator[Any]:
            start = time.perf_counter()
            code = pb.Code.INTERNAL_SERVER_ERROR
            messages = 0
            size = 0
            topic = None
            try:
                async for response in behavior(request, context):
                    which = response.WhichOneof("content")
                    if which == "status":
                        code = response.status.code
                    elif which == "message":
                        messages += 1
                        size += response.message.ByteSize()  # no copy of the body, unlike len(body)
                        topic = response.message.topic
                    yield response
            except (GeneratorExit, asyncio.CancelledError):
                code = _CANCELLED  # the client went away (or its deadline passed) mid-stream
                raise
            finally:
                observe(name, code, start)
                if messages and topic is not None:
                    self._count_received(_name(topic), _name(request.group), messages, size)

        return wrapped

    def _observe(self, name: str, code: int, start: float) -> None:
        key = (name, code)
        slot = self._rpc.get(key)
        if slot is None:
            slot = self._rpc[key] = _Rpc()
        slot.histo.observe((time.perf_counter() - start) * 1000.0)

    # ---- message counts ---------------------------------------------------------------------

    def _on_send(self, status: int, request: Any) -> None:
        """A SendMessage is all or nothing (one topic, one Status for the batch): an OK one counts
        its messages, and its serialized size as the bytes."""
        if status != _OK:
            return
        messages = request.messages
        if not messages:
            return
        topic = _name(messages[0].topic)
        slot = self._sent.get(topic)
        if slot is None:
            slot = self._sent[topic] = [0, 0]
        slot[0] += len(messages)
        slot[1] += request.ByteSize()

    def _count_received(self, topic: str, group: str, messages: int, size: int) -> None:
        key = (topic, group)
        slot = self._received.get(key)
        if slot is None:
            slot = self._received[key] = [0, 0]
        slot[0] += messages
        slot[1] += size

    def _on_ack(self, status: int, request: Any, response: Any) -> None:
        ok = sum(1 for entry in response.entries if entry.status.code == _OK)
        if ok:
            key = (_name(request.topic), _name(request.group))
            self._acked[key] = self._acked.get(key, 0) + ok

    def _on_dlq(self, status: int, request: Any, response: Any) -> None:
        if status == _OK:
            key = (_name(request.topic), _name(request.group))
            self._dlq[key] = self._dlq.get(key, 0) + 1

    # ---- scrape -----------------------------------------------------------------------------

    def on_auth_denied(self, reason: str) -> None:
        """A gRPC call (or Telemetry command) refused by ACL 2.0: authentication | authorization."""
        self._auth_denied[reason] = self._auth_denied.get(reason, 0) + 1

    def collect(self) -> Iterable[m.Metric]:
        names, common = self.label_names, self.common
        up = m.gauge("rocketmq_proxy_up", "1 while the proxy runs.", names)
        up.add_metric(common, 1)
        calls = m.counter("rocketmq_proxy_rpc_total", "gRPC calls by method and apache.rocketmq.v2.Code.",
                          names + ("method", "code"))
        latency = m.histogram("rocketmq_proxy_rpc_latency_milliseconds", "gRPC call latency.",
                              names + ("method", "code"))
        for (method, code), slot in list(self._rpc.items()):
            values = (*common, method, _code_name(code))
            calls.add_metric(values, slot.histo.total)
            m.add_histo(latency, values, slot.histo)
        clients = m.gauge("rocketmq_proxy_active_clients", "Connected gRPC clients by client type.",
                          names + ("client_type",))
        by_type: dict[str, int] = {}
        manager = self._clients()
        for client in list(getattr(manager, "clients", {}).values()):
            settings = client.settings
            kind = _CLIENT_TYPE_NAMES.get(settings.client_type, "unspecified") if settings is not None else "unspecified"
            by_type[kind] = by_type.get(kind, 0) + 1
        for kind, count in sorted(by_type.items()):
            clients.add_metric((*common, kind), count)
        sent = m.counter("rocketmq_proxy_messages_sent_total", "Messages sent through the proxy.",
                         names + ("topic",))
        sent_bytes = m.counter("rocketmq_proxy_sent_bytes_total", "Serialized Message bytes sent through the proxy.",
                               names + ("topic",))
        for topic, (count, size) in list(self._sent.items()):
            sent.add_metric((*common, topic), count)
            sent_bytes.add_metric((*common, topic), size)
        group_labels = names + ("topic", "consumer_group")
        received = m.counter("rocketmq_proxy_messages_received_total", "Messages delivered by ReceiveMessage and PullMessage.",
                             group_labels)
        received_bytes = m.counter("rocketmq_proxy_received_bytes_total",
                                   "Serialized Message bytes delivered by ReceiveMessage and PullMessage.",
                                   group_labels)
        for (topic, group), (count, size) in list(self._received.items()):
            received.add_metric((*common, topic, group), count)
            received_bytes.add_metric((*common, topic, group), size)
        acked = m.counter("rocketmq_proxy_messages_acked_total", "Messages acknowledged.", group_labels)
        for (topic, group), count in list(self._acked.items()):
            acked.add_metric((*common, topic, group), count)
        dlq = m.counter("rocketmq_proxy_messages_forwarded_to_dlq_total",
                        "ForwardMessageToDeadLetterQueue calls that succeeded.", group_labels)
        for (topic, group), count in list(self._dlq.items()):
            dlq.add_metric((*common, topic, group), count)
        out = [up, calls, latency, clients, sent, sent_bytes, received, received_bytes, acked, dlq]
        if self._auth_denied:
            denied = m.counter("rocketmq_auth_denied_total", "Requests refused by ACL 2.0 (beyond upstream).",
                               names + ("protocol_type", "reason"))
            for reason, count in sorted(self._auth_denied.items()):
                denied.add_metric((*common, "grpc", reason), count)
            out.append(denied)
        return out


_UNARY_COUNTERS: dict[str, Callable[[ProxyMetrics, int, Any, Any], None]] = {
    "SendMessage": lambda self, status, request, _response: self._on_send(status, request),
    "AckMessage": ProxyMetrics._on_ack,
    "ForwardMessageToDeadLetterQueue": ProxyMetrics._on_dlq,
}


class ProxyHealth:
    """Readiness (a NameServer lists a master broker) behind grpc.health.v1 and /ready."""

    def __init__(self, routes: Any) -> None:
        self.routes = routes
        self.servicer = health_aio.HealthServicer()
        self.ready = False
        self.reason = "routes not loaded yet"
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    async def start(self) -> None:
        await self._publish()
        self._task = asyncio.create_task(self._run(), name="proxy-readiness")

    async def shutdown(self) -> None:
        """NOT_SERVING for every service from now on (load balancers drain the proxy)."""
        self._closing = True
        task, self._task = self._task, None
        await cancel_and_wait(task, recancel_every=1.0)  # a probe's wait_for may swallow one cancellation
        self.ready = False
        self.reason = "shutting down"
        await self.servicer.enter_graceful_shutdown()

    def readiness(self) -> bool | str:
        return True if self.ready else self.reason

    async def _run(self) -> None:
        while not self._closing:
            await self.probe()
            await asyncio.sleep(READY_RECHECK_INTERVAL_SECONDS if self.ready else READY_PROBE_INTERVAL_SECONDS)

    async def probe(self) -> bool:
        try:
            info = await self.routes.cluster_info()
            masters = [name for name, data in info.broker_addr_table.items() if 0 in data.broker_addrs]
            ready, reason = bool(masters), "" if masters else "no master broker registered with the NameServers"
        except Exception as exc:
            ready, reason = False, f"NameServers unreachable: {exc}"
        if ready != self.ready:
            log.info("proxy readiness: %s", "ready" if ready else reason)
        self.ready, self.reason = ready, reason or "ready"
        await self._publish()
        return ready

    async def _publish(self) -> None:
        """"" (the server as a whole) is SERVING while it runs: a liveness probe; the
        MessagingService entry is the readiness probe."""
        serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
        await self.servicer.set("", serving)
        await self.servicer.set(SERVICE_NAME, serving if self.ready else not_serving)
