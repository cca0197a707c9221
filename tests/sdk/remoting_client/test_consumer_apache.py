"""test_consumer.py's tests against Apache RocketMQ's own NameServer and brokers (5.5.0 standing in
for 5.5.1, tests/support/apache.py): the push and lite pull consumers are RocketMQ clients, not
OrbitMQ-only ones. The module's ``remoting_cluster`` fixture overrides conftest.py's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sdk.remoting_client.cluster import RemotingCluster, serve_cluster, start_apache_cluster
from tests.sdk.remoting_client.test_consumer import (  # noqa: F401  (collected here against Apache)
    test_broadcasting_local_offsets_resume,
    test_compressed_bodies_arrive_inflated,
    test_concurrent_push_consumer_receives_everything,
    test_consume_from_first_last_timestamp,
    test_consumer_started_before_its_topic_exists,
    test_heartbeat_v2_fingerprints_and_a_subscription_change,
    test_killed_consumer_queues_move_nothing_lost,
    test_lite_pull_assign_seek_and_auto_commit,
    test_lite_pull_subscribe_poll_and_commit,
    test_offset_illegal_is_corrected,
    test_orderly_consume_hooks_see_each_outcome,
    test_orderly_keeps_queue_order_under_broker_locks,
    test_reconsume_later_retries_then_dead_letter,
    test_sync_lite_pull_wrapper,
    test_tag_and_sql92_subscriptions,
    test_two_instances_share_queues_and_take_over,
)

# One worker runs the whole module (make test's `--dist loadgroup`): a second would start a
# second Apache cluster for its share of the tests.
pytestmark = pytest.mark.xdist_group("test_consumer_apache")


@pytest.fixture(scope="module")
def remoting_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                     ) -> Iterator[RemotingCluster]:
    cluster = start_apache_cluster(tmp_path_factory.mktemp("remoting-consumer-apache"))
    yield from serve_cluster(request, cluster, "Apache cluster", kill=True)
