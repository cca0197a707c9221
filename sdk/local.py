"""`orbitmq local`: a NameServer, a broker and a gRPC proxy in one process, ready for clients.

Defaults are RocketMQ's ports (9876, 10911, 8081) on 127.0.0.1, cluster DefaultCluster, data in
~/.orbitmq, topics and consumer groups created on first use. SIGINT/SIGTERM shut the three
down in reverse order, so the broker flushes and persists its offsets before the process exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from orbitmq.config import parse_cli_overrides
from orbitmq.log import setup_logging

DEFAULT_DATA_DIR = "~/.orbitmq"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="orbitmq local",
                                description="Run a NameServer, a broker and a gRPC proxy in one process.")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="where the store and configs live (~/.orbitmq)")
    p.add_argument("--host", default="127.0.0.1", help="address the services advertise and listen on")
    p.add_argument("--namesrv-port", type=int, default=9876)
    p.add_argument("--broker-port", type=int, default=10911)
    p.add_argument("--proxy-port", type=int, default=8081)
    p.add_argument("--log-level", default="WARNING", help="DEBUG, INFO, WARNING or ERROR")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="extra broker.conf / proxy settings")
    return p


def client_example(endpoint: str) -> str:
    """The two lines printed at start-up: enough to send a first message with the official client."""
    return ("from rocketmq import ClientConfiguration, Credentials, Message, Producer\n"
            f'p = Producer(ClientConfiguration("{endpoint}", Credentials())); p.startup(); '
            'm = Message(); m.topic = "TopicTest"; m.body = b"hello"; print(p.send(m)); p.shutdown()')


class LocalCluster:
    """The three services of `orbitmq local`, embeddable (tests, notebooks) with async start/stop."""

    def __init__(self, data_dir: str | Path = DEFAULT_DATA_DIR, host: str = "127.0.0.1", namesrv_port: int = 9876,
                 broker_port: int = 10911, proxy_port: int = 8081, overrides: dict[str, str] | None = None) -> None:
        self.data_dir = Path(data_dir).expanduser()
        self.host = host
        self.namesrv_port = namesrv_port
        self.broker_port = broker_port
        self.proxy_port = proxy_port
        self.overrides = dict(overrides or {})
        self.namesrv = None
        self.broker = None
        self.proxy = None

    @property
    def namesrv_addr(self) -> str:
        return f"{self.host}:{self.namesrv_port}"

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.proxy.port if self.proxy else self.proxy_port}"

    def _configs(self):
        from orbitmq.broker.config import BrokerConfig
        from orbitmq.broker.store.config import MessageStoreConfig
        from orbitmq.config import load_configs
        from orbitmq.namesrv.config import NamesrvConfig
        from orbitmq.proxy.config import ProxyConfig

        values = {
            # NameServer
            "listenPort": str(self.namesrv_port),
            "kvConfigPath": str(self.data_dir / "namesrv" / "kvConfig.json"),
            "configStorePath": str(self.data_dir / "namesrv" / "namesrv.properties"),
        }
        (namesrv_cfg,) = load_configs(None, values, NamesrvConfig)
        broker_values = {
            "brokerClusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": "0",
            "brokerIP1": self.host, "listenPort": str(self.broker_port), "haListenPort": str(self.broker_port + 1),
            "namesrvAddr": self.namesrv_addr, "storePathRootDir": str(self.data_dir / "store"),
            "autoCreateTopicEnable": "true", "autoCreateSubscriptionGroup": "true", "flushDiskType": "ASYNC_FLUSH",
            # A 4 MiB body plus the rest of its record (RocketMQ 5 bounds the body, not the record).
            "maxMessageSize": str(4 * 1024 * 1024 + 64 * 1024),
        }
        proxy_values = {"namesrvAddr": self.namesrv_addr, "grpcServerPort": str(self.proxy_port),
                        "autoCreateTopicEnable": "true"}
        broker_keys = set(BrokerConfig.config_keys()) | set(MessageStoreConfig.config_keys())
        for key, value in self.overrides.items():
            if key in broker_keys:
                broker_values[key] = value
            if key in ProxyConfig.config_keys():
                proxy_values[key] = value
        broker_cfg, store_cfg = load_configs(None, broker_values, BrokerConfig, MessageStoreConfig)
        broker_cfg.resolve_defaults()
        (proxy_cfg,) = load_configs(None, proxy_values, ProxyConfig)
        return namesrv_cfg, broker_cfg, store_cfg, proxy_cfg

    async def start(self) -> None:
        from orbitmq.broker.controller import BrokerController
        from orbitmq.namesrv.controller import NamesrvController
        from orbitmq.proxy.server import ProxyServer

        self.data_dir.mkdir(parents=True, exist_ok=True)
        namesrv_cfg, broker_cfg, store_cfg, proxy_cfg = self._configs()
        try:
            self.namesrv = NamesrvController(namesrv_cfg)
            await self.namesrv.start()
            self.broker = BrokerController(broker_cfg, store_cfg, listen_host=self.host)
            await self.broker.start()
            self.proxy = ProxyServer(proxy_cfg, host=self.host)
            await self.proxy.start()
        except BaseException:
            await self.shutdown()
            raise

    async def shutdown(self) -> None:
        for attr in ("proxy", "broker", "namesrv"):
            service = getattr(self, attr)
            if service is not None:
                setattr(self, attr, None)
                with contextlib.suppress(Exception):
                    await service.shutdown()


async def run(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.data_dir, args.host, args.namesrv_port, args.broker_port, args.proxy_port,
                           parse_cli_overrides(args.overrides))
    await cluster.start()
    print(f"OrbitMQ is running. gRPC endpoint: {cluster.endpoint}  (NameServer {cluster.namesrv_addr}, "
          f"broker {args.host}:{args.broker_port}, data {cluster.data_dir})", flush=True)
    print("Send a first message with the official client (pip install rocketmq-python-client):", flush=True)
    print(client_example(cluster.endpoint), flush=True)
    print("Press Ctrl-C to stop.", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await cluster.shutdown()
        print("OrbitMQ stopped.", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        setup_logging(args.log_level)
        parse_cli_overrides(args.overrides)
    except ValueError as exc:
        print(f"orbitmq local: {exc}", file=sys.stderr)
        return 1
    try:
        return asyncio.run(run(args))
    except OSError as exc:
        print(f"orbitmq local: {exc}", file=sys.stderr)
        return 1
