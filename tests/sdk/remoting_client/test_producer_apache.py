"""test_producer.py's tests against Apache RocketMQ's own NameServer and brokers (5.5.0 standing in
for 5.5.1, tests/support/apache.py): the Remoting producer is a RocketMQ client, not an
OrbitMQ-only one. The module's ``remoting_cluster`` fixture overrides conftest.py's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sdk.remoting_client.cluster import RemotingCluster, serve_cluster, start_apache_cluster
from tests.sdk.remoting_client.test_producer import (  # noqa: F401  (collected here against Apache)
    test_bad_input_raises_before_sending_with_codes,
    test_every_send_mode_is_read_back,
    test_heartbeat_registers_and_shutdown_unregisters,
    test_large_bodies_travel_compressed,
    test_lz4_and_zstd_bodies_keep_their_type_through_a_commit,
    test_request_reply_and_timeout,
    test_routes_are_refreshed_in_the_background,
    test_selector_keeps_one_order_on_one_queue,
    test_synchronous_wrapper,
    test_trace_records_are_written_and_queryable,
    test_transactions_commit_rollback_and_check_back,
)

# One worker runs the whole module (make test's `--dist loadgroup`): a second would start a
# second Apache cluster for its share of the tests.
pytestmark = pytest.mark.xdist_group("test_producer_apache")


@pytest.fixture(scope="module")
def remoting_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                     ) -> Iterator[RemotingCluster]:
    cluster = start_apache_cluster(tmp_path_factory.mktemp("remoting-apache"))
    yield from serve_cluster(request, cluster, "Apache cluster", kill=True)
