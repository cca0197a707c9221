"""`orbitmq local`: a NameServer, a broker and a gRPC proxy under one command, ready for clients.

Defaults are RocketMQ's ports (9876, 10911, 8081) on 127.0.0.1, cluster DefaultCluster, data in
~/.orbitmq, topics and consumer groups created on first use. The broker runs in a child process
by default so that it and the proxy each get a core (one event loop is one core under the GIL);
``--one-process`` keeps all three on one event loop. SIGINT/SIGTERM shut the three down in
reverse order, so the broker flushes and persists its offsets before the command exits. The
child watches a pipe from the parent and shuts itself down when the parent disappears.
``--pin-cpus`` (opt-in) keeps the parent on the first allowed CPU and the broker child on the
second, so the two busy event loops stop migrating between cores. ``--proxy-mode local`` runs the
proxy in the broker's process, calling its processors directly (services/proxy/local.py): all
three on one event loop, as ``--one-process``, without the Remoting hop between proxy and broker.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from orbitmq.common.child_process import ServiceChild
from orbitmq.common.config import parse_cli_overrides
from orbitmq.common.log import setup_logging
from orbitmq.common.runtime import freeze_startup_objects, stop_on_signals, watch_parent

DEFAULT_DATA_DIR = "~/.orbitmq"
BROKER_READY = "orbitmq local broker ready on port"
# The broker child's own metrics port (ephemeral): the parent merges it into its one endpoint.
BROKER_METRICS = "orbitmq local broker metrics on port"
METRICS_KEYS = frozenset({"metricsExporterType", "metricsPromExporterHost", "metricsPromExporterPort", "metricsLabel",
                          "metricLoggingExporterIntervalInMills"})
# How long a broker child may take to boot (store recovery) and to flush on shutdown.
BROKER_START_TIMEOUT_SECONDS = 120.0
BROKER_STOP_TIMEOUT_SECONDS = 60.0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="orbitmq local",
                                description="Run a NameServer, a broker and a gRPC proxy under one command.")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="where the store and configs live (~/.orbitmq)")
    p.add_argument("--host", default="127.0.0.1", help="address the services advertise and listen on")
    p.add_argument("--namesrv-port", type=int, default=9876)
    p.add_argument("--broker-port", type=int, default=10911)
    p.add_argument("--proxy-port", type=int, default=8081)
    p.add_argument("--log-level", default="WARNING", help="DEBUG, INFO, WARNING or ERROR")
    p.add_argument("--one-process", action="store_true",
                   help="run the broker on the same event loop as the NameServer and proxy (one core)")
    p.add_argument("--pin-cpus", action="store_true",
                   help="pin the NameServer+proxy process to the first allowed CPU and the broker child to the "
                        "second (Linux; ignored with --one-process or fewer than two CPUs)")
    p.add_argument("--proxy-workers", type=int, default=None, metavar="N",
                   help="proxy processes sharing the gRPC port (SO_REUSEPORT): this process's proxy and N-1 "
                        "workers; default the CPUs allowed minus one for the broker (at least 1; 1 with --pin-cpus)")
    p.add_argument("--ha", action="store_true",
                   help="the controller-mode quick start instead: three controllers, a broker set of three "
                        "replicas (each its own process), a NameServer and a proxy")
    p.add_argument("--controller-ports", default=None, metavar="P0,P1,P2",
                   help="--ha: the controllers' Remoting ports (9878,9868,9858)")
    p.add_argument("--raft-ports", default=None, metavar="P0,P1,P2",
                   help="--ha: the controllers' Raft peer ports, controllerDLegerPeers (9877,9867,9857)")
    p.add_argument("--broker-ports", default=None, metavar="P0,P1,P2",
                   help="--ha: the replicas' ports (10911,10921,10931); each one's HA port is the next")
    # Internal: the broker child of `orbitmq local` (run with the parent's arguments).
    p.add_argument("--broker-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--broker-cpu", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--proxy-mode", choices=("cluster", "local"), default="cluster", type=str.lower,
                   help="cluster (default): the proxy calls the broker over Remoting; local: the proxy runs in "
                        "the broker's process and calls its processors directly (proxyMode=local; one process, "
                        "so no --proxy-workers)")
    p.add_argument("--tls", action="store_true",
                   help="serve gRPC over TLS too (plaintext and TLS on one port) with a self-signed pair "
                        "kept in <data-dir>/tls; prints how to trust it")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="extra broker.conf / proxy settings")
    return p


def default_proxy_workers() -> int:
    """One proxy process per CPU this process may use, but one CPU left to the broker."""
    getter = getattr(os, "sched_getaffinity", None)
    cpus = len(getter(0)) if getter is not None else (os.cpu_count() or 1)
    return max(1, cpus - 1)


def client_example(endpoint: str) -> str:
    """The two lines printed at start-up: enough to send a first message with the official client."""
    return ("from rocketmq import ClientConfiguration, Credentials, Message, Producer\n"
            f'p = Producer(ClientConfiguration("{endpoint}", Credentials())); p.startup(); '
            'm = Message(); m.topic = "TopicTest"; m.body = b"hello"; print(p.send(m)); p.shutdown()')


def cpu_plan() -> tuple[int, int] | None:
    """(CPU for the NameServer+proxy process, CPU for the broker child), or None if fewer than two.

    Measured on the 2-core bench machine (`bench producer -b 32 -w 8`, 3 runs each, same
    minutes): with each loop on a core of its own the proxy's CPU per message fell ~8 %, the
    broker's ~4 %, and throughput rose ~10 %, since neither loop keeps losing its cache to a
    migration. Off by default: on a shared or larger machine the scheduler knows better.
    """
    getter = getattr(os, "sched_getaffinity", None)
    if getter is None or not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(getter(0))
    return (allowed[0], allowed[1]) if len(allowed) >= 2 else None


def pin_to_cpu(cpu: int) -> bool:
    """Pin every thread of this process to ``cpu``; False if the OS refuses (no such CPU, …)."""
    if not hasattr(os, "sched_setaffinity"):
        return False
    # sched_setaffinity(0) covers only the calling thread: pin the threads already running too
    # (threads started later inherit the mask of the thread that starts them).
    try:
        os.sched_setaffinity(0, {cpu})
    except (OSError, ValueError):
        return False
    with contextlib.suppress(OSError):
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError):
                os.sched_setaffinity(int(tid), {cpu})
    return True


class BrokerProcess(ServiceChild):
    """The broker of a LocalCluster in a child process (`orbitmq local --broker-child`), which
    never outlives this one (orbitmq.common.child_process)."""

    def __init__(self, argv: list[str]) -> None:
        super().__init__("the broker process", ["local", "--broker-child", *argv], BROKER_READY, BROKER_METRICS,
                         start_timeout=BROKER_START_TIMEOUT_SECONDS, stop_timeout=BROKER_STOP_TIMEOUT_SECONDS)

    async def shutdown(self) -> None:
        await self.stop()


class LocalCluster:
    """The three services of `orbitmq local`, embeddable (tests, notebooks) with async start/stop.

    ``broker_process=True`` runs the broker in a child process (``self.broker`` is then a
    BrokerProcess, not a BrokerController); the default keeps everything on the caller's loop.
    """

    def __init__(self, data_dir: str | Path = DEFAULT_DATA_DIR, host: str = "127.0.0.1", namesrv_port: int = 9876,
                 broker_port: int = 10911, proxy_port: int = 8081, overrides: dict[str, str] | None = None,
                 *, broker_process: bool = False, log_level: str = "WARNING", pin_cpus: bool = False,
                 proxy_workers: int = 1, proxy_mode: str = "cluster") -> None:
        if proxy_mode not in ("cluster", "local"):
            raise ValueError(f"--proxy-mode must be cluster or local, got {proxy_mode!r}")
        if proxy_mode == "local" and (broker_process or proxy_workers > 1):
            raise ValueError("--proxy-mode local runs the proxy inside the broker's process: "
                             "no broker child process, one proxy process")
        if proxy_workers < 1:
            raise ValueError(f"--proxy-workers must be at least 1, got {proxy_workers}")
        if pin_cpus and proxy_workers > 1:
            raise ValueError("--pin-cpus pins the one proxy process to a CPU: use it with --proxy-workers 1")
        self.data_dir = Path(data_dir).expanduser()
        self.host = host
        self.namesrv_port = namesrv_port
        self.broker_port = broker_port
        self.proxy_port = proxy_port
        self.overrides = dict(overrides or {})
        self.broker_process = broker_process
        self.log_level = log_level
        self.pin_cpus = pin_cpus
        # proxy_workers > 1: this process's proxy and proxy_workers - 1 `orbitmq proxy --worker`
        # processes share the gRPC port (services/proxy/workers.py)
        self.proxy_workers = proxy_workers
        self.proxy_mode = proxy_mode  # local: ProxyServer(broker=self.broker), services/proxy/local.py
        self.proxy_pool = None
        self._proxy_values: dict[str, str] = {}
        self._cpus: tuple[int, int] | None = None
        self.namesrv = None
        self.broker = None
        self.proxy = None
        self._remote_metrics: int | None = None

    @property
    def namesrv_addr(self) -> str:
        return f"{self.host}:{self.namesrv_port}"

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.proxy.port if self.proxy else self.proxy_port}"

    def metrics_values(self) -> dict[str, str]:
        """The metrics keys every service of the cluster shares: one endpoint, on --host."""
        values = {"metricsPromExporterHost": self.host}
        values.update({k: v for k, v in self.overrides.items() if k in METRICS_KEYS})
        return values

    def unknown_keys(self) -> list[str]:
        """Overrides no service of the cluster knows: warned about on the console, as the
        single services' loaders do, instead of being dropped without a word."""
        from orbitmq.broker.config import BrokerConfig
        from orbitmq.broker.store.config import MessageStoreConfig
        from orbitmq.namesrv.config import NamesrvConfig
        from orbitmq.proxy.config import ProxyConfig

        known = (BrokerConfig.config_keys() | MessageStoreConfig.config_keys() | ProxyConfig.config_keys()
                 | NamesrvConfig.config_keys())
        return sorted(k for k in self.overrides if k not in known)

    def _configs(self):
        from orbitmq.broker.config import BrokerConfig
        from orbitmq.broker.store.config import MessageStoreConfig
        from orbitmq.common.config import load_configs
        from orbitmq.namesrv.config import NamesrvConfig
        from orbitmq.proxy.config import ProxyConfig

        values = {
            # NameServer
            "listenPort": str(self.namesrv_port),
            "kvConfigPath": str(self.data_dir / "namesrv" / "kvConfig.json"),
            "configStorePath": str(self.data_dir / "namesrv" / "namesrv.properties"),
            **self.metrics_values(),
        }
        # NameServer-only keys (orderMessageEnable, ...) go to the NameServer; shared names such as
        # listenPort belong to the broker or proxy below.
        shared = BrokerConfig.config_keys() | MessageStoreConfig.config_keys() | ProxyConfig.config_keys()
        values.update({k: v for k, v in self.overrides.items()
                       if k in NamesrvConfig.config_keys() and k not in shared})
        (namesrv_cfg,) = load_configs(None, values, NamesrvConfig)
        broker_values = {
            "brokerClusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": "0",
            "brokerIP1": self.host, "listenPort": str(self.broker_port),
            # haListenPort: the default, listenPort + 1, or a free port when that one is taken.
            "namesrvAddr": self.namesrv_addr, "storePathRootDir": str(self.data_dir / "store"),
            "autoCreateTopicEnable": "true", "autoCreateSubscriptionGroup": "true", "flushDiskType": "ASYNC_FLUSH",
        }
        # The proxy's Remoting port on an ephemeral port unless remotingListenPort is given: the
        # broker's own port already serves Remoting clients here.
        proxy_values = {"namesrvAddr": self.namesrv_addr, "grpcServerPort": str(self.proxy_port),
                        "autoCreateTopicEnable": "true", "remotingListenPort": "0", "proxyMode": self.proxy_mode}
        broker_values.update(self.metrics_values())
        proxy_values.update(self.metrics_values())
        broker_keys = set(BrokerConfig.config_keys()) | set(MessageStoreConfig.config_keys())
        for key, value in self.overrides.items():
            if key in broker_keys:
                broker_values[key] = value
            if key in ProxyConfig.config_keys():
                proxy_values[key] = value
        if proxy_values.get("traceEnable", "").strip().lower() == "true":
            # The proxy's trace records need the trace topic: its broker creates it unless told not to.
            broker_values.setdefault("traceTopicEnable", "true")
        broker_cfg, store_cfg = load_configs(None, broker_values, BrokerConfig, MessageStoreConfig)
        broker_cfg.resolve_defaults()
        (proxy_cfg,) = load_configs(None, proxy_values, ProxyConfig)
        self._proxy_values = proxy_values
        return namesrv_cfg, broker_cfg, store_cfg, proxy_cfg

    def _child_argv(self) -> list[str]:
        return ["--data-dir", str(self.data_dir), "--host", self.host, "--namesrv-port", str(self.namesrv_port),
                "--broker-port", str(self.broker_port), "--proxy-port", str(self.proxy_port),
                "--log-level", self.log_level, *(["--broker-cpu", str(self._cpus[1])] if self._cpus else []),
                *(f"{k}={v}" for k, v in self.overrides.items())]

    async def start(self) -> None:
        from orbitmq.broker.controller import BrokerController
        from orbitmq.namesrv.controller import NamesrvController
        from orbitmq.proxy.server import ProxyServer

        self.data_dir.mkdir(parents=True, exist_ok=True)
        namesrv_cfg, broker_cfg, store_cfg, proxy_cfg = self._configs()
        if self.pin_cpus and self.broker_process:
            # Planned before pinning: the child inherits this process's mask and pins itself.
            self._cpus = cpu_plan()
            if self._cpus is not None and not pin_to_cpu(self._cpus[0]):
                self._cpus = None
        try:
            self.namesrv = NamesrvController(namesrv_cfg)
            await self.namesrv.start()
            if self.broker_process:
                self.broker = BrokerProcess(self._child_argv())
            else:
                self.broker = BrokerController(broker_cfg, store_cfg, listen_host=self.host)
            await self.broker.start()
            if isinstance(self.broker, BrokerProcess):
                self._merge_broker_child_metrics()
            local = self.broker if self.proxy_mode == "local" else None
            self.proxy = ProxyServer(proxy_cfg, host=self.host, reuse_port=self.proxy_workers > 1, broker=local)
            await self.proxy.start()
            if self.proxy_workers > 1:
                await self._start_proxy_workers()
        except BaseException:
            await self.shutdown()
            raise

    async def _start_proxy_workers(self) -> None:
        from orbitmq.proxy.workers import ProxyWorkerPool

        skip = {"namesrvAddr", "grpcServerPort", "metricsPromExporterPort"}
        argv = ["--host", self.host, "-n", self.namesrv_addr, "--port", str(self.proxy.port), "--log-level",
                self.log_level, *(f"{k}={v}" for k, v in self._proxy_values.items() if k not in skip),
                "metricsPromExporterPort=0"]
        self.proxy_pool = ProxyWorkerPool(self.proxy_workers - 1, argv, metrics_host=self.host)
        await self.proxy_pool.start()  # kept running (a dead worker started again) until shutdown

    def _merge_broker_child_metrics(self) -> None:
        """The child's /metrics joins this process's endpoint; /ready waits for the child."""
        from orbitmq.common.metrics import hub

        child = self.broker
        if child.metrics_port:
            hub().add_remote(self.host, child.metrics_port, "broker child")
            self._remote_metrics = child.metrics_port
        hub().add_readiness(f"broker child:{id(self):x}", lambda: child.running or "broker process not running")

    @property
    def metrics_endpoint(self) -> str | None:
        """http://host:port/metrics of this cluster, when metricsExporterType=PROM."""
        if self.namesrv is None or self.namesrv.config.metrics_exporter_type.upper() != "PROM":
            return None
        return f"http://{self.host}:{self.namesrv.config.metrics_prom_exporter_port}/metrics"

    async def shutdown(self) -> None:
        from orbitmq.common.metrics import hub

        hub().remove_readiness(f"broker child:{id(self):x}")
        if self.proxy_pool is not None:
            pool, self.proxy_pool = self.proxy_pool, None
            await pool.shutdown()
        if self._remote_metrics is not None:
            hub().remove_remote(self.host, self._remote_metrics)
            self._remote_metrics = None
        for attr in ("proxy", "broker", "namesrv"):
            service = getattr(self, attr)
            if service is not None:
                setattr(self, attr, None)
                with contextlib.suppress(Exception):
                    await service.shutdown()


