"""``orbitmq controller`` (mqcontroller): start one controller node and run it until SIGINT/SIGTERM.

    orbitmq controller -c controller.conf [-p] [key=value ...]

-c reads a controller.conf (properties), -p prints the effective config and exits, and key=value
(or --key=value) pairs override the file, as upstream's command-line properties do.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence

from orbitmq.common.log import setup_logging
from orbitmq.common.startup import announce, load_server_configs, server_parser, stop_event_on_signals
from orbitmq.controller.config import ControllerConfig, ControllerConfigError
from orbitmq.controller.manager import ControllerManager

log = logging.getLogger("orbitmq.controller")


def _parser() -> argparse.ArgumentParser:
    return server_parser("orbitmq controller", "Start an OrbitMQ Controller node.",
                         "Controller config properties file")


def load_controller_config(argv: Sequence[str]) -> tuple[ControllerConfig, argparse.Namespace]:
    # runtime config updates are written back to the file the controller was started with
    (config,), args = load_server_configs(_parser(), argv, ControllerConfig)
    return config, args


async def run(config: ControllerConfig) -> int:
    manager = ControllerManager(config)
    stop = stop_event_on_signals()
    try:
        await manager.start()
    except (OSError, ControllerConfigError) as exc:
        log.error("The Controller boot failed: %s", exc)
        await manager.shutdown()
        return 1
    tip = (f"The Controller boot success. serializeType=JSON, id={config.controller_d_leger_self_id}, "
           f"address {manager.address}, raft {manager.raft.self_raft_address}")
    announce(log, tip)
    try:
        await stop.wait()
    finally:
        await manager.shutdown()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        config, args = load_controller_config(sys.argv[1:] if argv is None else argv)
        if not args.print_config:
            config.validate()
    except (ValueError, OSError) as exc:
        print(f"orbitmq controller: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        sys.stdout.write(config.to_properties())
        return 0
    setup_logging(args.log_level)
    log.info("controller config:\n%s", config.to_properties().rstrip())
    return asyncio.run(run(config))
