"""`orbitmq admin <command> [options]`: mqadmin's command names and flags over Remoting.

Every command takes ``-n host:port[;host:port]`` (else NAMESRV_ADDR) and ``--json``. Output is
an aligned table by default and JSON with ``--json``; any failure prints one line
"orbitmq admin <command>: <reason>" on stderr and exits 1 (2 for a usage error).

The commands live in ``orbitmq.admin.commands`` (one module per mqadmin package) and register
themselves in ``orbitmq.admin.registry`` when imported; this module imports them and parses.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from orbitmq.admin.admin_api import AdminError, MQAdminExt
from orbitmq.admin.commands import (
    auth,
    broker,
    cluster,
    connection,
    consumer,
    controller,
    export,
    grpc_admin,
    ha,
    message,
    namesrv,
    offset,
    producer,
    queue,
    stats,
    topic,
    trace,
)
from orbitmq.admin.output import to_json
from orbitmq.admin.registry import COMMANDS, Handler, Result, UsageError
from orbitmq.auth.client import install_signing
from orbitmq.client import MQBrokerError, MQClientError, resolve_namesrv_addr
from orbitmq.common.route import RouteDataError
from orbitmq.remoting.errors import RemotingError
from orbitmq.remoting.tls import DEFAULT_TLS_CONFIG_FILE, tool_ssl_context

EXIT_FAILURE = 1
EXIT_USAGE = 2

# The command modules, in the order `orbitmq admin --help` lists their commands (each module's
# in the order it registers them).
PACKAGES = (topic, consumer, offset, message, trace, cluster, broker, namesrv, connection, producer, queue,
            stats, export, auth, controller, ha, grpc_admin)


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line instead of exiting with the usage text."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _listed() -> list[str]:
    """COMMANDS' names grouped by PACKAGES (a command registered elsewhere comes last)."""
    rank = {module.__name__: i for i, module in enumerate(PACKAGES)}
    return sorted(COMMANDS, key=lambda name: rank.get(COMMANDS[name][2].__module__, len(rank)))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="orbitmq admin", description="OrbitMQ administration (mqadmin commands).")
    sub = parser.add_subparsers(dest="command", metavar="<command>", parser_class=_Parser)
    for name in _listed():
        help_text, configure, _handler = COMMANDS[name]
        # argparse %-formats help strings: resendMsgById's names %RETRY%<group>.
        p = sub.add_parser(name, help=help_text.replace("%", "%%"), description=help_text)
        p.add_argument("-n", "--namesrvAddr", dest="namesrv", help="NameServer address list, e.g. 127.0.0.1:9876")
        p.add_argument("--json", action="store_true", help="print JSON for scripts")
        p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for each answer")
        p.add_argument("--accessKey", dest="access_key", default=os.environ.get("ORBITMQ_ACCESS_KEY"),
                       help="ACL 2.0: sign requests as this user (else ORBITMQ_ACCESS_KEY)")
        p.add_argument("--secretKey", dest="secret_key", default=os.environ.get("ORBITMQ_SECRET_KEY"),
                       help="ACL 2.0: that user's password (else ORBITMQ_SECRET_KEY)")
        p.add_argument("--tls", action="store_true", default=_env_true("ORBITMQ_TLS_ENABLE"),
                       help="talk to NameServers, brokers and controllers over TLS (tls.enable; else "
                            "ORBITMQ_TLS_ENABLE=true)")
        p.add_argument("--tlsConfigFile", dest="tls_config_file", default=os.environ.get("ORBITMQ_TLS_CONFIG_FILE"),
                       help="properties file of tls.client.* keys (upstream's tls.config.file; default "
                            f"{DEFAULT_TLS_CONFIG_FILE} when it exists): certPath/keyPath for mutual TLS, "
                            "authServer/trustCertPath")
        configure(p)
    return parser


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() == "true"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, MQBrokerError):
        where = f" (broker {exc.addr})" if exc.addr else ""
        return f"{exc.remark or 'request refused'} [code {exc.code}]{where}"
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())


async def _run(handler: Handler, args: argparse.Namespace) -> Result:
    if getattr(handler, "without_namesrv", False):  # controller commands talk to -a only
        return await handler(None, args)  # type: ignore[arg-type]
    addrs = resolve_namesrv_addr(args.namesrv)
    async with MQAdminExt(addrs, timeout=args.timeout) as admin:
        admin.api.remoting.ssl_context = tool_ssl_context(args.tls, args.tls_config_file)
        if args.access_key:  # ACL 2.0: sign every request (AclClientRPCHook)
            install_signing(admin.api.remoting, (args.access_key, args.secret_key or ""))
        return await handler(admin, args)


def _usage_error(parser: argparse.ArgumentParser, name: str, exc: UsageError) -> int:
    """The command's usage on stdout, the one-line reason on stderr; exit 2."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            print(action.choices[name].format_usage().rstrip(), flush=True)
    print(f"orbitmq admin {name}: {exc}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv or argv[0] in ("-h", "--help", "help"):
        parser.print_help()
        return 0 if argv else EXIT_USAGE
    name = argv[0]
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        return _usage_error(parser, name, exc)
    _help, _configure, handler = COMMANDS[args.command]
    try:
        result = asyncio.run(_run(handler, args))
    except UsageError as exc:  # flags that parse but do not fit together (e.g. neither -b nor -c)
        return _usage_error(parser, name, exc)
    except (AdminError, MQBrokerError, MQClientError, RemotingError, RouteDataError, ValueError, OSError) as exc:
        print(f"orbitmq admin {args.command}: {_reason(exc)}", file=sys.stderr)
        return EXIT_FAILURE
    try:
        if args.json or result.text is not None:  # None: the command printed its lines as it went
            print(to_json(result.data) if args.json else result.text, flush=True)
    except BrokenPipeError:  # e.g. piped into head: the reader has what it wanted
        sys.stderr.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
