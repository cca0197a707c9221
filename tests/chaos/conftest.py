"""Fixtures of the failover chaos tests: a controller-mode cluster as real processes."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support import ProcessRunner
from tests.support.ha_cluster import HACluster
from tests.support.netns import netns_unavailable


async def _start(cluster: HACluster, procs: ProcessRunner) -> None:
    """Start, printing the service logs when that fails: a setup error's report shows only what
    setup printed (the ``procs`` fixture prints its report at teardown, too late for it)."""
    try:
        await cluster.start()
    except BaseException:
        print("\n===== service logs (cluster start failed) =====\n" + procs.report(), file=sys.stderr)
        raise


@pytest.fixture
async def ha_cluster(procs: ProcessRunner, tmp_path: Path) -> AsyncIterator[HACluster]:
    """3 controllers, a NameServer, a broker set of 3 replicas (allAckInSyncStateSet) and a proxy."""
    cluster = HACluster(procs, tmp_path / "ha")
    try:
        await _start(cluster, procs)
        yield cluster
    finally:
        await cluster.close()


@pytest.fixture
async def partitionable_cluster(procs: ProcessRunner, tmp_path: Path) -> AsyncIterator[HACluster]:
    """The same cluster with each replica in its own network namespace, so a test can cut one off.

    Where the machine does not allow namespaces, partitions fall back to SIGSTOP (the issue's
    "partitions in network namespaces where the machine allows, SIGSTOP otherwise").
    """
    why_not = netns_unavailable()
    if why_not:
        print(f"network namespaces unavailable ({why_not}): partitions are simulated by SIGSTOP")
    cluster = HACluster(procs, tmp_path / "ha", isolated=why_not is None)
    try:
        await _start(cluster, procs)
        yield cluster
    finally:
        await cluster.close()
