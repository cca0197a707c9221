"""test_producer_acl_tls.py's tests against Apache RocketMQ's own NameServer and broker (5.5.0
standing in for 5.5.1, tests/support/apache.py) with ACL 2.0 (the same broker.conf keys) and TLS
only (TlsSystemConfig's tls.server.mode=enforcing with the test certificate): the Remoting
producer signs as AclClientRPCHook does and speaks TLS as Apache's own clients do. The module's
``cluster`` fixture overrides the OrbitMQ one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sdk.remoting_client.cluster import RemotingCluster, serve_cluster, start_apache_cluster
from tests.sdk.remoting_client.test_producer_acl_tls import (  # noqa: F401  (collected here against Apache)
    ADMIN,
    AUTH,
    test_plaintext_client_cannot_reach_enforcing_servers,
    test_signed_sends_over_tls,
)

# One worker runs the whole module (make test's `--dist loadgroup`).
pytestmark = pytest.mark.xdist_group("test_producer_acl_tls_apache")


# Apache's AuthConfig names no metadata providers by default (OrbitMQ's broker has its own store).
APACHE_AUTH = {
    "authenticationProvider": "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider",
    "authenticationMetadataProvider":
        "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider",
    "authorizationProvider": "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider",
    "authorizationMetadataProvider":
        "org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider",
}


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemotingCluster]:
    c = start_apache_cluster(tmp_path_factory.mktemp("remoting-acl-apache"), brokers=("broker-a",), tls=True,
                             **AUTH, **APACHE_AUTH)
    c.credentials = ADMIN
    yield from serve_cluster(request, c, "Apache cluster", kill=True)
