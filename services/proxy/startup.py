"""`orbitmq proxy`: start a gRPC Proxy (mqproxy) in cluster mode."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence

from orbitmq.common.runtime import freeze_startup_objects
from orbitmq.config import load_configs, parse_cli_overrides
from orbitmq.log import setup_logging
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.server import ProxyServer


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="orbitmq proxy", description="Start a RocketMQ 5 gRPC Proxy (cluster mode).")
    p.add_argument("-c", "--config", help="proxy config file (key=value lines, RocketMQ's proxy key names)")
    p.add_argument("-n", "--namesrv-addr", help="NameServer list, e.g. 127.0.0.1:9876;host2:9876")
    p.add_argument("--port", type=int, help="gRPC listen port (grpcServerPort, default 8081)")
    p.add_argument("-p", "--print-config", action="store_true", help="print the effective config and exit")
    p.add_argument("--log-level", default="INFO")
    p.add_argument("overrides", nargs="*", help="extra key=value settings")
    return p


def build_config(args: argparse.Namespace) -> ProxyConfig:
    overrides = parse_cli_overrides(args.overrides)
    if args.namesrv_addr:
        overrides["namesrvAddr"] = args.namesrv_addr
    if args.port is not None:
        overrides["grpcServerPort"] = str(args.port)
    (config,) = load_configs(args.config, overrides, ProxyConfig)
    return config


async def serve(config: ProxyConfig) -> None:
    server = ProxyServer(config)
    await server.start()
    freeze_startup_objects()
    print(f"The proxy boot success, gRPC endpoint 127.0.0.1:{server.port}, namesrv {config.namesrv_addr}",
          flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        config = build_config(args)
    except (OSError, ValueError) as exc:
        print(f"orbitmq proxy: {exc}", file=sys.stderr)
        return 1
    if args.print_config:
        print(config.to_properties(), end="")
        return 0
    setup_logging(args.log_level)
    try:
        asyncio.run(serve(config))
    except OSError as exc:
        print(f"orbitmq proxy: {exc}", file=sys.stderr)
        return 1
    return 0
