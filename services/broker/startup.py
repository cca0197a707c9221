"""`orbitmq broker -c broker.conf [-n addr] [-p] [key=value …]` (RocketMQ's mqbroker / BrokerStartup).

broker.conf holds both BrokerConfig and MessageStoreConfig keys; command-line key=value pairs
override the file, and -n overrides namesrvAddr (NAMESRV_ADDR is the fallback). SIGINT and
SIGTERM shut the broker down cleanly: offsets persisted, NameServers told, store closed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence

from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.controller import BrokerController
from orbitmq.broker.ha.broker_identity import BrokerIdentityError
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.common.config import load_configs, parse_cli_overrides
from orbitmq.common.log import setup_logging
from orbitmq.common.runtime import freeze_startup_objects
from orbitmq.common.startup import announce, stop_event_on_signals

log = logging.getLogger("orbitmq.broker")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="orbitmq broker", description="Start an OrbitMQ broker (mqbroker).")
    parser.add_argument("-c", "--configFile", dest="config", help="broker config file (broker.conf)")
    parser.add_argument("-n", "--namesrvAddr", dest="namesrv", help="name server address list, e.g. 127.0.0.1:9876;127.0.0.2:9876")
    parser.add_argument("-p", "--printConfigItem", dest="print_config", action="store_true",
                        help="print all config items and exit")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    parser.add_argument("--log-file", default=None, help="also log to this file")
    # mqbroker --enable-proxy: ProxyStartup -pm local -bc <configFile>, the proxy in this process
    # calling the broker's processors directly (services/proxy/local.py)
    parser.add_argument("--enable-proxy", action="store_true",
                        help="run a gRPC proxy in local mode in this process (as mqbroker --enable-proxy)")
    parser.add_argument("-pc", "--proxyConfigPath", dest="proxy_config",
                        help="with --enable-proxy: the proxy's config file (proxy.conf)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    return parser


def load_broker_configs(config_file: str | None, overrides: dict[str, str]) -> tuple[BrokerConfig, MessageStoreConfig]:
    loaded = load_configs(config_file, overrides, BrokerConfig, MessageStoreConfig)
    broker_config, store_config = loaded
    if config_file and not broker_config.broker_config_path:
        broker_config.broker_config_path = os.path.abspath(config_file)
    broker_config.resolve_defaults()
    return broker_config, store_config


async def run_broker(broker_config: BrokerConfig, store_config: MessageStoreConfig) -> None:
    controller = BrokerController(broker_config, store_config)
    stop = stop_event_on_signals()
    try:
        await controller.start()
    except BaseException:
        await controller.abort_start()
        raise
    freeze_startup_objects()
    message = (f"The broker[{broker_config.broker_name}, {broker_config.broker_addr}] boot success. "
               f"serializeType=JSON and name server is {broker_config.namesrv_addr}")
    announce(log, message)
    try:
        await stop.wait()
    finally:
        log.info("shutdown hook was invoked, shutting down the broker")
        await controller.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.enable_proxy and not args.print_config:
        from orbitmq.proxy.startup import main as proxy_main

        try:
            broker_overrides = parse_cli_overrides(args.overrides)
        except ValueError as exc:
            print(f"orbitmq broker: {exc}", file=sys.stderr)
            return 1
        proxy_argv = ["-pm", "local", *(["-bc", args.config] if args.config else []),
                      *(["-n", args.namesrv] if args.namesrv else []),
                      *(["-c", args.proxy_config] if args.proxy_config else []), "--log-level", args.log_level]
        return proxy_main(proxy_argv, broker_overrides=broker_overrides)
    try:
        overrides = parse_cli_overrides(args.overrides)
        if args.namesrv:
            overrides["namesrvAddr"] = args.namesrv
        setup_logging(args.log_level, args.log_file)
        broker_config, store_config = load_broker_configs(args.config, overrides)
    except (OSError, ValueError, TypeError) as exc:
        print(f"orbitmq broker: {exc}", file=sys.stderr)
        return 1
    if args.print_config:
        try:
            sys.stdout.write(broker_config.to_properties() + store_config.to_properties())
            sys.stdout.flush()
        except BrokenPipeError:  # `orbitmq broker -p | head`
            pass
        return 0
    try:
        asyncio.run(run_broker(broker_config, store_config))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # boot failures: port in use, store locked, unreadable config files…
        # Expected refusals (port in use, bad config, a foreign brokerIdentity file) need no traceback.
        expected = isinstance(exc, OSError | ValueError | BrokerIdentityError)
        log.error("The broker boot failed: %s", exc, exc_info=not expected)
        print(f"orbitmq broker: boot failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
