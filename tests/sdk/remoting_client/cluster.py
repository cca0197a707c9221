"""The cluster of the Remoting client tests: a NameServer and broker groups as real processes.

Topics are created on every broker group (``create_topic``) with autoCreateTopicEnable off, so
"no route" is observable; transaction check-backs come within seconds. ``start_remoting_cluster``
starts one (conftest.py's module-scoped ``remoting_cluster``, or a module's own for a killed
broker, ACL or TLS).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from orbitmq.client import MQClientAPI
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from tests.interop.harness import _run, unique
from tests.support import ManagedProcess, ProcessRunner, start_broker, start_namesrv
from tests.support.services import NAMESRV_BOOT_TEXT

T = TypeVar("T")

__all__ = ["RemotingCluster", "start_remoting_cluster", "unique"]

CLUSTER_NAME = "RemotingCluster"
# autoCreateTopicEnable off: a topic exists once a test creates it; checks within seconds; sends
# wait up to 5 s in the broker's send queue before being shed (as tests/support/apache.py's
# SEND_QUEUE_WAIT_MS: these tests send to chosen queues, which clients do not retry)
BROKER_KEYS: dict[str, str] = {
    "brokerClusterName": CLUSTER_NAME, "autoCreateTopicEnable": "false", "transactionCheckInterval": "500",
    "transactionTimeOut": "1500", "traceTopicEnable": "true", "enablePropertyFilter": "true",
    "flushDiskType": "ASYNC_FLUSH", "waitTimeMillsInSendQueue": "5000"}


@dataclass
class RemotingCluster:
    runner: ProcessRunner
    namesrv: str
    brokers: dict[str, str]  # brokerName -> master address
    processes: dict[str, ManagedProcess] = field(default_factory=dict)
    credentials: tuple[str, str] | None = None  # signs the admin calls of an ACL cluster
    tls: bool = False  # the admin calls of a TLS (enforcing) cluster go over TLS
    # starts the NameServer again on its address (after a test killed it), returning the process
    restart_namesrv: Callable[[], ManagedProcess] | None = None

    def api_call(self, fn: Callable[[MQClientAPI], Awaitable[T]]) -> T:
        """Run ``fn(api)`` against the cluster (own loop and thread, usable from async tests)."""
        async def go() -> T:
            api = MQClientAPI(timeout=10)
            if self.tls:
                from orbitmq.remoting.tls import client_ssl_context
                api.remoting.ssl_context = client_ssl_context(type("Tls", (), {"tls_enable": True})())
            if self.credentials is not None:
                from orbitmq.auth.client import install_signing
                install_signing(api.remoting, self.credentials)
            try:
                return await fn(api)
            finally:
                await api.close()
        return _run(go())

    def create_topic(self, name: str, queues: int = 4, brokers: list[str] | None = None, perm: int = 6,
                     message_type: str | None = None) -> str:
        """Create ``name`` on the broker groups (all by default) and wait until the route lists them."""
        names = brokers or sorted(self.brokers)
        attrs = {"message.type": message_type} if message_type else {}

        async def go(api: MQClientAPI) -> None:
            for broker in names:
                await api.create_topic(self.brokers[broker], TopicConfig(name, queues, queues, perm=perm,
                                                                        attributes=attrs))
            deadline = asyncio.get_running_loop().time() + 10
            while True:
                try:
                    route = await api.get_topic_route(self.namesrv, name)
                    if {q.broker_name for q in route.queue_datas} >= set(names):
                        return
                except Exception:
                    if asyncio.get_running_loop().time() > deadline:
                        raise
                if asyncio.get_running_loop().time() > deadline:
                    raise TimeoutError(f"route of {name} never listed {names}")
                await asyncio.sleep(0.1)

        self.api_call(go)
        return name

    def create_group(self, name: str, orderly: bool = False, retry_max_times: int = 16) -> str:
        async def go(api: MQClientAPI) -> None:
            for addr in self.brokers.values():
                await api.create_subscription_group(addr, SubscriptionGroupConfig(
                    name, consume_message_orderly=orderly, retry_max_times=retry_max_times))
        self.api_call(go)
        return name


def start_remoting_cluster(workdir: Path, brokers: tuple[str, ...] = ("broker-a", "broker-b"),
                           namesrv_args: tuple[str, ...] = (), **keys: Any) -> RemotingCluster:
    """A NameServer (``namesrv_args`` on top) and one master per broker name (``keys`` on top of
    BROKER_KEYS). The caller stops ``runner``."""
    runner = ProcessRunner(workdir)
    try:
        ns_proc, namesrv = start_namesrv(runner, *namesrv_args, kv_path=workdir / "kv.json")

        def restart() -> ManagedProcess:
            argv = ns_proc.argv[ns_proc.argv.index("namesrv") + 1:]
            return runner.start("namesrv", argv, ready_port=int(namesrv.rsplit(":", 1)[1]),
                                ready_text=NAMESRV_BOOT_TEXT, name="namesrv-restarted")

        cluster = RemotingCluster(runner, namesrv, {}, {"namesrv": ns_proc}, restart_namesrv=restart)
        for name in brokers:
            proc, addr = start_broker(runner, workdir / name, namesrv, name=name, store=workdir / name / "store",
                                      **{**BROKER_KEYS, "brokerName": name, **keys})
            cluster.brokers[name] = addr
            cluster.processes[name] = proc
        return cluster
    except BaseException:
        runner.stop_all()
        raise




# Apache writes transaction op records in batches every transactionOpBatchInterval (3 s): with the
# 1.5 s transactionTimeOut above its check would ask about halves the producer already ended. And
# a half whose check-back was answered is checked again if the next check runs before that op
# record is written (TransactionalMessageCheckService): every answer commits once more, so on a
# loaded machine a check every 500 ms committed one message twice. Checks every 2 s leave room.
APACHE_KEYS: dict[str, str] = {"transactionOpBatchInterval": "100", "transactionCheckInterval": "2000"}


def start_apache_cluster(workdir: Path, brokers: tuple[str, ...] = ("broker-a", "broker-b"), tls: bool = False,
                         **keys: Any) -> RemotingCluster:
    """The same cluster of Apache RocketMQ's own servers (tests/support/apache.py: `make apache`):
    an Apache NameServer and one Apache master per broker name, with BROKER_KEYS; ``tls``: every
    server takes TLS only (tests/support/apache.py's TLS_FLAGS). The caller stops ``runner``."""
    from tests.support.apache import Apache

    runner = ProcessRunner(workdir)
    try:
        apache = Apache(runner, tls=tls)
        ns_proc, namesrv = apache.namesrv()

        def restart() -> ManagedProcess:
            return apache.namesrv("apache-namesrv-restarted", port=int(namesrv.rsplit(":", 1)[1]))[0]

        cluster = RemotingCluster(runner, namesrv, {}, {"namesrv": ns_proc}, tls=tls, restart_namesrv=restart)
        started = [apache.broker(namesrv, name, broker_name=name, cluster=CLUSTER_NAME, wait=False,
                                 **{k: v for k, v in {**BROKER_KEYS, **APACHE_KEYS, **keys}.items()
                                    if k != "brokerClusterName"})
                   for name in brokers]
        for broker in started:
            apache.wait_broker(broker, namesrv)
            cluster.brokers[broker.name] = broker.addr
            cluster.processes[broker.name] = broker.process
        return cluster
    except BaseException:
        runner.stop_all()
        raise


def serve_cluster(request: pytest.FixtureRequest, cluster: RemotingCluster, title: str = "remoting cluster",
                  kill: bool = False) -> Iterator[RemotingCluster]:
    """A module fixture's body: yield the cluster, stop it, and print its logs when a test failed.
    ``kill``: SIGKILL first (a throw-away store: spares Apache's JVMs their 6 s shutdowns)."""
    try:
        yield cluster
    finally:
        failed = request.session.testsfailed
        if kill:
            for proc in cluster.processes.values():
                if proc.is_running():
                    proc.kill()
        cluster.runner.stop_all()
        if failed:
            print(f"\n===== {title} logs =====\n" + cluster.runner.report(), file=sys.stderr)
