"""NamesrvController: owns the NameServer's parts and their lifecycle, embeddable in any process.

``orbitmq namesrv`` runs one in its own process; ``orbitmq local`` can run one next to a broker
and a proxy on the same event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from orbitmq.auth.client import install_signing
from orbitmq.auth.engine import install_bootstrap_guard
from orbitmq.common import atomic_file
from orbitmq.common.aio import cancel_and_wait, periodic
from orbitmq.common.atomic_file import NewestSnapshotWriter
from orbitmq.common.metrics import Source, hub, metrics_enabled
from orbitmq.namesrv.cluster_test import ProductEnvRoutes
from orbitmq.namesrv.config import NamesrvConfig
from orbitmq.namesrv.kvconfig import KVConfigManager
from orbitmq.namesrv.metrics import NamesrvMetrics
from orbitmq.namesrv.processor import DefaultRequestProcessor
from orbitmq.namesrv.routeinfo import RouteInfoManager, choose_broker_addrs_to_notify
from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.codes import RequestCode
from orbitmq.remoting.errors import RemotingError
from orbitmq.remoting.headers import NotifyMinBrokerIdChangeRequestHeader
from orbitmq.remoting.protocol import RemotingCommand
from orbitmq.remoting.server import RemotingServer, server_limits
from orbitmq.remoting.tls import client_ssl_context

log = logging.getLogger("orbitmq.namesrv")

SCAN_INITIAL_DELAY_MS = 5000
# NamesrvController#startScheduleService: the KV table goes to the log 1 minute after start,
# then every 10 minutes.
KV_PRINT_INITIAL_DELAY_S = 60.0
KV_PRINT_INTERVAL_S = 600.0


class NamesrvController:
    def __init__(self, config: NamesrvConfig | None = None) -> None:
        self.config = config or NamesrvConfig()
        self.kv_config_manager = KVConfigManager(self.config.kv_config_path)
        self.route_info_manager = RouteInfoManager(self.config, close_channel=self._close_channel,
                                                   notify_min_broker_id=self._notify_min_broker_id_changed)
        self.remoting_client = RemotingClient()
        self.remoting_client.ssl_context = client_ssl_context(self.config)  # tls.enable (calls to brokers)
        # clusterTest: routes of topics unknown here come from the product environment. Upstream
        # 5.x makes ClusterTestRequestProcessor the default processor, which answers every request
        # code as GET_ROUTEINFO_BY_TOPIC (so brokers cannot register); OrbitMQ keeps 4.x's
        # behaviour, where only the route lookup changes.
        self.product_env_routes: ProductEnvRoutes | None = (
            ProductEnvRoutes(self.config.product_env_name, self.remoting_client) if self.config.cluster_test else None)
        self.processor = DefaultRequestProcessor(self)
        self.remoting_server = RemotingServer(self.config.bind_address, self.config.listen_port,
                                              **server_limits(self.config))
        # ACL 2.0: authenticate requests; sign the calls to brokers with the inner credentials
        install_bootstrap_guard(self.remoting_server, self.config)
        install_signing(self.remoting_client, self.config.inner_credentials())
        self._scan_task: asyncio.Task[None] | None = None
        self._kv_print_task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._started = False
        # UPDATE_NAMESRV_CONFIG writes run on worker threads; two quick updates must not finish
        # out of order and leave the older config on disk.
        self._config_writer = NewestSnapshotWriter()
        # metrics (services/namesrv/metrics.py); None when metricsExporterType=DISABLE
        self.metrics: NamesrvMetrics | None = NamesrvMetrics(self) if metrics_enabled(self.config) else None

    @property
    def port(self) -> int:
        return self.remoting_server.port

    @property
    def address(self) -> str:
        host = self.config.bind_address
        if host in ("0.0.0.0", "", "::"):
            host = "127.0.0.1"
        return f"{host}:{self.port}"

    async def start(self) -> None:
        """Load KV config, listen, and begin the not-active-broker scan."""
        if self._started:
            return
        await hub().attach(self.config, self._readiness_name(), lambda: self._started or "starting",
                           self._metrics_source())
        try:
            await asyncio.to_thread(self.kv_config_manager.load)
            self.remoting_server.register_default(self.processor.process)
            self.remoting_server.on_connect(self._on_connect)
            await self.remoting_server.start()
        except BaseException:
            await self._stop_metrics()
            raise
        interval = self._scan_interval()
        # Upstream waits 5 s before the first scan; a shorter interval (tests) starts sooner.
        self._scan_task = asyncio.create_task(
            periodic(self._scan_interval, self.route_info_manager.scan_not_active_broker, what="scanNotActiveBroker",
                     initial_delay=min(SCAN_INITIAL_DELAY_MS / 1000, interval)),
            name="NSScanScheduledThread")
        self._kv_print_task = asyncio.create_task(
            periodic(KV_PRINT_INTERVAL_S, self.kv_config_manager.print_all_periodically, what="printAllPeriodically",
                     initial_delay=KV_PRINT_INITIAL_DELAY_S),
            name="NSScheduledThread")
        self._started = True

    async def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        await cancel_and_wait(self._scan_task)
        await cancel_and_wait(self._kv_print_task)
        self._scan_task = self._kv_print_task = None
        await self.remoting_server.close()
        await self.remoting_client.close()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        await self._stop_metrics()
        log.info("The Name Server shutdown OK")

    async def _stop_metrics(self) -> None:
        await hub().detach(self.config, self._readiness_name(), self._metrics_source())

    def _metrics_source(self) -> Source | None:
        return self.metrics.collect if self.metrics is not None else None

    def _readiness_name(self) -> str:
        return f"namesrv:{id(self):x}"

    def _on_connect(self, channel: Any) -> None:
        # BrokerHousekeepingService: a broker whose connection goes away leaves the routes at once.
        channel.on_close(self.route_info_manager.on_channel_destroy)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _close_channel(self, channel: Any) -> None:
        close = getattr(channel, "close", None)
        if close is not None:
            self._spawn(close())

    def _notify_min_broker_id_changed(self, broker_addrs: dict[int, str], offline_addr: str | None,
                                      ha_addr: str | None) -> None:
        """Tell the group's brokers who the smallest live brokerId is now (slave acting master)."""
        min_id = min(broker_addrs)
        header = NotifyMinBrokerIdChangeRequestHeader(min_broker_id=min_id, min_broker_addr=broker_addrs[min_id],
                                                      offline_broker_addr=offline_addr, ha_broker_addr=ha_addr)
        for addr in choose_broker_addrs_to_notify(broker_addrs, offline_addr):
            self._spawn(self._send_oneway(addr, RemotingCommand.request(
                RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE, header.to_ext_fields())))

    async def _send_oneway(self, addr: str, request: RemotingCommand) -> None:
        try:
            await self.remoting_client.invoke_oneway(addr, request, timeout=0.3)
        except RemotingError as exc:
            log.warning("notify min broker id change to %s failed: %s", addr, exc)

    def _scan_interval(self) -> float:
        """Read at every period: UPDATE_NAMESRV_CONFIG may change it while running."""
        return max(self.config.scan_not_active_broker_interval, 1) / 1000

    async def persist_config(self) -> None:
        """Write the live config to configStorePath after UPDATE_NAMESRV_CONFIG (Configuration.persist)."""
        data = self.config.to_properties().encode("utf-8")
        try:
            await self._config_writer.write_async(self.config.config_store_path, atomic_file.write_file_atomically, data)
        except OSError:
            log.exception("persist namesrv config to %s failed", self.config.config_store_path)
