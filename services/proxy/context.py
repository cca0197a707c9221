"""ProxyContext: who is calling, read from the gRPC metadata RocketMQ 5 clients send."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proxy.errors import ProxyError
from orbitmq.proxy.tls import _RELAYED_PEERS

CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"
CLIENT_VERSION = "x-mq-client-version"
PROTOCOL_VERSION = "x-mq-protocol"
NAMESPACE = "x-mq-namespace"
REQUEST_ID = "x-mq-request-id"


@dataclass
class ProxyContext:
    client_id: str
    language: str
    client_version: str
    remote_address: str
    namespace: str
    # Seconds left before the caller's deadline; None when the call has none.
    time_remaining: float | None

    @classmethod
    def from_grpc(cls, context: grpc.aio.ServicerContext) -> ProxyContext:
        # Every RPC starts here: one comprehension, positional arguments (same values as by keyword).
        md = {key.lower(): value for key, value in context.invocation_metadata() or () if isinstance(value, str)}
        get = md.get
        return cls(get(CLIENT_ID, ""), get(LANGUAGE, "JAVA"), get(CLIENT_VERSION, ""),
                   _peer_address(context.peer() or ""), get(NAMESPACE, ""), context.time_remaining())

    def require_client_id(self) -> None:
        """GrpcMessagingApplication.validateContext: every call must name its client."""
        if not self.client_id.strip():
            raise ProxyError(pb.Code.CLIENT_ID_REQUIRED, "client id cannot be empty")

    @property
    def remaining_ms(self) -> int | None:
        return None if self.time_remaining is None else int(self.time_remaining * 1000)


def _peer_address(peer: str) -> str:
    """grpc's "ipv4:1.2.3.4:5678" / "ipv6:[::1]:5678" -> "1.2.3.4:5678"."""
    address = peer[5:] if peer.startswith(_PEER_PREFIXES) else peer
    # spliced by the TLS front (permissive mode): the client's own address, not the loopback
    return _RELAYED_PEERS.get(address, address) if _RELAYED_PEERS else address


_PEER_PREFIXES = ("ipv4:", "ipv6:")  # both five characters long
