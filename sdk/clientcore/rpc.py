"""gRPC channels to the proxies and calls that fail over between them.

Proxies are stateless and interchangeable, so a call that cannot reach one endpoint (UNAVAILABLE)
is tried on the next; the endpoint that answered becomes the preferred one for later calls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc

from orbitmq.clientcore.config import ClientConfig
from orbitmq.clientcore.errors import ClientClosedError, TransportError
from orbitmq.clientcore.signing import request_metadata
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc

log = logging.getLogger("orbitmq.client.rpc")

# A 4 MiB body plus headers must pass (the official limits are larger than grpc's default 4 MiB).
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# Transport outcomes after which another proxy may well succeed.
_FAILOVER_CODES = frozenset({grpc.StatusCode.UNAVAILABLE})


class RpcClient:
    """One channel per endpoint (opened lazily), signed metadata per call, failover on UNAVAILABLE."""

    def __init__(self, config: ClientConfig, client_id: str) -> None:
        self.config = config
        self.client_id = client_id
        self.endpoints: list[str] = list(config.endpoint_list)
        self._preferred = 0
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, sgrpc.MessagingServiceStub] = {}
        # (endpoint, method) -> a unary callable taking an already serialized request.
        self._raw: dict[tuple[str, str], grpc.aio.UnaryUnaryMultiCallable] = {}
        self._closed = False
        self._credentials = self._channel_credentials() if config.tls else None

    def _channel_credentials(self) -> grpc.ChannelCredentials:
        def read(path: str | None) -> bytes | None:
            if not path:
                return None
            with open(path, "rb") as f:
                return f.read()
        config = self.config
        return grpc.ssl_channel_credentials(root_certificates=read(config.ca_file), private_key=read(config.key_file),
                                            certificate_chain=read(config.cert_file))

    def metadata(self) -> list[tuple[str, str]]:
        return request_metadata(self.client_id, self.config.namespace, self.config.credentials)

    def stub(self, endpoint: str) -> sgrpc.MessagingServiceStub:
        if self._closed:
            raise ClientClosedError()
        stub = self._stubs.get(endpoint)
        if stub is None:
            options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                       ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                       ("grpc.keepalive_time_ms", 30_000), *self.config.channel_options]
            if self._credentials is not None:
                if self.config.tls_server_name:
                    options.append(("grpc.ssl_target_name_override", self.config.tls_server_name))
                channel = grpc.aio.secure_channel(endpoint, self._credentials, options=options)
            else:
                channel = grpc.aio.insecure_channel(endpoint, options=options)
            self._channels[endpoint] = channel
            stub = self._stubs[endpoint] = sgrpc.MessagingServiceStub(channel)
        return stub

    def _raw_callable(self, endpoint: str, method: str, response_cls: type) -> grpc.aio.UnaryUnaryMultiCallable:
        key = (endpoint, method)
        fn = self._raw.get(key)
        if fn is None:
            self.stub(endpoint)
            fn = self._channels[endpoint].unary_unary(
                f"/apache.rocketmq.v2.MessagingService/{method}", request_serializer=bytes,
                response_deserializer=response_cls.FromString)
            self._raw[key] = fn
        return fn

    def ordered_endpoints(self) -> list[str]:
        """The preferred endpoint first, then the others in configured order."""
        n = len(self.endpoints)
        return [self.endpoints[(self._preferred + i) % n] for i in range(n)]

    def _prefer(self, endpoint: str) -> None:
        self._preferred = self.endpoints.index(endpoint)

    def rotate(self) -> None:
        """Move the preference to the next endpoint (after a failure a retry should go elsewhere)."""
        self._preferred = (self._preferred + 1) % len(self.endpoints)

    async def unary(self, method: str, request: Any, rpc_timeout: float | None = None,
                    endpoint: str | None = None, response_cls: type | None = None) -> Any:
        """Call ``method`` on the preferred endpoint, failing over to the others while unreachable.

        With ``response_cls`` the request is already serialized (bytes): a batch of messages
        serialized one by one is joined, not copied into a new request object.
        """
        timeout = self.config.request_timeout if rpc_timeout is None else rpc_timeout
        last: grpc.aio.AioRpcError | None = None
        tried: list[str] = []
        for ep in [endpoint] if endpoint else self.ordered_endpoints():
            tried.append(ep)
            try:
                fn = (getattr(self.stub(ep), method) if response_cls is None
                      else self._raw_callable(ep, method, response_cls))
                response = await fn(request, metadata=self.metadata(), timeout=timeout)
            except grpc.aio.AioRpcError as exc:
                last = exc
                if exc.code() in _FAILOVER_CODES:
                    log.debug("%s on %s unavailable: %s", method, ep, exc.details())
                    continue
                raise TransportError(f"{method} failed: {exc.code().name} {exc.details()}", exc.code(), tried) from None
            if endpoint is None:
                self._prefer(ep)
            return response
        assert last is not None
        raise TransportError(f"{method}: no endpoint reachable ({last.details()})", last.code(), tried)

    async def server_stream(self, method: str, request: Any, rpc_timeout: float) -> list[Any]:
        """A server-streaming call collected whole; fails over only before the first response."""
        last: grpc.aio.AioRpcError | None = None
        tried: list[str] = []
        for ep in self.ordered_endpoints():
            tried.append(ep)
            out: list[Any] = []
            try:
                call = getattr(self.stub(ep), method)(request, metadata=self.metadata(), timeout=rpc_timeout)
                async for item in call:
                    out.append(item)
            except grpc.aio.AioRpcError as exc:
                last = exc
                if exc.code() in _FAILOVER_CODES and not out:
                    continue
                raise TransportError(f"{method} failed: {exc.code().name} {exc.details()}", exc.code(), tried) from None
            self._prefer(ep)
            return out
        assert last is not None
        raise TransportError(f"{method}: no endpoint reachable ({last.details()})", last.code(), tried)

    def bidi(self, endpoint: str, requests: AsyncIterator[Any]) -> Any:
        """Open a Telemetry stream on ``endpoint`` (the caller reads it and handles its errors)."""
        return self.stub(endpoint).Telemetry(requests, metadata=self.metadata())

    async def close(self) -> None:
        self._closed = True
        channels = list(self._channels.values())
        self._channels.clear()
        self._stubs.clear()
        self._raw.clear()
        await asyncio.gather(*(c.close() for c in channels), return_exceptions=True)
