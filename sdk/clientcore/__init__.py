"""What every OrbitMQ SDK client shares: config, signed gRPC calls with failover, Telemetry
session and server Settings, heartbeats, route cache, messages and errors."""

from orbitmq.clientcore.config import ClientConfig, Credentials
from orbitmq.clientcore.errors import (
    BadRequestError,
    ClientClosedError,
    ClientError,
    ForbiddenError,
    InternalError,
    NotFoundError,
    PayloadTooLargeError,
    ProxyTimeoutError,
    TooManyRequestsError,
    TransportError,
    UnauthorizedError,
    UnsupportedError,
)
from orbitmq.clientcore.message import Message, MessageQueue, ReceivedMessage, SendReceipt

__all__ = [
    "BadRequestError", "ClientClosedError", "ClientConfig", "ClientError", "Credentials", "ForbiddenError",
    "InternalError", "Message", "MessageQueue", "NotFoundError", "PayloadTooLargeError", "ProxyTimeoutError",
    "ReceivedMessage", "SendReceipt", "TooManyRequestsError", "TransportError", "UnauthorizedError",
    "UnsupportedError",
]
