"""``orbitmq namesrv`` (mqnamesrv): start a NameServer and run it until SIGINT/SIGTERM.

    orbitmq namesrv [-c namesrv.conf] [-p] [key=value ...]

-c reads a namesrv.conf (properties), -p prints the effective config and exits, and key=value
(or --key=value) pairs override the file, like upstream's command-line properties.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence

from orbitmq.common.log import setup_logging
from orbitmq.common.runtime import freeze_startup_objects
from orbitmq.common.startup import announce, load_server_configs, server_parser, stop_event_on_signals
from orbitmq.controller.config import ControllerConfigError, NamesrvControllerConfig
from orbitmq.controller.manager import ControllerManager
from orbitmq.namesrv.config import NamesrvConfig
from orbitmq.namesrv.controller import NamesrvController

log = logging.getLogger("orbitmq.namesrv")


def _parser() -> argparse.ArgumentParser:
    return server_parser("orbitmq namesrv", "Start an OrbitMQ NameServer.", "Name server config properties file")


def load_namesrv_config(argv: Sequence[str]) -> tuple[NamesrvConfig, argparse.Namespace]:
    """The NameServer's config; ``args.controller_config`` holds the embedded controller's keys."""
    # As upstream, runtime config updates are written back to the file the server was started with.
    (config, controller_config), args = load_server_configs(_parser(), argv, NamesrvConfig,
                                                            NamesrvControllerConfig)
    args.controller_config = controller_config
    return config, args


async def run(config: NamesrvConfig, controller_config: NamesrvControllerConfig | None = None) -> int:
    controller = NamesrvController(config)
    # enableControllerInNamesrv: a ControllerManager on its own port, in this process
    embedded = ControllerManager(controller_config or NamesrvControllerConfig()) \
        if config.enable_controller_in_namesrv else None
    stop = stop_event_on_signals()
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
    announce(log, tip)
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
