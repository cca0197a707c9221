"""`orbitmq proxy`: start a gRPC Proxy (mqproxy) in cluster mode, in this process or, with
``--workers N``, in N worker processes sharing the port (services/proxy/workers.py); or, with
``-pm local -bc broker.conf`` (ProxyStartup's proxyMode and brokerConfigPath), in local mode with
the broker of broker.conf started in this process (services/proxy/local.py)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence

from orbitmq.common.config import load_configs, parse_cli_overrides
from orbitmq.common.constants import NAMESRV_ADDR_ENV
from orbitmq.common.log import setup_logging
from orbitmq.common.metrics import exporter_type, hub
from orbitmq.common.runtime import freeze_startup_objects, stop_on_signals, watch_parent
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.server import ProxyServer
from orbitmq.proxy.workers import WORKER_METRICS, WORKER_READY, WORKER_STOP_TIMEOUT_SECONDS, ProxyWorkerPool


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="orbitmq proxy", description="Start a RocketMQ 5 gRPC Proxy: cluster mode, or local mode "
                                "(-pm local -bc broker.conf) with the broker in this process.")
    p.add_argument("-c", "--config", help="proxy config file (key=value lines, RocketMQ's proxy key names)")
    p.add_argument("-n", "--namesrv-addr", help="NameServer list, e.g. 127.0.0.1:9876;host2:9876")
    p.add_argument("--port", type=int, help="gRPC listen port (grpcServerPort, default 8081)")
    p.add_argument("-pm", "--proxyMode", dest="proxy_mode", choices=("cluster", "local"), type=str.lower,
                   help="cluster (default): brokers over Remoting; local: the broker of -bc in this process, "
                        "called directly")
    p.add_argument("-bc", "--brokerConfigPath", dest="broker_config",
                   help="local mode: the broker's config file (broker.conf, as `orbitmq broker -c`)")
    p.add_argument("-p", "--print-config", action="store_true", help="print the effective config and exit")
    p.add_argument("--log-level", default="INFO")
    p.add_argument("--host", default="0.0.0.0", help="address the gRPC port binds (default: every address)")
    p.add_argument("--workers", type=int, default=1,
                   help="proxy processes serving the one gRPC port (SO_REUSEPORT), e.g. one per core; "
                        "default 1: this process serves")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # started by --workers
    p.add_argument("overrides", nargs="*", help="extra key=value settings")
    return p


def build_config(args: argparse.Namespace) -> ProxyConfig:
    overrides = parse_cli_overrides(args.overrides)
    if args.namesrv_addr:
        overrides["namesrvAddr"] = args.namesrv_addr
    if args.port is not None:
        overrides["grpcServerPort"] = str(args.port)
    if getattr(args, "proxy_mode", None):
        overrides["proxyMode"] = args.proxy_mode
    if getattr(args, "broker_config", None):
        overrides["brokerConfigPath"] = args.broker_config
    (config,) = load_configs(args.config, overrides, ProxyConfig)
    return config


def namesrv_given(args: argparse.Namespace) -> bool:
    """Whether namesrvAddr was set (-n, a key=value, the config file, NAMESRV_ADDR) rather than
    defaulted: a local-mode proxy without one uses its broker's."""
    if args.namesrv_addr or os.environ.get(NAMESRV_ADDR_ENV):
        return True
    if any(o.split("=", 1)[0].strip() == "namesrvAddr" for o in args.overrides):
        return True
    if args.config:
        try:
            with open(args.config, encoding="utf-8") as f:
                return "namesrvAddr" in f.read()
        except OSError:
            return False
    return False


def is_local_mode(config: ProxyConfig) -> bool:
    return config.proxy_mode.strip().lower() == "local"


async def start_local_broker(config: ProxyConfig, broker_overrides: dict[str, str] | None = None, *,
                             namesrv_given: bool = True):
    """ProxyStartup#createBrokerController: the broker of brokerConfigPath, with the proxy's
    namesrvAddr as BrokerStartup's -n when one was given (else the proxy takes the broker's),
    started in this process."""
    from orbitmq.broker.controller import BrokerController
    from orbitmq.broker.startup import load_broker_configs

    overrides = dict(broker_overrides or {})
    if config.namesrv_addr and namesrv_given:
        overrides.setdefault("namesrvAddr", config.namesrv_addr)
    broker_config, store_config = load_broker_configs(config.broker_config_path or None, overrides)
    if not namesrv_given and broker_config.namesrv_addr:
        config.namesrv_addr = broker_config.namesrv_addr
    broker = BrokerController(broker_config, store_config)
    try:
        await broker.start()
    except BaseException:
        await broker.abort_start()
        raise
    print(f"The broker[{broker_config.broker_name}, {broker_config.broker_addr}] boot success. serializeType=JSON "
          f"and name server is {broker_config.namesrv_addr}", flush=True)
    return broker


