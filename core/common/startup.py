"""What the server start-ups (``orbitmq namesrv``, ``controller``, ``broker``) have in common.

The mqnamesrv/mqcontroller command line (-c configFile, -p printConfigItem, --log-level and
key=value overrides), loading its configs, the SIGINT/SIGTERM stop event and the boot banner
that is both logged and printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from collections.abc import Sequence

from orbitmq.common.config import LoadedConfigs, load_configs, parse_cli_overrides


def server_parser(prog: str, description: str, config_help: str) -> argparse.ArgumentParser:
    """-c/--configFile (``config_file``), -p/--printConfigItem, --log-level and key=value overrides."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("-c", "--configFile", dest="config_file", help=config_help)
    parser.add_argument("-p", "--printConfigItem", dest="print_config", action="store_true",
                        help="Print all config items")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    return parser


def load_server_configs(parser: argparse.ArgumentParser, argv: Sequence[str],
                        *classes: type) -> tuple[LoadedConfigs, argparse.Namespace]:
    """Parse argv with a :func:`server_parser`; key=value or --key=value pairs override the file.

    As upstream, runtime config updates are written back to the file the server was started
    with: the first config's ``config_store_path`` becomes the -c file when one was given.
    """
    args, extra = parser.parse_known_args(list(argv))
    overrides = parse_cli_overrides([*args.overrides, *extra])
    configs = load_configs(args.config_file, overrides, *classes)
    if args.config_file:
        configs[0].config_store_path = args.config_file
    return configs, args


def stop_event_on_signals() -> asyncio.Event:
    """An event the running loop sets on SIGINT or SIGTERM (where the loop can handle signals)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    return stop


def announce(log: logging.Logger, message: str) -> None:
    """A boot banner: logged, and printed (flushed) for whoever watches stdout."""
    log.info(message)
    print(message, flush=True)
