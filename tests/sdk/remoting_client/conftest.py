"""Fixtures of the Remoting client tests (tests/sdk/remoting_client/cluster.py has the helpers).

``remoting_cluster`` is module-scoped (starting it costs seconds): a NameServer and two broker
groups, broker-a and broker-b; tests use topic and group names of their own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sdk.remoting_client.cluster import RemotingCluster, serve_cluster, start_remoting_cluster


@pytest.fixture(scope="module")
def remoting_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                     ) -> Iterator[RemotingCluster]:
    cluster = start_remoting_cluster(tmp_path_factory.mktemp("remoting-client"))
    yield from serve_cluster(request, cluster)
