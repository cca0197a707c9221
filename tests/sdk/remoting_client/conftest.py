"""Fixtures of the Remoting client tests (tests/sdk/remoting_client/cluster.py has the helpers).

``remoting_cluster`` is module-scoped (starting it costs seconds): a NameServer and two broker
groups, broker-a and broker-b; tests use topic and group names of their own.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from tests.sdk.remoting_client.cluster import RemotingCluster, start_remoting_cluster


@pytest.fixture(scope="module")
def remoting_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                     ) -> Iterator[RemotingCluster]:
    cluster = start_remoting_cluster(tmp_path_factory.mktemp("remoting-client"))
    try:
        yield cluster
    finally:
        failed = request.session.testsfailed
        cluster.runner.stop_all()
        if failed:
            print("\n===== remoting cluster logs =====\n" + cluster.runner.report(), file=sys.stderr)
