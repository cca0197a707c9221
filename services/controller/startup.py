"""``orbitmq controller`` (mqcontroller): start one controller node and run it until SIGINT/SIGTERM.

    orbitmq controller -c controller.conf [-p] [key=value ...]

-c reads a controller.conf (properties), -p prints the effective config and exits, and key=value
(or --key=value) pairs override the file, as upstream's command-line properties do.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from orbitmq.config import load_configs, parse_cli_overrides
from orbitmq.controller.config import ControllerConfig, ControllerConfigError
from orbitmq.controller.manager import ControllerManager
from orbitmq.log import setup_logging

log = logging.getLogger("orbitmq.controller")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="orbitmq controller", description="Start an OrbitMQ Controller node.")
    parser.add_argument("-c", "--configFile", dest="config_file", help="Controller config properties file")
    parser.add_argument("-p", "--printConfigItem", dest="print_config", action="store_true",
                        help="Print all config items")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    return parser


def load_controller_config(argv: Sequence[str]) -> tuple[ControllerConfig, argparse.Namespace]:
    args, extra = _parser().parse_known_args(list(argv))
    overrides = parse_cli_overrides([*args.overrides, *extra])
    (config,) = load_configs(args.config_file, overrides, ControllerConfig)
    if args.config_file:
        # runtime config updates are written back to the file the controller was started with
        config.config_store_path = args.config_file
    return config, args


async def run(config: ControllerConfig) -> int:
    manager = ControllerManager(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    try:
        await manager.start()
    except (OSError, ControllerConfigError) as exc:
        log.error("The Controller boot failed: %s", exc)
        await manager.shutdown()
        return 1
    tip = (f"The Controller boot success. serializeType=JSON, id={config.controller_d_leger_self_id}, "
           f"address {manager.address}, raft {manager.raft.self_raft_address}")
    log.info(tip)
    print(tip, flush=True)
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