async def run_broker_child(args: argparse.Namespace) -> int:
    """The broker half of `orbitmq local`, in the child process the parent started."""
    from orbitmq.broker.controller import BrokerController

    cluster = LocalCluster(args.data_dir, args.host, args.namesrv_port, args.broker_port, args.proxy_port,
                           parse_cli_overrides(args.overrides))  # the parent's, metrics keys included
    _, broker_cfg, store_cfg, _ = cluster._configs()
    # The parent serves the cluster's one endpoint: this child's goes on a free port it merges.
    broker_cfg.metrics_prom_exporter_port = 0
    if args.broker_cpu is not None:
        pin_to_cpu(args.broker_cpu)
    stop = asyncio.Event()
    stop_on_signals(stop)
    watcher = asyncio.create_task(watch_parent(stop))
    broker = BrokerController(broker_cfg, store_cfg, listen_host=args.host)
    try:
        try:
            await broker.start()
        except BaseException:
            await broker.abort_start()
            raise
        freeze_startup_objects()
        if broker_cfg.metrics_exporter_type.upper() == "PROM":
            print(f"{BROKER_METRICS} {broker_cfg.metrics_prom_exporter_port}", flush=True)
        print(f"{BROKER_READY} {broker_cfg.listen_port}", flush=True)
        try:
            await stop.wait()
        finally:
            await broker.shutdown()
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
    return 0