async def serve(config: ProxyConfig, host: str = "0.0.0.0", *, worker: bool = False,
                broker_overrides: dict[str, str] | None = None, namesrv_given: bool = True) -> None:
    stop = asyncio.Event()
    stop_on_signals(stop)
    broker = (await start_local_broker(config, broker_overrides, namesrv_given=namesrv_given)
              if is_local_mode(config) else None)
    try:
        server = ProxyServer(config, host, reuse_port=worker, broker=broker)
        await server.start()
    except BaseException:
        if broker is not None:
            await broker.shutdown()
        raise
    freeze_startup_objects()
    watcher: asyncio.Task[None] | None = None
    if worker:  # lines the supervisor reads (services/proxy/workers.py), then its pipe is watched
        if exporter_type(config) == "PROM":
            print(f"{WORKER_METRICS} {config.metrics_prom_exporter_port}", flush=True)
        print(f"{WORKER_READY} {server.port}", flush=True)
        watcher = asyncio.create_task(watch_parent(stop))
    else:
        mode = f", local mode with broker {broker.config.broker_addr}" if broker is not None else ""
        print(f"The proxy boot success, gRPC endpoint 127.0.0.1:{server.port}, namesrv {config.namesrv_addr}, "
              f"Remoting endpoint 127.0.0.1:{config.remoting_listen_port}{mode}", flush=True)
    try:
        await stop.wait()
    finally:
        if watcher is None:
            await server.shutdown()
            if broker is not None:  # after the proxy: its last requests still reach the broker
                await broker.shutdown()
        else:
            watcher.cancel()
            # A worker never outlives its supervisor (watch_parent): its shutdown gets the supervisor's
            # own stop timeout, then the process ends whatever is still waiting on a broker.
            try:
                await asyncio.wait_for(server.shutdown(), WORKER_STOP_TIMEOUT_SECONDS)
            except TimeoutError:
                print(f"orbitmq proxy worker: shutdown not done after {WORKER_STOP_TIMEOUT_SECONDS:.0f} s, "
                      "exiting", file=sys.stderr, flush=True)
                os._exit(1)


def worker_argv(args: argparse.Namespace, config: ProxyConfig) -> list[str]:
    """A worker's command line: this one's, on the resolved port, with its metrics on a free port
    (the supervisor serves the merged endpoint on the configured one)."""
    return [*(["-c", args.config] if args.config else []), *(["-n", args.namesrv_addr] if args.namesrv_addr else []),
            "--host", args.host, "--port", str(config.grpc_server_port), "--log-level", args.log_level, *args.overrides,
            "metricsPromExporterPort=0"]


async def serve_workers(config: ProxyConfig, args: argparse.Namespace) -> None:
    if config.grpc_server_port == 0:
        raise ValueError("--workers needs a fixed gRPC port (grpcServerPort / --port): the workers share it")
    metrics_host = config.metrics_prom_exporter_host
    pool = ProxyWorkerPool(args.workers, worker_argv(args, config),
                           metrics_host="127.0.0.1" if metrics_host in ("", "0.0.0.0") else metrics_host)
    stop = asyncio.Event()
    stop_on_signals(stop)
    try:
        await hub().acquire(config, default_host="0.0.0.0")  # the workers' merged /metrics
        await pool.start()
        print(f"The proxy boot success, gRPC endpoint 127.0.0.1:{config.grpc_server_port}, namesrv "
              f"{config.namesrv_addr}, {args.workers} workers (pids {' '.join(map(str, pool.pids))}), "
              + (f"Remoting endpoint 127.0.0.1:{config.remoting_listen_port}" if config.remoting_listen_port
                 else "Remoting on an ephemeral port per worker"), flush=True)
        await stop.wait()
    finally:
        await pool.shutdown()
        await hub().release(config)


def main(argv: Sequence[str] | None = None, *, broker_overrides: dict[str, str] | None = None) -> int:
    """``broker_overrides``: key=value settings for the local-mode broker (`orbitmq broker
    --enable-proxy`'s own command-line keys)."""
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        config = build_config(args)
    except (OSError, ValueError) as exc:
        print(f"orbitmq proxy: {exc}", file=sys.stderr)
        return 1
    if args.print_config:
        print(config.to_properties(), end="")
        return 0
    if args.workers < 1:
        print(f"orbitmq proxy: --workers must be at least 1, got {args.workers}", file=sys.stderr)
        return 1
    if is_local_mode(config) and args.workers > 1:
        print("orbitmq proxy: local mode runs one proxy inside the broker's process: --workers must be 1",
              file=sys.stderr)
        return 1
    setup_logging(args.log_level)
    try:
        if args.workers > 1 and not args.worker:
            asyncio.run(serve_workers(config, args))
        else:
            asyncio.run(serve(config, args.host, worker=args.worker, broker_overrides=broker_overrides,
                              namesrv_given=namesrv_given(args)))
    except (OSError, RuntimeError, ValueError) as exc:
        print(f"orbitmq proxy: {exc}", file=sys.stderr)
        return 1
    return 0
