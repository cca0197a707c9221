"""Fixtures of the Remoting client tests (tests/sdk/remoting_client/cluster.py has the helpers).

``remoting_cluster`` is module-scoped (starting it costs seconds): a NameServer and two broker
groups, broker-a and broker-b; tests use topic and group names of their own.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from tests.sdk.remoting_client.cluster import RemotingCluster, start_apache_cluster, start_remoting_cluster


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


@pytest.fixture(scope="session")
def apache_remoting_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                            ) -> Iterator[RemotingCluster]:
    """The same cluster of Apache RocketMQ's own servers, shared by the modules of cluster.APACHE_GROUP
    (an Apache broker takes 10-40 s to start on this machine)."""
    cluster = start_apache_cluster(tmp_path_factory.mktemp("remoting-client-apache"))
    try:
        yield cluster
    finally:
        failed = request.session.testsfailed
        for proc in cluster.processes.values():  # a throw-away store: SIGKILL spares the JVMs' 6 s shutdowns
            if proc.is_running():
                proc.kill()
        cluster.runner.stop_all()
        if failed:
            print("\n===== Apache cluster logs =====\n" + cluster.runner.report(), file=sys.stderr)
