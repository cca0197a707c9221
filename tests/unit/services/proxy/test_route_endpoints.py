"""The endpoints QueryRoute/QueryAssignment name (RouteActivity#convertToAddressList): the host
the client dialled with grpcServerPort, or with its port too under useEndpointPortFromRequest;
localServeAddr wins over both."""

from __future__ import annotations

from orbitmq.common.config import load_configs
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.route import RouteActivity

DIALLED = pb.Endpoints(scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host="node-1.example", port=30081),
                                                                   pb.Address(host="10.0.0.7", port=30081)])


def endpoints(**keys: str) -> list[tuple[str, int]]:
    config = load_configs(None, {"grpcServerPort": "8081", **keys}, ProxyConfig)[0]
    out = RouteActivity(config, None).proxy_endpoints(DIALLED)  # type: ignore[arg-type]
    return [(a.host, a.port) for a in out.addresses]


def test_default_names_the_dialled_host_with_the_proxy_port() -> None:
    assert endpoints() == [("node-1.example", 8081), ("10.0.0.7", 8081)]
    assert DIALLED.addresses[0].port == 30081  # the request itself is left alone


def test_use_endpoint_port_from_request_keeps_the_dialled_port() -> None:
    assert endpoints(useEndpointPortFromRequest="true") == [("node-1.example", 30081), ("10.0.0.7", 30081)]


def test_local_serve_addr_wins() -> None:
    assert endpoints(localServeAddr="proxy.example:9081", useEndpointPortFromRequest="true") == [
        ("proxy.example", 9081)]


def test_no_dialled_address_names_loopback() -> None:
    config = ProxyConfig(grpc_server_port=8081)
    out = RouteActivity(config, None).proxy_endpoints(pb.Endpoints())  # type: ignore[arg-type]
    assert [(a.host, a.port) for a in out.addresses] == [("127.0.0.1", 8081)]
