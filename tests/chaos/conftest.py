"""Fixtures of the failover chaos tests: a controller-mode cluster as real processes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support import ProcessRunner
from tests.support.ha_cluster import HACluster


@pytest.fixture
async def ha_cluster(procs: ProcessRunner, tmp_path: Path) -> AsyncIterator[HACluster]:
    """3 controllers, a NameServer, a broker set of 3 replicas (allAckInSyncStateSet) and a proxy."""
    cluster = HACluster(procs, tmp_path / "ha")
    try:
        await cluster.start()
        yield cluster
    finally:
        await cluster.close()