def _port_free(host: str, port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def with_default_metrics(overrides: dict[str, str], host: str = "127.0.0.1") -> dict[str, str]:
    """`orbitmq local` exports Prometheus metrics on 5557 unless told otherwise
    (metricsExporterType=DISABLE, metricsPromExporterPort=...). When 5557 was not asked for and
    is taken (another `orbitmq local`, a broker), a free port is used and printed instead."""
    from orbitmq.common.metrics import DEFAULT_PROM_PORT, fall_back_from_default_port

    values = {"metricsExporterType": "PROM", **overrides}
    if "metricsPromExporterPort" not in overrides and values["metricsExporterType"].strip().upper() == "PROM":
        if not _port_free(overrides.get("metricsPromExporterHost", host), DEFAULT_PROM_PORT):
            print(f"orbitmq local: port {DEFAULT_PROM_PORT} is in use, metrics go to a free port", file=sys.stderr)
            values["metricsPromExporterPort"] = "0"
        else:
            fall_back_from_default_port()  # and if it is taken before the exporter binds it
    return values


def tls_overrides(data_dir: str | os.PathLike[str]) -> dict[str, str]:
    """`orbitmq local --tls`: permissive TLS with a self-signed pair in <data-dir>/tls, made by the
    proxy on its first start and reused after (services/proxy/tls.py)."""
    tls_dir = Path(data_dir).expanduser() / "tls"
    return {"tlsTestModeEnable": "true", "tlsCertPath": str(tls_dir / "rocketmq.crt"),
            "tlsKeyPath": str(tls_dir / "rocketmq.key"), "tls.server.mode": "permissive"}


async def run(args: argparse.Namespace) -> int:
    overrides = parse_cli_overrides(args.overrides)
    if getattr(args, "tls", False):
        overrides = {**tls_overrides(args.data_dir), **overrides}
    local_mode = getattr(args, "proxy_mode", "cluster") == "local"
    if local_mode and (args.proxy_workers or 1) > 1:
        raise ValueError("--proxy-mode local runs one proxy inside the broker's process: no --proxy-workers")
    cluster = LocalCluster(args.data_dir, args.host, args.namesrv_port, args.broker_port, args.proxy_port,
                           with_default_metrics(overrides, args.host),
                           broker_process=not args.one_process and not local_mode, log_level=args.log_level,
                           pin_cpus=args.pin_cpus and not local_mode,
                           proxy_workers=1 if local_mode else
                           args.proxy_workers or (1 if args.pin_cpus else default_proxy_workers()),
                           proxy_mode="local" if local_mode else "cluster")
    unknown = cluster.unknown_keys()
    if unknown:
        print(f"orbitmq local: unknown config keys ignored (no NameServer, broker, store or proxy key): "
              f"{', '.join(unknown)}", file=sys.stderr, flush=True)
    stop = asyncio.Event()
    stop_on_signals(stop)
    await cluster.start()
    freeze_startup_objects()
    workers = f", {cluster.proxy_workers} proxy processes" if cluster.proxy_workers > 1 else ""
    if local_mode:
        workers = ", proxy in local mode inside the broker's process"
    print(f"OrbitMQ is running. gRPC endpoint: {cluster.endpoint}  (NameServer {cluster.namesrv_addr}, "
          f"broker {args.host}:{args.broker_port}{workers}, data {cluster.data_dir})", flush=True)
    if cluster.metrics_endpoint:
        print(f"Prometheus metrics: {cluster.metrics_endpoint}  (readiness: "
              f"{cluster.metrics_endpoint.removesuffix('/metrics')}/ready)", flush=True)
    print("Send a first message with the official client (pip install rocketmq-python-client):", flush=True)
    print(client_example(cluster.endpoint), flush=True)
    if "tlsCertPath" in overrides and getattr(args, "tls", False):
        from orbitmq.proxy.tls import trust_hint
        print(f"TLS and plaintext on {cluster.endpoint} (tls_enable=True in the client). "
              + trust_hint(overrides["tlsCertPath"]), flush=True)
    print("Press Ctrl-C to stop.", flush=True)
    exit_code = 0
    waiters = [asyncio.create_task(stop.wait())]
    if isinstance(cluster.broker, BrokerProcess):
        waiters.append(asyncio.create_task(cluster.broker.wait()))
    try:
        done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        if waiters[0] not in done:
            print(f"orbitmq local: the broker process exited unexpectedly "
                  f"(exit code {waiters[1].result()}), stopping", file=sys.stderr, flush=True)
            exit_code = 1
    finally:
        for waiter in waiters:
            waiter.cancel()
        await cluster.shutdown()
        print("OrbitMQ stopped.", flush=True)
    return exit_code


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        setup_logging(args.log_level)
        parse_cli_overrides(args.overrides)
    except ValueError as exc:
        print(f"orbitmq local: {exc}", file=sys.stderr)
        return 1
    if args.ha:
        from orbitmq.local_ha import run_ha

        try:
            return asyncio.run(run_ha(args))
        except (OSError, RuntimeError, ValueError) as exc:
            print(f"orbitmq local --ha: {exc}", file=sys.stderr)
            return 1
    try:
        return asyncio.run(run_broker_child(args) if args.broker_child else run(args))
    except (OSError, RuntimeError, ValueError) as exc:
        print(f"orbitmq local: {exc}", file=sys.stderr)
        return 1
