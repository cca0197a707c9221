"""ProxyServer: the gRPC Proxy as an embeddable object with async start/shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import grpc
from grpc_health.v1 import health_pb2_grpc

from orbitmq.auth.client import install_signing
from orbitmq.client import MQClientAPI, TopicRouteCache, parse_namesrv_addr
from orbitmq.common.file_watch import FileWatchService, reload_on_change
from orbitmq.common.metrics import hub, metrics_enabled
from orbitmq.proto.apache.rocketmq.v2 import admin_pb2_grpc as agrpc
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc
from orbitmq.proxy import tls
from orbitmq.proxy.admin import auth as admin_auth
from orbitmq.proxy.admin.common import AdminParts
from orbitmq.proxy.admin.service import AdminService, instrument_metrics
from orbitmq.proxy.auth import new_proxy_auth_checker
from orbitmq.proxy.client_manager import ClientManager
from orbitmq.proxy.client_relay import ClientRequestRelay
from orbitmq.proxy.cluster import ClusterService, FailoverStats
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.consumer import ConsumerActivity
from orbitmq.proxy.metrics import ProxyHealth, ProxyMetrics
from orbitmq.proxy.offsets import OffsetActivity
from orbitmq.proxy.producer import ProducerActivity
from orbitmq.proxy.recall import RecallActivity
from orbitmq.proxy.remoting.server import RemotingProtocolServer
from orbitmq.proxy.route import RouteActivity
from orbitmq.proxy.service import MessagingService
from orbitmq.proxy.trace import ProxyTracer
from orbitmq.proxy.transaction import TransactionActivity
from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.tls import client_ssl_context

log = logging.getLogger("orbitmq.proxy")


class ProxyServer:
    """A stateless proxy: gRPC in front, Remoting to NameServers and brokers behind.

    proxyMode=local (services/proxy/local.py): ``broker``, a BrokerController of this process, is
    called in-process; the cluster's other brokers and the NameServers over Remoting."""

    def __init__(self, config: ProxyConfig, host: str = "0.0.0.0", *, reuse_port: bool = False,
                 broker: Any = None) -> None:
        mode = config.proxy_mode.strip().lower()
        if mode not in ("cluster", "local"):
            raise ValueError(f"proxyMode {config.proxy_mode!r} is not supported: cluster or local")
        if mode == "local" and broker is None:
            raise ValueError("proxyMode local needs the broker of this process (orbitmq proxy -pm local "
                             "-bc broker.conf, orbitmq broker --enable-proxy, orbitmq local --proxy-mode local)")
        if mode == "cluster" and broker is not None:
            raise ValueError("a broker of this process is for proxyMode local only")
        self.broker = broker
        self.config = config
        self.host = host
        # SO_REUSEPORT on the public port: one of `orbitmq proxy --workers N` (services/proxy/workers.py).
        # Off otherwise, so that a second proxy started on a taken port fails instead of sharing it.
        self.reuse_port = reuse_port
        self.port: int | None = None
        self._server: grpc.aio.Server | None = None
        self.api: MQClientAPI | None = None
        self.routes: TopicRouteCache | None = None
        self.clients: ClientManager | None = None
        self.route: RouteActivity | None = None
        self.consumer: ConsumerActivity | None = None
        self.cluster: ClusterService | None = None
        # metrics and health (services/proxy/metrics.py); metrics None when metricsExporterType=DISABLE
        self.metrics: ProxyMetrics | None = (
            ProxyMetrics(config, lambda: self.clients) if metrics_enabled(config) else None)
        self.health: ProxyHealth | None = None
        self._tls_front: tls.TlsFront | None = None
        self._credentials: tls.ReloadableCredentials | None = None
        self._cert_watch: FileWatchService | None = None
        self.tracer: ProxyTracer | None = None  # traceEnable: trace records for gRPC clients
        self.remoting: RemotingProtocolServer | None = None  # remotingListenPort (services/proxy/remoting/)

    def failover_stats(self) -> dict[str, int]:
        """broker_failures, send_retries, possible_duplicates (messages re-sent after an unknown outcome)."""
        return self.cluster.failover.as_dict() if self.cluster is not None else FailoverStats().as_dict()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        cfg = self.config
        # /metrics and /ready before anything else, so a scrape during start-up is answered.
        if self.metrics is not None:
            hub().add_source(self.metrics.collect)
        hub().add_readiness(self._readiness_name(), self._readiness)
        await hub().acquire(cfg, default_host="0.0.0.0")
        namesrvs = parse_namesrv_addr(cfg.namesrv_addr)
        cfg.validate_auth()
        remoting = self._remoting_client()
        remoting.ssl_context = client_ssl_context(cfg)  # tls.enable
        install_signing(remoting, cfg.inner_credentials())  # ACL 2.0: the proxy's own calls are signed
        self.api = MQClientAPI(remoting, timeout=cfg.remoting_timeout_millis / 1000.0)
        self.routes = TopicRouteCache(self.api, namesrvs, cfg.topic_route_service_cache_refresh_seconds)
        cluster = self.cluster = ClusterService(cfg, self.api, self.routes)
        if self.broker is not None:  # LocalTopicRouteService#getCurrentMessageQueueView: its own queues
            cluster.local_broker_name = self.broker.config.broker_name
        self.clients = ClientManager(cfg, cluster)
        self.consumer = ConsumerActivity(cfg, cluster, self.clients)
        self.route = RouteActivity(cfg, cluster, self.clients)  # its HeartbeatSyncer stops with the server
        service = MessagingService(self.route, ProducerActivity(cfg, cluster), self.consumer,
                                   OffsetActivity(cfg, cluster), self.clients, cfg)
        # Transactions (services/proxy/transaction.py): EndTransaction and the check-back relay.
        service.transactions = TransactionActivity(cfg, cluster, self.clients)
        service.transactions.start()
        # consumerStatus / queryMsgById -g -d for gRPC consumers (services/proxy/client_relay.py)
        service.relay = ClientRequestRelay(cfg, cluster, self.clients)
        service.relay.start()
        if cfg.trace_enable:  # services/proxy/trace.py
            tracer = self.tracer = ProxyTracer(cfg, cluster)
            service.producer.tracer = service.consumer.tracer = service.transactions.tracer = tracer
            tracer.start()
        service.recall = RecallActivity(cfg, cluster)  # RecallMessage (services/proxy/recall.py)
        limit = cfg.grpc_max_inbound_message_size
        auth = None
        if cfg.auth_enabled:  # ACL 2.0 (services/proxy/auth.py), inside the metrics' wrappers: refusals counted
            auth = new_proxy_auth_checker(cfg, cluster, self.api)
            if self.metrics is not None:
                auth.on_denied = self.metrics.on_auth_denied  # rocketmq_auth_denied_total
            auth.instrument(service)
        server = grpc.aio.server(options=[
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", limit),
            ("grpc.so_reuseport", 1 if self.reuse_port else 0),
            # abusive clients (issue 16): streams per connection, half-open and idle connections
            ("grpc.max_concurrent_streams", cfg.grpc_max_concurrent_streams_per_connection),
            ("grpc.keepalive_time_ms", cfg.grpc_keepalive_time_millis),
            ("grpc.keepalive_timeout_ms", cfg.grpc_keepalive_timeout_millis),
            # gRPC core closes on an unanswered keepalive ping only after its own ping timeout (1 min
            # by default), whatever keepalive_timeout says: a client that never reads (and so never
            # answers) would hold its streams and what they popped that long
            # (tests/integration/test_abusive_grpc.py).
            ("grpc.http2.ping_timeout_ms", cfg.grpc_keepalive_timeout_millis),
            ("grpc.max_connection_idle_ms", cfg.grpc_client_idle_time_mills),
        ])
        if self.metrics is not None:
            self.metrics.instrument(service)  # counting wrappers, not an interceptor (cheaper per call)
        sgrpc.add_MessagingServiceServicer_to_server(service, server)
        # apache.rocketmq.v2.Admin beside it (services/proxy/admin/): ACL inside the metrics' wrappers.
        admin = AdminService(AdminParts(cfg, cluster, service, self.metrics, lambda: self.remoting))
        if auth is not None:
            admin_auth.instrument(auth, admin, cfg.rocket_mq_cluster_name)
        if self.metrics is not None:
            instrument_metrics(self.metrics, admin)
        agrpc.add_AdminServicer_to_server(admin, server)
        self.health = ProxyHealth(self.routes)
        health_pb2_grpc.add_HealthServicer_to_server(self.health.servicer, server)
        port = await self._add_ports(server)
        await server.start()
        self._server = server
        if self._tls_front is not None:  # permissive TLS: the public port splices to both
            port = await self._tls_front.start()
        self.port = port
        cfg.grpc_server_port = port
        if self.broker is not None:
            remoting.proxy_addr = f"{remoting.proxy_addr.rpartition(':')[0]}:{port}"  # type: ignore[attr-defined]
        self.routes.start()
        self.clients.start()
        self.consumer.start()
        # The Remoting port (services/proxy/remoting/): Remoting clients through the proxy.
        self.remoting = RemotingProtocolServer(cfg, cluster, self.routes, self.host, reuse_port=self.reuse_port)
        if auth is not None:  # the same users, ACLs and caches as the gRPC port's
            self.remoting.install_auth(auth)
        await self.remoting.start()
        cfg.remoting_listen_port = self.remoting.port
        await self.health.start()
        log.info("gRPC proxy (%s mode) listening on %s:%d, Remoting on %d (NameServers %s)",
                 "local" if self.broker is not None else "cluster", self.host, port, self.remoting.port,
                 ";".join(namesrvs))

    def _remoting_client(self) -> RemotingClient:
        if self.broker is None:
            return RemotingClient()
        from orbitmq.proxy.local import LocalRemotingClient

        # The broker sees its in-process caller at the proxy's gRPC address (SimpleChannel's remote
        # address is the client's); the port is known once the gRPC port is bound.
        host = self.broker.config.broker_ip1 or "127.0.0.1"
        return LocalRemotingClient(self.broker, f"{host}:{self.config.grpc_server_port}")

    async def _add_ports(self, server: grpc.aio.Server) -> int:
        """The gRPC ports for tls.server.mode (services/proxy/tls.py): plaintext only, TLS only, or
        both behind a front on the public port that tells them apart by the first byte."""
        cfg = self.config
        public = f"{self.host}:{cfg.grpc_server_port}"
        tls.need_client_auth(cfg)  # a bad tls.server.need.client.auth stops the start, TLS on or not
        if not tls.tls_enabled(cfg):
            port = server.add_insecure_port(public)
        else:
            chain, key = await tls.server_credentials(cfg)
            roots = await asyncio.to_thread(tls.client_auth_roots, cfg)
            self._credentials = tls.ReloadableCredentials(chain, key, roots)
            creds = self._credentials.credentials()
            paths = tls.watched_paths(cfg)
            if paths:  # rotated certificates are served without a restart
                self._cert_watch = FileWatchService(paths, cfg.tls_cert_watch_interval_ms / 1000.0,
                                                    reload_on_change(self._reload_certificate, log), "proxy-tls-watch")
                await self._cert_watch.start()
            if tls.parse_tls_mode(cfg.tls_server_mode) == tls.ENFORCING:
                port = server.add_secure_port(public, creds)
            else:
                plain = server.add_insecure_port("127.0.0.1:0")
                secure = server.add_secure_port("127.0.0.1:0", creds)
                if plain == 0 or secure == 0:
                    raise OSError("cannot listen on loopback for the TLS front")
                self._tls_front = tls.TlsFront(self.host, cfg.grpc_server_port, plain, secure,
                                               reuse_port=self.reuse_port)
                return -1  # the front's port, once it listens
        if port == 0:
            raise OSError(f"cannot listen on {public}")
        return port

    def _reload_certificate(self) -> None:
        """Blocking: the new pair (and trust roots) for grpc's next handshakes."""
        assert self._credentials is not None
        cfg = self.config
        self._credentials.replace(cfg.tls_cert_path, cfg.tls_key_path, tls.client_auth_roots(cfg),
                                  cfg.tls_server_key_password)

    async def shutdown(self) -> None:
        if self._cert_watch is not None:
            await self._cert_watch.stop()
            self._cert_watch = None
        if self._tls_front is not None:
            await self._tls_front.close()
            self._tls_front = None
        if self.cluster is not None and any(self.cluster.failover.as_dict().values()):
            log.info("failover: %s", " ".join(f"{k}={v}" for k, v in self.failover_stats().items()))
        if self.health is not None:
            await self.health.shutdown()  # NOT_SERVING while the server drains
        # The gRPC port drains (HTTP/2 GOAWAY) while the Remoting port answers GO_AWAY, side by side.
        go_away = asyncio.ensure_future(self.remoting.begin_go_away()) if self.remoting is not None else None
        if self._server is not None:
            await self._server.stop(self.config.grpc_shutdown_time_seconds)
            self._server = None
        if go_away is not None:
            await go_away
        if self.remoting is not None:
            await self.remoting.shutdown()
            self.remoting = None
        if self.route is not None:
            await self.route.shutdown()
        if self.clients is not None:
            await self.clients.shutdown()
        if self.consumer is not None:
            await self.consumer.shutdown()
        if self.tracer is not None:  # after the last client call: what is queued is still sent
            await self.tracer.shutdown()
        if self.routes is not None:
            await self.routes.stop()
        if self.api is not None:
            await self.api.close()
        await self._stop_metrics()

    async def _stop_metrics(self) -> None:
        hub().remove_readiness(self._readiness_name())
        if self.metrics is not None:
            hub().remove_source(self.metrics.collect)
        with contextlib.suppress(Exception):
            await hub().release(self.config)

    def _readiness_name(self) -> str:
        return f"proxy {self.config.proxy_name}:{id(self):x}"

    def _readiness(self) -> bool | str:
        return self.health.readiness() if self.health is not None else "starting"

    async def wait_closed(self) -> None:
        if self._server is not None:
            await self._server.wait_for_termination()
