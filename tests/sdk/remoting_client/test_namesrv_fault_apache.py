"""test_namesrv_fault.py's test against Apache RocketMQ's own NameServer and brokers (5.5.0
standing in for 5.5.1, tests/support/apache.py): the Remoting clients outlive a kill -9 of Apache's
NameServer on cached routes and learn the new queues from the restarted one. Apache's brokers
register at most every 10 s (BrokerController clamps registerNameServerPeriod), within the test's
waits. The module's ``ns_cluster`` fixture overrides the OrbitMQ one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sdk.remoting_client.cluster import RemotingCluster, serve_cluster, start_apache_cluster
from tests.sdk.remoting_client.test_namesrv_fault import (  # noqa: F401  (collected here against Apache)
    test_clients_outlive_a_namesrv_restart_and_refresh_routes,
)

pytestmark = pytest.mark.xdist_group("test_namesrv_fault_apache")


@pytest.fixture(scope="module")
def ns_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemotingCluster]:
    c = start_apache_cluster(tmp_path_factory.mktemp("remoting-ns-fault-apache"), registerNameServerPeriod="1000")
    yield from serve_cluster(request, c, "Apache cluster", kill=True)
