"""Fixtures of the Remoting client tests (tests/sdk/remoting_client/cluster.py has the helpers).

``remoting_cluster`` is module-scoped (starting it costs seconds): a NameServer and two broker
groups, broker-a and broker-b; tests use topic and group names of their own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sdk.remoting_client.cluster import (
    RemotingCluster,
    serving,
    start_apache_cluster,
    start_remoting_cluster,
)


@pytest.fixture(scope="module")
def remoting_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                     ) -> Iterator[RemotingCluster]:
    with serving(request.session, start_remoting_cluster(tmp_path_factory.mktemp("remoting-client"))) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def apache_remoting_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                            ) -> Iterator[RemotingCluster]:
    """The same cluster of Apache RocketMQ's own servers, shared by the modules of cluster.APACHE_GROUP
    (an Apache broker takes 10-40 s to start on this machine)."""
    cluster = start_apache_cluster(tmp_path_factory.mktemp("remoting-client-apache"))
    with serving(request.session, cluster, kill=True) as cluster:
        yield cluster
