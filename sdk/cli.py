"""The single ``orbitmq`` command; each sub-command lives in its own package.

Targets are imported only when chosen, so ``orbitmq admin`` does not pay for the broker's
imports and a component that is not built yet does not break the others.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import sys
from collections.abc import Sequence

from orbitmq import __version__

# sub-command -> (module, help)
COMMANDS: dict[str, tuple[str, str]] = {
    "local": ("orbitmq.local", "run an all-in-one cluster: NameServer and proxy, the broker in a child process"),
    "namesrv": ("orbitmq.namesrv.startup", "start a NameServer (mqnamesrv)"),
    "broker": ("orbitmq.broker.startup", "start a Broker (mqbroker)"),
    "controller": ("orbitmq.controller.startup", "start a Controller (mqcontroller)"),
    "proxy": ("orbitmq.proxy.startup", "start a gRPC Proxy (mqproxy)"),
    "admin": ("orbitmq.admin.cli", "administration commands (mqadmin)"),
    "bench": ("orbitmq.bench.cli", "producer/consumer benchmarks"),
}

EXIT_NOT_BUILT = 2


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orbitmq",
        description="OrbitMQ: a RocketMQ 5-compatible messaging cluster.",
        epilog="Arguments after the sub-command go to it unchanged: orbitmq <command> --help",
    )
    parser.add_argument("--version", action="version", version=f"orbitmq {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for name, (_module, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _module_missing(exc: ModuleNotFoundError, module: str) -> bool:
    """True when the import failed because the target itself (or a parent) is absent."""
    missing = exc.name or ""
    return module == missing or module.startswith(missing + ".")


def _dispatch(command: str, rest: list[str]) -> int:
    module_name, _help = COMMANDS[command]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if not _module_missing(exc, module_name):
            raise
        print(f"orbitmq {command}: not built yet", file=sys.stderr)
        return EXIT_NOT_BUILT
    entry = getattr(module, "main", None)
    if not callable(entry):
        print(f"orbitmq {command}: {module_name} has no main(argv) entry point", file=sys.stderr)
        return EXIT_NOT_BUILT
    try:
        result = entry(rest)
        if inspect.isawaitable(result):
            result = asyncio.run(result)
    except KeyboardInterrupt:
        return 130
    if result is None:
        return 0
    return int(result)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in COMMANDS:
        return _dispatch(args[0], args[1:])
    parser = _build_parser()
    parser.parse_args(args)  # handles --help, --version and unknown commands (exits)
    parser.print_help(sys.stderr)
    return EXIT_NOT_BUILT


if __name__ == "__main__":
    sys.exit(main())
