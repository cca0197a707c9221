"""ProxyServer: the gRPC Proxy as an embeddable object with async start/shutdown."""

from __future__ import annotations

import logging

import grpc

from orbitmq.client import MQClientAPI, TopicRouteCache, parse_namesrv_addr
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc
from orbitmq.proxy.client_manager import ClientManager
from orbitmq.proxy.cluster import ClusterService, FailoverStats
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.consumer import ConsumerActivity
from orbitmq.proxy.offsets import OffsetActivity
from orbitmq.proxy.producer import ProducerActivity
from orbitmq.proxy.route import RouteActivity
from orbitmq.proxy.service import MessagingService
from orbitmq.remoting.client import RemotingClient

log = logging.getLogger("orbitmq.proxy")


class ProxyServer:
    """A stateless cluster-mode proxy: gRPC in front, Remoting to NameServers and brokers behind."""

    def __init__(self, config: ProxyConfig, host: str = "0.0.0.0") -> None:
        if config.proxy_mode.lower() != "cluster":
            raise ValueError(f"proxyMode {config.proxy_mode!r} is not supported: only cluster mode is")
        self.config = config
        self.host = host
        self.port: int | None = None
        self._server: grpc.aio.Server | None = None
        self.api: MQClientAPI | None = None
        self.routes: TopicRouteCache | None = None
        self.clients: ClientManager | None = None
        self.consumer: ConsumerActivity | None = None
        self.cluster: ClusterService | None = None

    def failover_stats(self) -> dict[str, int]:
        """broker_failures, send_retries, possible_duplicates (messages re-sent after an unknown outcome)."""
        return self.cluster.failover.as_dict() if self.cluster is not None else FailoverStats().as_dict()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        cfg = self.config
        namesrvs = parse_namesrv_addr(cfg.namesrv_addr)
        self.api = MQClientAPI(RemotingClient(), timeout=cfg.remoting_timeout_millis / 1000.0)
        self.routes = TopicRouteCache(self.api, namesrvs, cfg.topic_route_service_cache_refresh_seconds)
        cluster = self.cluster = ClusterService(cfg, self.api, self.routes)
        self.clients = ClientManager(cfg, cluster)
        self.consumer = ConsumerActivity(cfg, cluster, self.clients)
        service = MessagingService(RouteActivity(cfg, cluster), ProducerActivity(cfg, cluster), self.consumer,
                                   OffsetActivity(cfg, cluster), self.clients)
        limit = cfg.grpc_max_inbound_message_size
        server = grpc.aio.server(options=[
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", limit),
            ("grpc.so_reuseport", 0),
        ])
        sgrpc.add_MessagingServiceServicer_to_server(service, server)
        port = server.add_insecure_port(f"{self.host}:{cfg.grpc_server_port}")
        if port == 0:
            raise OSError(f"cannot listen on {self.host}:{cfg.grpc_server_port}")
        await server.start()
        self._server = server
        self.port = port
        cfg.grpc_server_port = port
        self.routes.start()
        self.clients.start()
        self.consumer.start()
        log.info("gRPC proxy listening on %s:%d (NameServers %s)", self.host, port, ";".join(namesrvs))

    async def shutdown(self) -> None:
        if self.cluster is not None and any(self.cluster.failover.as_dict().values()):
            log.info("failover: %s", " ".join(f"{k}={v}" for k, v in self.failover_stats().items()))
        if self._server is not None:
            await self._server.stop(self.config.grpc_shutdown_time_seconds)
            self._server = None
        if self.clients is not None:
            await self.clients.shutdown()
        if self.consumer is not None:
            await self.consumer.shutdown()
        if self.routes is not None:
            await self.routes.stop()
        if self.api is not None:
            await self.api.close()

    async def wait_closed(self) -> None:
        if self._server is not None:
            await self._server.wait_for_termination()
