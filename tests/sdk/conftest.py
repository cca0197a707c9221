"""Fixtures of the SDK tests: `orbitmq local` and a cluster with two proxies, as real processes.

Both are session-scoped (each costs seconds to start); tests use topic and group names of their
own. ``env`` is parametrized over the two, so every SDK test runs against each.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.interop.harness import Cluster, start_cluster
from tests.support import ProcessRunner, free_port

# Shorter floors than RocketMQ's defaults keep receive/retry tests quick (as tests/interop does).
PROXY_OVERRIDES = ["grpcClientConsumerMinLongPollingTimeoutMillis=1000",
                   "grpcClientConsumerMaxLongPollingTimeoutMillis=3000", "minInvisibleTimeMillsForRecv=1000",
                   "defaultInvisibleTimeMills=3000", "renewAheadTimeMillis=1500", "renewSchedulePeriodMillis=300"]
# Transaction check-backs within seconds (RocketMQ's defaults: 30 s scans, 6 s timeout).
TRANSACTION_CHECKS = {"transactionCheckInterval": "500", "transactionTimeOut": "1500"}


@dataclass
class SdkEnv:
    """Where the SDK connects (``endpoints``) and how topics/groups are made (``cluster``)."""

    name: str
    cluster: Cluster

    @property
    def endpoints(self) -> str:
        return ";".join(self.cluster.proxies)


@pytest.fixture(scope="session")
def local_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkEnv]:
    workdir = tmp_path_factory.mktemp("sdk-local")
    runner = ProcessRunner(workdir)
    ns, broker, proxy = free_port(), free_port(), free_port()
    try:
        runner.start("local", ["--data-dir", str(workdir / "data"), "--namesrv-port", str(ns),
                               "--broker-port", str(broker), "--proxy-port", str(proxy), *PROXY_OVERRIDES,
                               # a port of its own: each pytest worker starts one `orbitmq local`, and two
                               # at once would both find the default 5557 free, then one fail to bind it
                               f"metricsPromExporterPort={free_port()}",
                               *(f"{k}={v}" for k, v in TRANSACTION_CHECKS.items())],
                     ready_text="Press Ctrl-C", ready_port=proxy, timeout=60, name="local")
        yield SdkEnv("local", Cluster(runner, f"127.0.0.1:{ns}", f"127.0.0.1:{broker}", [f"127.0.0.1:{proxy}"]))
    finally:
        runner.stop_all()


@pytest.fixture(scope="session")
def two_proxies_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkEnv]:
    # Routes refreshed every 2 s instead of 20: a test that grows a topic sees the new queues sooner.
    cluster = start_cluster(tmp_path_factory.mktemp("sdk-two-proxies"), proxies=2, broker_extra=TRANSACTION_CHECKS,
                            proxy_extra={"topicRouteServiceCacheRefreshSeconds": "2"})
    try:
        yield SdkEnv("two_proxies", cluster)
    finally:
        cluster.runner.stop_all()


@pytest.fixture(params=["local", "two_proxies"])
def env(request: pytest.FixtureRequest) -> Iterator[SdkEnv]:
    e: SdkEnv = request.getfixturevalue(f"{request.param}_env")
    yield e
    failed = any(getattr(getattr(request.node, f"rep_{p}", None), "failed", False) for p in ("setup", "call"))
    if failed:
        print(f"\n===== {e.name} logs =====\n" + e.cluster.runner.report(), file=sys.stderr)
