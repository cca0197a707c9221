"""Fixtures of the interop tests: the session-wide cluster (see harness.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from tests.interop.harness import Cluster, start_cluster


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("interop-cluster")
    c = start_cluster(workdir)
    try:
        yield c
    finally:
        c.runner.stop_all()


@pytest.fixture(autouse=True)
def _cluster_logs_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    """Print the cluster's log tails under a failed test that used it."""
    yield
    if "cluster" not in request.fixturenames:
        return
    failed = any(getattr(getattr(request.node, f"rep_{p}", None), "failed", False) for p in ("setup", "call"))
    if failed:
        c = request.getfixturevalue("cluster")
        print("\n===== cluster logs =====\n" + c.runner.report(), file=sys.stderr)
