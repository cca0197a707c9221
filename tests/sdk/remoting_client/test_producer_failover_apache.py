"""test_producer_failover.py's tests against Apache RocketMQ's own NameServer and brokers (5.5.0
standing in for 5.5.1, tests/support/apache.py): a broker group killed under the Remoting producer
moves its sends to the other group with Apache's servers too. The module's ``cluster`` fixture
overrides the OrbitMQ one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sdk.remoting_client.cluster import RemotingCluster, serve_cluster, start_apache_cluster
from tests.sdk.remoting_client.test_producer_failover import (  # noqa: F401  (collected here against Apache)
    test_a_new_topic_goes_through_the_default_route,
    test_sends_move_to_the_live_broker_group,
)

# One worker runs the whole module (make test's `--dist loadgroup`): the tests kill its brokers.
pytestmark = pytest.mark.xdist_group("test_producer_failover_apache")


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemotingCluster]:
    c = start_apache_cluster(tmp_path_factory.mktemp("remoting-failover-apache"), autoCreateTopicEnable="true")
    yield from serve_cluster(request, c, "Apache cluster", kill=True)
