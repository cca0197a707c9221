"""Client exceptions carrying the server's ``apache.rocketmq.v2.Code``.

Named after the official clients' exception families (BadRequestException, NotFoundException,
TooManyRequestsException, ...), so a caller can catch a family or read ``code`` for the exact
status. Transport failures (no proxy reachable, deadline) keep the gRPC status code instead.
"""

from __future__ import annotations

import grpc

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb

Code = pb.Code


class ClientError(Exception):
    """A RocketMQ status other than OK; ``code`` is an ``apache.rocketmq.v2.Code`` value."""

    def __init__(self, code: int, message: str, request_id: str | None = None) -> None:
        self.code = int(code)
        self.message = message
        self.request_id = request_id
        super().__init__(f"{self.code_name} ({self.code}): {message}")

    @property
    def code_name(self) -> str:
        try:
            return Code.Name(self.code)
        except ValueError:
            return f"CODE_{self.code}"


class BadRequestError(ClientError):
    """40000-40099: the request (topic, group, tag, body, property...) is not acceptable."""


class UnauthorizedError(ClientError):
    """40100: credentials missing or wrong."""


class ForbiddenError(ClientError):
    """40300: no permission (e.g. no writable queue)."""


class NotFoundError(ClientError):
    """40400-40499: topic, group, offset or message not found."""


class PayloadTooLargeError(ClientError):
    """41300-41399: body or properties too large."""


class TooManyRequestsError(ClientError):
    """42900-42999: flow control; retried with backoff by the clients."""


class InternalError(ClientError):
    """50000-50099: a server-side failure."""


class ProxyTimeoutError(ClientError):
    """50400-50499: the proxy or a broker timed out (persistence timeouts included)."""


class UnsupportedError(ClientError):
    """50100 / 50500-50599: not implemented or not supported by this server."""


class TransportError(ClientError):
    """No usable answer from any endpoint; ``grpc_code`` says how the last attempt ended."""

    def __init__(self, message: str, grpc_code: grpc.StatusCode | None = None, endpoints: list[str] | None = None
                 ) -> None:
        self.grpc_code = grpc_code
        self.endpoints = list(endpoints or [])
        where = f" (endpoints tried: {', '.join(self.endpoints)})" if self.endpoints else ""
        super().__init__(Code.PROXY_TIMEOUT if grpc_code == grpc.StatusCode.DEADLINE_EXCEEDED
                         else Code.INTERNAL_ERROR, f"{message}{where}")


class ClientClosedError(ClientError):
    """The client was shut down (or never started) before this call."""

    def __init__(self, message: str = "client is not running") -> None:
        super().__init__(Code.PRECONDITION_FAILED, message)


def _family(code: int) -> type[ClientError]:
    if code == Code.UNAUTHORIZED:
        return UnauthorizedError
    if code == Code.FORBIDDEN:
        return ForbiddenError
    if code == Code.NOT_IMPLEMENTED or 50500 <= code < 50600:
        return UnsupportedError
    if 40000 <= code < 40100:
        return BadRequestError
    if 40400 <= code < 40500:
        return NotFoundError
    if 41300 <= code < 41400:
        return PayloadTooLargeError
    if 42900 <= code < 43000:
        return TooManyRequestsError
    if 50400 <= code < 50500:
        return ProxyTimeoutError
    if 40000 <= code < 50000:
        return BadRequestError
    return InternalError


def error_of(code: int, message: str, request_id: str | None = None) -> ClientError:
    """The exception for a non-OK status code (its family by code range, as the Java client does)."""
    return _family(int(code))(int(code), message, request_id)


def check_status(status: pb.Status, request_id: str | None = None, allowed: tuple[int, ...] = ()) -> None:
    """Raise the status's exception unless it is OK (or one of ``allowed``)."""
    if status.code != Code.OK and status.code not in allowed:
        raise error_of(status.code, status.message or Code.Name(status.code), request_id)


# Codes worth another attempt (maybe on another endpoint): the message was not refused for what it is.
RETRIABLE_CODES = frozenset({
    Code.TOO_MANY_REQUESTS, Code.INTERNAL_ERROR, Code.INTERNAL_SERVER_ERROR, Code.HA_NOT_AVAILABLE,
    Code.PROXY_TIMEOUT, Code.MASTER_PERSISTENCE_TIMEOUT, Code.SLAVE_PERSISTENCE_TIMEOUT, Code.REQUEST_TIMEOUT,
})


def is_retriable(exc: BaseException) -> bool:
    return isinstance(exc, TransportError) or (isinstance(exc, ClientError) and exc.code in RETRIABLE_CODES)
