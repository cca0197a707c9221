"""``orbitmq namesrv`` (mqnamesrv): start a NameServer and run it until SIGINT/SIGTERM.

    orbitmq namesrv [-c namesrv.conf] [-p] [key=value ...]

-c reads a namesrv.conf (properties), -p prints the effective config and exits, and key=value
(or --key=value) pairs override the file, like upstream's command-line properties.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from orbitmq.common.runtime import freeze_startup_objects
from orbitmq.config import load_configs, parse_cli_overrides
from orbitmq.controller.config import ControllerConfigError, NamesrvControllerConfig
from orbitmq.controller.manager import ControllerManager
from orbitmq.log import setup_logging
from orbitmq.namesrv.config import NamesrvConfig
from orbitmq.namesrv.controller import NamesrvController

log = logging.getLogger("orbitmq.namesrv")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="orbitmq namesrv", description="Start an OrbitMQ NameServer.")
    parser.add_argument("-c", "--configFile", dest="config_file", help="Name server config properties file")
    parser.add_argument("-p", "--printConfigItem", dest="print_config", action="store_true",
                        help="Print all config items")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    return parser


def load_namesrv_config(argv: Sequence[str]) -> tuple[NamesrvConfig, argparse.Namespace]:
    """The NameServer's config; ``args.controller_config`` holds the embedded controller's keys."""
    args, extra = _parser().parse_known_args(list(argv))
    overrides = parse_cli_overrides([*args.overrides, *extra])
    config, args.controller_config = load_configs(args.config_file, overrides, NamesrvConfig,
                                                  NamesrvControllerConfig)
    if args.config_file:
        # As upstream, runtime config updates are written back to the file the server was started with.
        config.config_store_path = args.config_file
    return config, args


async def run(config: NamesrvConfig, controller_config: NamesrvControllerConfig | None = None) -> int:
    controller = NamesrvController(config)
    # enableControllerInNamesrv: a ControllerManager on its own port, in this process
    embedded = ControllerManager(controller_config or NamesrvControllerConfig()) \
        if config.enable_controller_in_namesrv else None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    try:
        await controller.start()
        if embedded is not None:
            await embedded.start()
    except (OSError, ControllerConfigError) as exc:
        log.error("The Name Server boot failed: %s", exc)
        if embedded is not None:
            await embedded.shutdown()
        await controller.shutdown()
        return 1
    freeze_startup_objects()
    tip = (f"The Name Server boot success. serializeType=JSON, "
           f"address {config.bind_address}:{controller.port}")
    log.info(tip)
    print(tip, flush=True)
    if embedded is not None:
        print(f"The Controller boot success. address {embedded.address}", flush=True)
    try:
        await stop.wait()
    finally:
        if embedded is not None:
            await embedded.shutdown()
        await controller.shutdown()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        config, args = load_namesrv_config(sys.argv[1:] if argv is None else argv)
    except (ValueError, OSError) as exc:
        print(f"orbitmq namesrv: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        sys.stdout.write(config.to_properties())
        if config.enable_controller_in_namesrv:
            sys.stdout.write(args.controller_config.to_properties())
        return 0
    setup_logging(args.log_level)
    log.info("namesrv config:\n%s", config.to_properties().rstrip())
    try:
        return asyncio.run(run(config, args.controller_config))
    except ValueError as exc:  # e.g. an unreadable kvConfig.json
        log.error("The Name Server boot failed: %s", exc)
        return 1
