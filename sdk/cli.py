"""The single ``orbitmq`` command; each sub-command lives in its own package.

Targets are imported only when chosen, so ``orbitmq admin`` does not pay for the broker's
imports and a component that is not built yet does not break the others.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import os
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


# Commands that run servers: ORBITMQ_EVENT_LOOP=uvloop runs their event loops on uvloop.
SERVER_COMMANDS = frozenset({"local", "namesrv", "broker", "controller", "proxy"})


def select_event_loop(command: str, env: dict[str, str] | None = None) -> str:
    """The event loop a server command runs on: "asyncio" (default) or "uvloop" when the setting
    ORBITMQ_EVENT_LOOP=uvloop asks for it and uvloop is installed (otherwise a warning, asyncio).
    Child processes (the broker of `orbitmq local`) inherit the setting with the environment.
    Issue 17 measured about 10 % less proxy CPU per single-message send on uvloop (docs/benchmarks.md)."""
    wanted = (env if env is not None else os.environ).get("ORBITMQ_EVENT_LOOP", "asyncio").strip().lower()
    if command not in SERVER_COMMANDS or wanted in ("", "asyncio"):
        return "asyncio"
    if wanted != "uvloop":
        print(f"orbitmq: ORBITMQ_EVENT_LOOP={wanted!r} is not asyncio or uvloop; using asyncio", file=sys.stderr)
        return "asyncio"
    try:
        import uvloop
    except ImportError:
        print("orbitmq: ORBITMQ_EVENT_LOOP=uvloop but uvloop is not installed; using asyncio", file=sys.stderr)
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


def _dispatch(command: str, rest: list[str]) -> int:
    module_name, _help = COMMANDS[command]
    select_event_loop(command)
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
